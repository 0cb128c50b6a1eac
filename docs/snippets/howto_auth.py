# --8<-- [start:head]
"""Task ownership with authentication: each caller only ever sees its own tasks.

Run it:  mcptasks serve docs/snippets/howto_auth.py --transport http --port 8000
"""

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp_types import CallToolResult

from mcptasks import Result, TaskServer
from mcptasks.client import TasksClient

# --8<-- [end:head]


# --8<-- [start:verifier]
class StaticTokens:
    """A `TokenVerifier` for the example. In production, validate your identity provider's JWTs
    (signature, expiry, audience) or call its introspection endpoint here."""

    def __init__(self) -> None:
        self.subjects = {"alice-token": "alice", "bob-token": "bob"}

    async def verify_token(self, token: str) -> AccessToken | None:
        subject = self.subjects.get(token)
        if subject is None:
            return None  # the request is rejected with HTTP 401
        return AccessToken(token=token, client_id="reports-ui", scopes=["reports"], subject=subject)


# --8<-- [end:verifier]


# --8<-- [start:server]
app = TaskServer(
    "private-reports",
    # Everything but store, config and lifespan goes to the SDK's MCPServer:
    token_verifier=StaticTokens(),
    auth=AuthSettings(
        issuer_url="https://auth.example.com",
        resource_server_url="https://reports.example.com/mcp",
        required_scopes=["reports"],
        validate_token_resource=False,  # StaticTokens checks nothing about audiences; a JWT verifier would
    ),
)


@app.task_tool(poll_interval=1.0)
async def payroll_report(month: str):
    """Build the payroll report for `month`."""
    yield f"collecting payroll for {month}"
    await anyio.sleep(0.2)
    yield Result(f"payroll {month}: 42 employees")


# --8<-- [end:server]


# --8<-- [start:client]
async def payroll_as(url: str, token: str, month: str) -> CallToolResult:
    """Call the tool as the holder of `token` and wait for the task's result."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, extensions=[TasksClient()]) as client:
            return await client.call_tool("payroll_report", {"month": month})


if __name__ == "__main__":
    app.run("http", port=8000)
# --8<-- [end:client]
