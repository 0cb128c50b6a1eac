"""The task dashboard mounted in the server's own HTTP app, behind the server's own login.

Run it:  OPS_PASSWORD=... OPS_TOKEN=... uvicorn docs.snippets.operate_dashboard:http_app --port 8000
         then open http://127.0.0.1:8000/ops/ (user "ops")
"""

import base64
import hmac
import os

import anyio
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mcptasks import Result, TaskServer
from mcptasks.dashboard import LOOPBACK_HOSTS, dashboard_app

app = TaskServer("ci-runner", store="sqlite:///tasks.db")


@app.task_tool(poll_interval=2.0)
async def run_pipeline(kind: str):
    """Run the CI pipeline."""
    yield f"running {kind}"
    await anyio.sleep(600)  # the long part
    yield Result(f"{kind} passed")


# --8<-- [start:mount]
def basic_auth(inner: ASGIApp, user: str, password: str) -> ASGIApp:
    """Let through only requests with HTTP Basic credentials `user:password` (your SSO goes here)."""
    expected = b"Basic " + base64.b64encode(f"{user}:{password}".encode())

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        given = dict(scope.get("headers", [])).get(b"authorization", b"")
        if scope["type"] == "http" and not hmac.compare_digest(given, expected):
            challenge = {"WWW-Authenticate": 'Basic realm="ops"'}
            await PlainTextResponse("login required", 401, headers=challenge)(scope, receive, send)
            return
        await inner(scope, receive, send)

    return guarded


http_app = app.streamable_http_app()  # serves /mcp
dashboard = dashboard_app(
    lambda: app.extension.engine.store,  # the store the server uses, opened by its lifespan
    token=os.environ.get("OPS_TOKEN"),  # enables the cancel button; None: read-only
    title="ci-runner tasks",
    allowed_hosts=["ci.example.com", *LOOPBACK_HOSTS],  # the names it is reached by; others get 421
)
http_app.mount("/ops", basic_auth(dashboard, "ops", os.environ.get("OPS_PASSWORD", "change-me")))
# --8<-- [end:mount]
