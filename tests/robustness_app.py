"""The server `tests/stores/test_heartbeats.py` runs as two real processes sharing one SQLite file, and
`tests/stores/test_store_outages.py` runs on a private Redis or PostgreSQL that it kills.

`MCPTASKS_WEDGE_LIMIT` sets the engine's `wedge_limit`; `MCPTASKS_LOOP_HEARTBEATS=1` turns the
heartbeat thread off (renewals on the event loop, as before), for the control run;
`MCPTASKS_INPUT_POLL` sets how often a body waiting for input re-reads its task.
"""

from __future__ import annotations

import os
import time

import anyio

from mcptasks import Accepted, Elicit, Result, TaskServer

app = TaskServer("mcptasks-robustness")
engine = app.extension.engine
if os.environ.get("MCPTASKS_WEDGE_LIMIT"):
    engine.wedge_limit = float(os.environ["MCPTASKS_WEDGE_LIMIT"])
if os.environ.get("MCPTASKS_INPUT_POLL"):
    engine.input_poll_interval = float(os.environ["MCPTASKS_INPUT_POLL"])
if os.environ.get("MCPTASKS_LOOP_HEARTBEATS") == "1":
    engine.heartbeat_thread = False


@app.task_tool(poll_interval=0.1)
async def block(seconds: float):
    """Block the whole event loop with `time.sleep` (what a careless body does), then finish."""
    await anyio.sleep(0.01)  # answered with a task first
    time.sleep(seconds)  # noqa: ASYNC251 - blocking the loop is the point
    yield Result({"pid": os.getpid(), "blocked": seconds})


@app.task_tool(poll_interval=0.1)
async def ask():
    """Ask one question and return the answer."""
    answer = yield Elicit("value?")
    yield Result({"answer": answer.data if isinstance(answer, Accepted) else None})
