"""The server `benchmarks/http.py` measures: a zero-work task tool next to a zero-work plain tool."""

from __future__ import annotations

from mcptasks import Result, TaskServer

app = TaskServer("mcptasks-bench")


@app.tool()
def plain_noop() -> str:
    """An ordinary tool that does nothing (the baseline)."""
    return "ok"


@app.task_tool(poll_interval=0.05)
async def task_noop():
    """A task tool that does nothing."""
    yield Result("ok")
