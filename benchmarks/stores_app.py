"""The server `benchmarks/stores.py` measures: the tools of `http_app.py` plus a task tool whose body
sleeps 10 ms, so every call really creates a task (a zero-work body can be answered inline)."""

from __future__ import annotations

import anyio

from mcptasks import Result, TaskServer

app = TaskServer("mcptasks-bench-stores")


@app.tool()
def plain_noop() -> str:
    """An ordinary tool that does nothing (the baseline)."""
    return "ok"


@app.task_tool(poll_interval=0.05)
async def task_noop():
    """A task tool that does nothing."""
    yield Result("ok")


@app.task_tool(poll_interval=0.05)
async def task_sleep():
    """A task tool that sleeps 10 ms: it suspends, so the call is answered with a task."""
    await anyio.sleep(0.01)
    yield Result("ok")
