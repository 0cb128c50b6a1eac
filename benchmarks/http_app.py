"""The server `benchmarks/http.py` and `benchmarks/stores.py` measure: zero-work task and plain
tools, task tools that suspend (1 ms, 10 ms, 200 ms) so every call really creates a task, and
`ticker` (timestamped status changes) for `benchmarks/push.py`.

Garbage-collector measurement (environment variables, set by `benchmarks/http.py`):
`MCPTASKS_BENCH_GC_STATS=FILE` times every collection and writes the pauses to FILE (JSON) when
the server stops; `MCPTASKS_BENCH_GC_FREEZE=0` undoes the GC tuning that `mcptasks serve` does once started
(`tune_gc`: the start-up heap is scanned by every full collection again, and young collections
run at CPython's default threshold of 700).
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from mcptasks import EngineConfig, Limits, Result, TaskServer

_pauses: list[tuple[int, float]] = []
_started: list[float] = []


def _time_collections(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        _pauses.append((int(info["generation"]), time.perf_counter() - _started.pop()))


def _write_gc_stats(path: str) -> None:
    with open(path, "w") as file:
        json.dump({"pauses": _pauses, "frozen": gc.get_freeze_count()}, file)


if os.environ.get("MCPTASKS_BENCH_GC_STATS"):
    gc.callbacks.append(_time_collections)


async def _unfreeze_soon() -> None:
    await anyio.sleep(1.0)  # after `mcptasks serve` tuned the collector
    gc.unfreeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(700, older, oldest)


@asynccontextmanager
async def lifespan(server: Any) -> AsyncIterator[dict[str, Any]]:
    """With `MCPTASKS_BENCH_GC_FREEZE=0`, undo the GC tuning `mcptasks serve` does once started
    (to measure without it); always start counting collections afresh."""
    async with anyio.create_task_group() as group:
        if os.environ.get("MCPTASKS_BENCH_GC_FREEZE") == "0":
            group.start_soon(_unfreeze_soon)
        _pauses.clear()  # collections during start-up are not what a request waits for
        yield {}
        group.cancel_scope.cancel()
    if os.environ.get("MCPTASKS_BENCH_GC_STATS"):
        _write_gc_stats(os.environ["MCPTASKS_BENCH_GC_STATS"])


# Throughput runs keep thousands of 200 ms bodies alive at once, more than `Limits`' default of
# 1,000 running tasks per owner (every benchmark request is the same anonymous owner); the push
# benchmark holds 10,000 listen streams of that one owner.
app = TaskServer(
    "mcptasks-bench",
    lifespan=lifespan,
    config=EngineConfig(
        limits=Limits(max_active_per_owner=None, max_listen_streams=20_000, max_listen_streams_per_owner=None)
    ),
)


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
