"""The server `tests/stores/test_heartbeats.py` runs as two real processes sharing one SQLite file, and
`tests/stores/test_store_outages.py` runs on a private Redis or PostgreSQL that it kills.

The tests configure it through the environment (`EngineConfig.from_env`): `MCPTASKS_WEDGE_LIMIT`,
`MCPTASKS_HEARTBEAT_THREAD=false` (renewals on the event loop, for the control run) and
`MCPTASKS_INPUT_POLL_INTERVAL` (how often a body waiting for input re-reads its task).
"""

from __future__ import annotations

import os
import time

import anyio

from mcptasks import Accepted, Elicit, Result, TaskServer

app = TaskServer("mcptasks-robustness")  # no config: the environment's


@app.task_tool(poll_interval=0.1)
async def block(seconds: float):
    """Block the whole event loop with `time.sleep` (what a careless body does), then finish."""
    # Answered with a task first: the answer waits for the record's store write, which on a SQLite
    # file shared with a peer may wait for the peer's transaction; 0.5 s covers that.
    await anyio.sleep(0.5)
    time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the point
    yield Result({"pid": os.getpid(), "blocked": seconds})


@app.task_tool(poll_interval=0.1)
async def ask():
    """Ask one question and return the answer."""
    answer = yield Elicit("value?")
    yield Result({"answer": answer.data if isinstance(answer, Accepted) else None})
