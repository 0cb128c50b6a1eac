"""The `TaskServer` that `tests/executors/test_owner_fairness.py` serves and works for as real
processes: two owners (bearer tokens `alice` and `bob`) of at most `PER_OWNER` active tasks
each, a slow tool and a quick one.

    mcptasks serve tests/fair_app.py --transport http --port P --store URL --enqueue-only
    mcptasks worker tests/fair_app.py --store URL --concurrency 2

Bodies leave evidence in `$MCPTASKS_FAIR_DIR`: `<task>.running` exists while a body runs, and
each body appends one line `<task> <running>` to `starts.log` as it starts, `<running>` being
how many bodies ran at that moment (itself included), over every worker process sharing the
directory. The most bodies ever running at once is the largest `<running>` written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio
from mcp.server.auth.settings import AuthSettings
from sdk_helpers import StaticTokens

from mcptasks import EngineConfig, Limits, Result, TaskContext, TaskServer

FAIR_DIR = Path(os.environ.get("MCPTASKS_FAIR_DIR") or tempfile.gettempdir())
PER_OWNER = 8
"""`Limits.max_active_per_owner`: an owner's ninth active task is refused."""

app = TaskServer(
    "mcptasks-fair",
    config=EngineConfig(limits=Limits(max_active_per_owner=PER_OWNER)),
    token_verifier=StaticTokens("alice", "bob"),
    auth=AuthSettings(
        issuer_url="http://127.0.0.1:9/",
        resource_server_url="http://127.0.0.1:9/mcp",
        validate_token_resource=False,
    ),
)


def _started(task_id: str) -> Path:
    marker = FAIR_DIR / f"{task_id}.running"
    marker.touch()
    running = len(list(FAIR_DIR.glob("*.running")))
    # one small O_APPEND write: lines from concurrent processes do not interleave
    with open(FAIR_DIR / "starts.log", "a", encoding="utf-8") as log:
        log.write(f"{task_id} {running}\n")
    return marker


@app.task_tool(poll_interval=0.1)
async def slow(ctx: TaskContext, seconds: float):
    """Run for `seconds`."""
    marker = _started(ctx.task_id)
    try:
        await anyio.sleep(seconds)
        yield Result({"slept": seconds})
    finally:
        marker.unlink()


@app.task_tool(poll_interval=0.1)
async def quick(ctx: TaskContext):
    """End at once."""
    marker = _started(ctx.task_id)
    try:
        yield Result({"quick": True})
    finally:
        marker.unlink()
