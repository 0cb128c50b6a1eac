"""The server `benchmarks/http.py` and `benchmarks/stores.py` measure: zero-work task and plain
tools, task tools that suspend (1 ms, 10 ms) so every call really creates a task, and `ticker`
(timestamped status changes) for `benchmarks/push.py`."""

from __future__ import annotations

import time

import anyio

from mcptasks import Result, TaskServer

app = TaskServer("mcptasks-bench")


@app.tool()
def plain_noop() -> str:
    """An ordinary tool that does nothing (the baseline)."""
    return "ok"


@app.task_tool(poll_interval=0.05)
async def task_noop():
    """A task tool that does nothing (answered inline: immediate results)."""
    yield Result("ok")


@app.task_tool(poll_interval=0.05)
async def task_brief():
    """A task tool that suspends for 1 ms, so every call really creates a task."""
    await anyio.sleep(0.001)
    yield Result("ok")


@app.task_tool(poll_interval=0.05)
async def task_sleep():
    """A task tool that sleeps 10 ms: it suspends, so the call is answered with a task."""
    await anyio.sleep(0.01)
    yield Result("ok")


@app.task_tool(poll_interval=0.05)
async def task_park():
    """A task tool that sleeps 200 ms: long enough that, however loaded the machine, the call is
    answered with a task rather than with an immediate result."""
    await anyio.sleep(0.2)
    yield Result("ok")


@app.task_tool(poll_interval=1.0)
async def ticker(count: int, interval: float):
    """Set the status `count` times, `interval` seconds apart; each status carries the wall-clock
    time it was set (`tick <i> <epoch seconds>`), so a listener can measure push latency."""
    for i in range(count):
        await anyio.sleep(interval)
        yield f"tick {i} {time.time():.6f}"
    yield Result("ticked")
