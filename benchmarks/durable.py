"""Durable bodies (`durable=True`): what journalling steps costs, and how fast a long journal replays.

Run from the repository root:

    python benchmarks/durable.py                       # every backend, 500 tasks x 5 runs (~2 min)
    python benchmarks/durable.py --quick               # 100 tasks per figure, 1 run
    python benchmarks/durable.py --backends memory,sqlite --tasks 1000 --json out.json

In process, on the engine API (`TaskEngine.start`, no transport), on each backend in turn:
memory, SQLite (a new file in a temporary directory), Redis (database 13, a per-run key prefix)
and PostgreSQL (a fresh schema); a backend that cannot be reached is skipped, saying why. The
Redis keys and the PostgreSQL schema are removed at the end.

1. create+complete: `--tasks` tasks of a body that runs 0, 1 or 10 steps (`await ctx.step(fn, i)`,
   `fn` an async function returning `i`) and returns, started `--concurrency` at a time, timed
   until the last one is written terminal (seen through a store wrapper, not by polling). The
   same body is measured twice, as a plain task tool (its steps run unjournalled) and with
   `durable=True`, taking turns, median of `--repeats` runs each. `x plain` is the durable
   body's time per task over the plain one's: the target is at most 1.10 with no steps. The
   wrapper also counts the store writes (`create`, `replace`, `append_journal`) per task;
   `writes/step` is (durable writes - plain writes) / steps: the target is at most 1.
2. replay: a durable body runs `--replay-steps` steps (default 1,000) and asks a question; the
   engine is closed while the task waits (a graceful stop hands the task over), and a second
   engine on the same store claims it, replays the body from its journal and asks the question
   again, answered at once. `replay` is the time from entering the second engine to the task
   written `completed`; the same hand-over of a body with no steps is measured beside it
   (`hand-over`), and the difference over the steps is the replay cost per journalled step.
   `journal written` is the first run's time from the create to the question (every step
   journalled live), `store open` the time the second engine took to open its store (part of
   both figures), and `appends` the journal writes of the replaying run (1: the answer; a step
   written again would show here). Medians of `--repeats` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from mcptasks import Elicit, EngineConfig, Result, TaskContext, Yields, task_tool
from mcptasks.authoring import TaskTool
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord, TaskStore, store_from_url

ALL_BACKENDS = ("memory", "sqlite", "redis", "postgres")
STEPS = (0, 1, 10)
OWNER = "o"
WRITES = ("create", "replace", "append_journal")


# -- the bodies under test --------------------------------------------------------------------------


async def echo(i: int) -> int:
    """The step: no work, so the figures are the engine's and the store's cost of a step."""
    return i


async def steps_body(ctx: TaskContext, steps: int) -> int:
    total = 0
    for i in range(steps):
        total += await ctx.step(echo, i)
    return total


plain = task_tool(name="plain_steps")(steps_body)
durable = task_tool(name="durable_steps", durable=True)(steps_body)


@task_tool(name="replayed_steps", durable=True)
async def replayed(ctx: TaskContext, steps: int) -> Yields:
    """`steps` steps, then a question: the task waits there while the engine is swapped."""
    total = 0
    for i in range(steps):
        total += await ctx.step(echo, i)
    answer = yield Elicit("go on?")
    yield Result({"total": total, "answer": type(answer).__name__})


TOOLS: list[TaskTool[Any, Any]] = [plain, durable, replayed]


# -- the store wrapper ------------------------------------------------------------------------------


class CountingStore:
    """A transparent store wrapper: counts the writes, and signals a record written terminal.

    Every method but the wrapped ones is the inner store's own (through `__getattr__`)."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self.writes: Counter[str] = Counter()
        self.terminal: dict[str, TaskRecord] = {}
        self.asking: dict[str, TaskRecord] = {}
        self._waiting: dict[str, anyio.Event] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def create(self, record: TaskRecord) -> TaskRecord:
        self.writes["create"] += 1
        created = await self.inner.create(record)
        if created.terminal:
            self._ended(created)
        return created

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        self.writes["replace"] += 1
        ok = await self.inner.replace(record, expected_version=expected_version)
        if ok and record.terminal:
            self._ended(record)
        elif ok and record.input_requests:
            self.asking[record.task_id] = record
            event = self._waiting.pop(record.task_id, None)
            if event is not None:
                event.set()
        return ok

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        self.writes["append_journal"] += 1
        return await self.inner.append_journal(task_id, position, entry)  # type: ignore[attr-defined,no-any-return]

    async def read_journal(self, task_id: str) -> list[str]:
        return await self.inner.read_journal(task_id)  # type: ignore[attr-defined,no-any-return]

    def _ended(self, record: TaskRecord) -> None:
        self.terminal[record.task_id] = record
        event = self._waiting.pop(record.task_id, None)
        if event is not None:
            event.set()

    async def wait_terminal(self, task_id: str) -> TaskRecord:
        """The record `task_id` was written terminal with (waits for that write; forgets it)."""
        if task_id not in self.terminal:
            event = self._waiting[task_id] = anyio.Event()
            await event.wait()
        return self.terminal.pop(task_id)

    async def wait_asking(self, task_id: str) -> TaskRecord:
        """The record `task_id` was written with once it asked a question (waits for that write)."""
        if task_id not in self.asking:
            event = self._waiting[task_id] = anyio.Event()
            await event.wait()
        return self.asking.pop(task_id)

    def total_writes(self) -> int:
        return sum(self.writes[name] for name in WRITES)


# -- backends ---------------------------------------------------------------------------------------


class Backend:
    def __init__(self, name: str, args: argparse.Namespace, scratch: Path) -> None:
        self.name = name
        self.args = args
        self.scratch = scratch
        tag = f"{os.getpid()}_{int(time.time())}"
        self.redis_prefix = f"mcptasks-bench-durable-{tag}"
        self.pg_schema = f"mcptasks_bench_durable_{tag}"

    def url(self) -> str:
        if self.name == "memory":
            return "memory://"
        if self.name == "sqlite":
            return f"sqlite:///{self.scratch / 'durable.db'}"
        if self.name == "redis":
            return f"{self.args.redis}?prefix={self.redis_prefix}"
        return f"{self.args.postgres}?schema={self.pg_schema}"

    async def unavailable(self) -> str | None:
        """Why the backend cannot be used here (None: it can)."""
        if self.name in ("memory", "sqlite"):
            return None
        store = store_from_url(self.url())
        try:
            with anyio.fail_after(10):
                await store.open()
        except Exception as exc:
            return f"cannot connect: {exc!r}"
        await store.close()
        return None

    async def clean(self) -> None:
        if self.name == "redis":
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(self.args.redis)
            try:
                keys = [key async for key in client.scan_iter(match=f"{self.redis_prefix}*", count=1000)]
                for start in range(0, len(keys), 1000):
                    await client.delete(*keys[start : start + 1000])
            finally:
                await client.aclose()
        elif self.name == "postgres":
            import asyncpg  # type: ignore[import-untyped]

            connection = await asyncpg.connect(self.args.postgres, timeout=10)
            try:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{self.pg_schema}" CASCADE')
            finally:
                await connection.close()


def engine_on(store: CountingStore) -> TaskEngine:
    return TaskEngine(store, config=EngineConfig(immediate_results=False), tools=TOOLS)


# -- 1. create+complete -----------------------------------------------------------------------------


async def batch(
    engine: TaskEngine, store: CountingStore, tool: TaskTool[Any, Any], steps: int, n: int, k: int
) -> tuple[float, float]:
    """Create and complete `n` tasks of `tool`, `k` at a time: (seconds per task, writes per task)."""
    writes = store.total_writes()
    failed: list[TaskRecord] = []
    started = time.perf_counter()
    limiter = anyio.CapacityLimiter(k)

    async def one() -> None:
        async with limiter:
            record = await engine.start(tool, {"steps": steps}, owner=OWNER)
            ended = await store.wait_terminal(record.task_id)
            if ended.status != "completed":
                failed.append(ended)

    async with anyio.create_task_group() as group:
        for _ in range(n):
            group.start_soon(one)
    elapsed = time.perf_counter() - started
    assert not failed, failed[:3]
    return elapsed / n, (store.total_writes() - writes) / n


async def costs(backend: Backend, args: argparse.Namespace) -> dict[str, Any]:
    store = CountingStore(store_from_url(backend.url()))
    out: dict[str, Any] = {}
    async with engine_on(store) as engine:
        for tool in (plain, durable):  # warm-up: connections, code paths, the first journal
            await batch(engine, store, tool, 10, min(args.tasks, 50), args.concurrency)
        for steps in STEPS:
            times: dict[str, list[float]] = {"plain": [], "durable": []}
            writes: dict[str, float] = {}
            for run in range(args.repeats):
                pair = (("plain", plain), ("durable", durable))
                for label, tool in pair if run % 2 == 0 else pair[::-1]:  # taking turns at going first
                    per_task, per_task_writes = await batch(
                        engine, store, tool, steps, args.tasks, args.concurrency
                    )
                    times[label].append(per_task)
                    writes[label] = per_task_writes
            out[str(steps)] = {
                "plain_us": statistics.median(times["plain"]) * 1e6,
                "durable_us": statistics.median(times["durable"]) * 1e6,
                "plain_writes": writes["plain"],
                "durable_writes": writes["durable"],
                "samples": times,
            }
    return out


# -- 2. replay --------------------------------------------------------------------------------------


async def hand_over(backend: Backend, steps: int) -> dict[str, float]:
    """A body of `steps` steps, waiting at its question, handed from one engine to the next."""
    inner = store_from_url(backend.url())
    store = CountingStore(inner)
    started = time.perf_counter()
    async with engine_on(store) as first:
        record = await first.start(replayed, {"steps": steps}, owner=OWNER)
        task_id = record.task_id
        record = await store.wait_asking(record.task_id)
        wrote = time.perf_counter() - started
        (key,) = record.input_requests
    # The next server: a new store object on the same database (on memory://, the same object:
    # the memory store lives as long as the process).
    store = CountingStore(inner if backend.name == "memory" else store_from_url(backend.url()))
    entering = time.perf_counter()
    async with engine_on(store) as second:
        entered = time.perf_counter()
        await second.update(task_id, {key: {"action": "accept", "content": {}}}, owner=OWNER)
        ended = await store.wait_terminal(task_id)
        done = time.perf_counter()
    assert ended.status == "completed" and ended.result is not None, ended
    assert ended.result["structuredContent"]["total"] == steps * (steps - 1) // 2, ended.result
    return {
        "write_s": wrote,
        "replay_s": done - entering,
        "open_s": entered - entering,
        "journal_writes": store.writes["append_journal"],
    }


async def replays(backend: Backend, args: argparse.Namespace) -> dict[str, Any]:
    await hand_over(backend, 10)  # warm-up
    runs = [await hand_over(backend, args.replay_steps) for _ in range(args.repeats)]
    empty = [await hand_over(backend, 0) for _ in range(args.repeats)]
    replay = statistics.median(run["replay_s"] for run in runs)
    base = statistics.median(run["replay_s"] for run in empty)
    return {
        "steps": args.replay_steps,
        "write_s": statistics.median(run["write_s"] for run in runs),
        "replay_s": replay,
        "handover_s": base,
        "open_s": statistics.median(run["open_s"] for run in [*runs, *empty]),
        "per_step_us": (replay - base) / args.replay_steps * 1e6,
        "journal_writes_on_replay": max(run["journal_writes"] for run in runs),
        "samples": {
            "replay_s": [run["replay_s"] for run in runs],
            "handover_s": [run["replay_s"] for run in empty],
        },
    }


# -- report -----------------------------------------------------------------------------------------


def report(results: dict[str, Any], skipped: dict[str, str]) -> None:
    print()
    print("create+complete per task (us), durable vs plain; writes = store writes per task")
    print(
        f"{'backend':<9} {'steps':>5} {'plain':>9} {'durable':>9} {'x plain':>8} {'writes':>13} {'writes/step':>11}"
    )
    for name, result in results.items():
        for steps, row in result["costs"].items():
            ratio = row["durable_us"] / row["plain_us"]
            per_step = (
                f"{(row['durable_writes'] - row['plain_writes']) / int(steps):.2f}" if int(steps) else "-"
            )
            writes = f"{row['plain_writes']:.1f} / {row['durable_writes']:.1f}"
            print(
                f"{name:<9} {steps:>5} {row['plain_us']:>9.0f} {row['durable_us']:>9.0f} "
                f"{ratio:>8.2f} {writes:>13} {per_step:>11}"
            )
    print()
    print("replay: a second engine claims a handed-over task and replays its journal to the end")
    print(
        f"{'backend':<9} {'steps':>6} {'journal written':>16} {'replay':>9} {'hand-over':>10} "
        f"{'per step':>9} {'store open':>11} {'appends':>8}"
    )
    for name, result in results.items():
        row = result["replay"]
        print(
            f"{name:<9} {row['steps']:>6} {row['write_s'] * 1e3:>13.0f} ms {row['replay_s'] * 1e3:>6.0f} ms "
            f"{row['handover_s'] * 1e3:>7.0f} ms {row['per_step_us']:>6.1f} us {row['open_s'] * 1e3:>8.0f} ms "
            f"{row['journal_writes_on_replay']:>10}"
        )
    for name, why in skipped.items():
        print(f"{name}: skipped ({why})")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="mcptasks-durable-") as scratch:
        for name in args.backends:
            backend = Backend(name, args, Path(scratch))
            why = await backend.unavailable()
            if why is not None:
                skipped[name] = why
                print(f"{name}: skipped ({why})", file=sys.stderr)
                continue
            print(f"{name}: measuring ...", file=sys.stderr)
            try:
                results[name] = {"costs": await costs(backend, args), "replay": await replays(backend, args)}
            finally:
                await backend.clean()
    report(results, skipped)
    return {"results": results, "skipped": skipped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends", default=",".join(ALL_BACKENDS), help="comma-separated: " + ", ".join(ALL_BACKENDS)
    )
    parser.add_argument("--tasks", type=int, default=500, help="tasks per create+complete run")
    parser.add_argument("--concurrency", type=int, default=32, help="creates in flight")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure (the median is shown)")
    parser.add_argument(
        "--replay-steps", type=int, default=1000, help="journalled steps of the replayed body"
    )
    parser.add_argument("--quick", action="store_true", help="100 tasks, 1 run, 200 replayed steps")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="Redis URL (keys get a prefix)")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="PostgreSQL URL (a fresh schema is created and dropped)",
    )
    parser.add_argument("--json", type=Path, help="write every figure and sample here")
    args = parser.parse_args()
    args.backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = set(args.backends) - set(ALL_BACKENDS)
    if unknown:
        parser.error(f"unknown backends: {', '.join(sorted(unknown))}")
    if args.quick:
        args.tasks, args.repeats, args.replay_steps = 100, 1, 200
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
        f"{args.tasks} tasks x {args.repeats} runs, {args.concurrency} in flight",
        file=sys.stderr,
    )
    out = anyio.run(main_async, args)
    if args.json is not None:
        args.json.write_text(
            json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **out}, indent=2)
        )


if __name__ == "__main__":
    main()
