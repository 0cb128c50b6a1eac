"""One replica of a task server that runs several copies behind a load balancer.

Every replica runs this same file against the same shared store, e.g.:

    export MCPTASKS_SECRET=...          # python -c "import secrets; print(secrets.token_hex(32))"
    export MCP_REQUEST_STATE_KEY=...    # another one
    mcptasks serve docs/snippets/howto_replica.py --transport http --host 0.0.0.0 --port 8000 \
        --store redis://redis.internal:6379/0
"""

import os

import anyio
from mcp.server.mcpserver import RequestStateSecurity
from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, TaskServer

# --8<-- [start:server]
app = TaskServer(
    "deployer",  # the same name on every replica: the SDK binds requestState to it
    # No config: EngineConfig.from_env(), so mcptasks signs its part of requestState with
    # MCPTASKS_SECRET.
    # The SDK seals the whole requestState too; by default under a per-process key, so give
    # every replica the same key, or a retried call that lands on another replica is refused.
    request_state_security=RequestStateSecurity(keys=[os.environ["MCP_REQUEST_STATE_KEY"]]),
)
# --8<-- [end:server]


class Confirm(BaseModel):
    confirm: bool


# --8<-- [start:tool]
@app.task_tool(
    task_support="required",
    input_before_task=True,  # confirm on the call itself, before a task exists
    retry_on_crash=True,  # deploying one version twice is harmless: re-run if a replica dies
    max_attempts=3,
    poll_interval=2.0,
)
async def deploy(service: str, version: str):
    """Roll out `version` of `service`."""
    answer = yield Elicit(
        f"Deploy {service} {version} to production?", schema=Confirm, key="confirm", before_task=True
    )
    if not (isinstance(answer, Accepted) and answer.data.confirm):
        yield Result(f"{service} {version}: not deployed")
    for wave in range(1, 4):
        yield f"{service} {version}: wave {wave}/3"
        await anyio.sleep(0.1)
    yield Result(f"{service} {version} is live")


@app.task_tool(retry_on_crash=True, poll_interval=2.0)
async def warm_cache(region: str):
    """Pre-load the caches of `region` (safe to run twice)."""
    yield f"warming {region}"
    await anyio.sleep(0.2)
    yield Result(f"{region}: caches warm")


# --8<-- [end:tool]
