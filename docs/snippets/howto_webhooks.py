"""Task events sent to a webhook (configured in code), and what a receiver does with each one.

MCPTASKS_WEBHOOK_SECRET=whsec_... mcptasks serve docs/snippets/howto_webhooks.py --transport http
"""

import os

from pydantic import BaseModel
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from mcptasks import Accepted, Elicit, EngineConfig, Result, TaskServer

# --8<-- [start:server]
SECRET = os.environ["MCPTASKS_WEBHOOK_SECRET"]  # whsec_ + 24 to 64 random bytes in base64

config = EngineConfig.from_env(
    EngineConfig(webhooks=("https://hooks.example.com/mcptasks",), webhook_secret=SECRET)
)
app = TaskServer("deployer", store="sqlite:///tasks.db", config=config)


class Approval(BaseModel):
    approve: bool


@app.task_tool
async def deploy(service: str):
    """Deploy `service` once a person says yes."""
    answer = yield Elicit(f"Deploy {service} to production?", schema=Approval)
    if isinstance(answer, Accepted) and answer.data.approve:
        yield Result(f"deployed {service}")
    else:
        yield Result(f"{service} not deployed")


# --8<-- [end:server]


# --8<-- [start:receiver]
verifier = Webhook(SECRET)
seen: set[str] = set()  # a real receiver keeps these in its database, for a day or so


def receive(body: bytes, headers: dict[str, str]) -> int:
    """Handle one POST (the raw body, the headers lower-cased); the status to answer."""
    try:
        event = verifier.verify(body, headers)  # the signature, and a timestamp within 5 minutes
    except WebhookVerificationError:
        return 401
    if headers["webhook-id"] in seen:  # a retry, or another replica: the same event again
        return 200
    seen.add(headers["webhook-id"])
    task = event["data"]
    if event["type"] == "task.input_required":
        print(f"{task['tool']} asks: {list(task['inputRequests'].values())}")
    elif event["type"] == "task.completed":
        print(f"{task['tool']} completed: {task['result']['content'][0]['text']}")
    else:  # task.failed (task["error"] says why) or task.cancelled
        print(f"{task['tool']} ended {task['status']}")
    return 200  # answer 2xx quickly, after storing the event; 410 stops the deliveries for good


# --8<-- [end:receiver]
