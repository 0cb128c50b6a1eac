"""Answer deadlines: how long after its deadline a question is answered, in memory and after a restart.

    python benchmarks/deadlines.py            # 200 tasks
    python benchmarks/deadlines.py 1000

One engine on a fresh SQLite file starts N durable tasks that ask `Elicit("Ship it?", timeout=1)`
and nobody answers: the lateness of each deadline's answer (the record's `answer_log` time minus its
deadline) is printed as p50/p99/max. Then N tasks ask with `timeout=2`, the engine stops (the tasks
are handed over), the deadlines pass while no engine runs, and a second engine starts: the seconds
from its start until every task ended (declined) are printed.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

import anyio

from mcptasks import Elicit, EngineConfig, Result, task_tool
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord


@task_tool(durable=True)
async def gate(within: float) -> AsyncGenerator[Any, Any]:
    answer = yield Elicit("Ship it?", timeout=within)
    yield Result({"action": answer.action})


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def records_when(engine: TaskEngine, ids: Sequence[str], done: Any) -> list[TaskRecord]:
    """The records of `ids` once `done(record)` holds for each (polled)."""
    while True:
        records = [record for record in [await engine.store.get(i) for i in ids] if record is not None]
        if len(records) == len(ids) and all(done(record) for record in records):
            return records
        await anyio.sleep(0.05)


async def main(count: int) -> None:
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'tasks.db'}"
    config = EngineConfig(immediate_results=False)
    async with TaskEngine(url, config=config, tools=[gate]) as engine:
        ids = [(await engine.start(gate, {"within": 1.0}, owner="o")).task_id for _ in range(count)]
        records = await records_when(engine, ids, lambda r: r.terminal)
    late = [entry["at"] - entry["deadline"] for r in records for entry in r.answer_log.values()]
    print(
        f"in memory: {count} tasks, lateness p50 {percentile(late, 50) * 1000:.1f} ms, "
        f"p99 {percentile(late, 99) * 1000:.1f} ms, max {max(late) * 1000:.1f} ms"
    )
    entry = next(iter(records[0].answer_log.values()))
    print(f"one answer_log entry: {len(json.dumps(entry, separators=(',', ':')))} bytes of JSON")

    async with TaskEngine(url, config=config, tools=[gate]) as first:
        ids = [(await first.start(gate, {"within": 2.0}, owner="o")).task_id for _ in range(count)]
        await records_when(first, ids, lambda r: r.status == "input_required")
    await anyio.sleep(2.5)  # the deadlines pass while no engine runs
    started = time.monotonic()
    async with TaskEngine(url, config=config, tools=[gate]) as second:
        records = await records_when(second, ids, lambda r: r.terminal)
        took = time.monotonic() - started
    actions = sorted({str((r.result or {}).get("structuredContent", {}).get("action")) for r in records})
    print(
        f"after a restart: {count} overdue tasks ended ({', '.join(actions)}) {took:.2f} s after the engine started"
    )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
