"""Engine micro-benchmarks: task creation rate, create->terminal latency, memory per task, tasks/get.

Run from the repository root:

    python benchmarks/engine.py [--store memory|sqlite|all] [--quick] [--json out.json]

Everything runs in process, with no transport: requests go through `TasksProtocol.call_tool` /
`TasksProtocol.handle` (the path a host SDK calls) on a `TaskEngine` whose request `_meta` opts in
to the tasks extension. Each benchmark runs in a fresh child interpreter (this script re-invoked
with `--child`), so one benchmark's heap and garbage-collector state cannot flatter or penalise
another's, and RSS deltas start from a clean process. See benchmarks/README.md for what each
figure means.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import linecache
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psutil  # type: ignore[import-untyped]

import mcptasks
from mcptasks import Elicit, MemoryTaskStore, Result, SqliteTaskStore, task_tool
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine, TasksProtocol
from mcptasks.stores import TaskRecord, TaskStore
from mcptasks.wire import EXTENSION_ID

META: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}}}
"""The `_meta` of a request that opted in to the tasks extension."""
ASK_META: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}, "elicitation": {}}
}
"""The same, also declaring elicitation (so a body may ask for input)."""

STORES = ("memory", "sqlite")
BENCHES = ("creates", "latency", "working", "asking", "completed", "gets", "scale", "gc", "gc_tuned")

# Targets from the issue. (store, metric key) -> (comparison, bound)
TARGETS: dict[tuple[str, str], tuple[str, float]] = {
    ("memory", "creates_k1"): (">=", 20_000),
    ("memory", "creates_k64"): (">=", 20_000),
    ("memory", "rss_per_working_task"): ("<=", 7_600),
    ("memory", "rss_per_asking_task"): ("<=", 2048),
    ("sqlite", "creates_k1"): (">=", 2_000),
    ("sqlite", "creates_k64"): (">=", 2_000),
}


@dataclass(frozen=True)
class Sizes:
    """How much work each benchmark does (full run / --quick)."""

    creates: Mapping[str, int]
    repeats: int
    latency: int
    working: int
    completed: int
    scale: int
    """Tasks created and completed in one process by the `scale` benchmark."""
    gets: Mapping[str, int]
    attribute: bool
    """Break the heap of a working task down by the mcptasks line responsible (slow)."""
    concurrency: int = 64

    @classmethod
    def pick(cls, quick: bool) -> Sizes:
        if quick:
            return cls(
                creates={"memory": 2_000, "sqlite": 500},
                repeats=1,
                latency=200,
                working=1_000,
                completed=1_000,
                scale=10_000,
                gets={"memory": 2_000, "sqlite": 500},
                attribute=False,
            )
        return cls(
            creates={"memory": 20_000, "sqlite": 5_000},
            repeats=5,
            latency=2_000,
            working=10_000,
            completed=10_000,
            scale=100_000,
            gets={"memory": 50_000, "sqlite": 10_000},
            attribute=True,
        )


# -- the task tools under test ----------------------------------------------------------------------


class Gate:
    """Counts parked bodies and fires an event when the expected number has arrived."""

    def __init__(self) -> None:
        self.count = 0
        self.target = 0
        self.event: anyio.Event | None = None

    def arm(self, target: int) -> anyio.Event:
        self.count = 0
        self.target = target
        self.event = anyio.Event()
        return self.event

    def arrive(self) -> None:
        self.count += 1
        if self.event is not None and self.count >= self.target:
            self.event.set()


GATE = Gate()


@task_tool(name="noop")
async def noop() -> None:
    """Zero work: completes as soon as it runs."""


@task_tool(name="small")
async def small(i: int) -> dict[str, Any]:
    """Zero work, with a small structured result that the store keeps."""
    return {"i": i, "ok": True}


@task_tool(name="park")
async def park() -> None:
    """A working task that never finishes: it parks until cancelled."""
    GATE.arrive()
    await anyio.sleep_forever()


@task_tool(name="ask")
async def ask():
    """A task that asks the client a question and waits for the answer (`input_required`)."""
    answer = yield Elicit("continue?")
    yield Result(answer)


TOOLS = (noop, small, park, ask)


async def bare_park() -> None:
    """The body of `park`, run as a plain anyio task: the floor the engine adds to."""
    GATE.arrive()
    await anyio.sleep_forever()


# -- harness ----------------------------------------------------------------------------------------


class TerminalWatch:
    """A transparent `TaskStore` wrapper that timestamps the write making a record terminal.

    Used only by the latency benchmark, so completion is observed the moment it is committed,
    without a polling loop (and its sleep granularity or extra store load) biasing the figure.
    Every method but `replace` is the wrapped store's own (looked up through `__getattr__`).
    """

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self.when: dict[str, float] = {}
        self._events: dict[str, anyio.Event] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        ok = await self.inner.replace(record, expected_version=expected_version)
        if ok and record.terminal:
            self.when[record.task_id] = time.perf_counter()
            event = self._events.pop(record.task_id, None)
            if event is not None:
                event.set()
        return ok

    async def wait_terminal(self, task_id: str) -> float:
        """The perf_counter time at which `task_id` was written terminal (waits for it)."""
        if task_id not in self.when:
            event = self._events[task_id] = anyio.Event()
            await event.wait()
        return self.when.pop(task_id)


@dataclass
class Env:
    engine: TaskEngine
    proto: TasksProtocol
    """Always answers an opted-in call with a task (`immediate_results=False`)."""
    proto_default: TasksProtocol
    """The protocol with its default options."""
    store: TaskStore
    db_path: Path | None
    disk_bytes: int | None = None


def task_protocol(engine: TaskEngine) -> TasksProtocol:
    """A protocol that answers every opted-in call with a `CreateTaskResult`.

    By default a body that finishes within a few scheduler turns is answered with its result
    inline (`immediate_results`); a zero-work tool always would, so the create benchmarks turn
    that off to measure task creation itself (in the engine's `EngineConfig` where there is one).
    """
    if "immediate_results" in inspect.signature(TasksProtocol).parameters:
        return TasksProtocol(engine, TOOLS, immediate_results=False)  # type: ignore[call-arg,unused-ignore]
    return TasksProtocol(engine, TOOLS)


def roomy_limits() -> dict[str, Any]:
    """Limits that never refuse the benchmark's 20,000 creates, but are still counted and checked
    (empty on versions without `Limits`, so this file also runs against older checkouts)."""
    limits = getattr(mcptasks, "Limits", None)
    if limits is None:
        return {}
    return {"limits": limits(max_active_per_owner=10**9, max_active=10**9)}


def engine_options(**settings: Any) -> dict[str, Any]:
    """The roomy limits, no immediate results and `settings`: in an `EngineConfig` where there is
    one (older versions take only the limits)."""
    config = getattr(mcptasks, "EngineConfig", None)
    if config is None:
        return roomy_limits()
    known = inspect.signature(config).parameters
    settings = {name: value for name, value in settings.items() if name in known}
    return {"config": config(immediate_results=False, **roomy_limits(), **settings)}


def directory_bytes(path: str) -> int:
    return sum(entry.stat().st_size for entry in os.scandir(path))


@asynccontextmanager
async def running(
    kind: str, *, wrap: Callable[[TaskStore], TaskStore] | None = None, **settings: Any
) -> AsyncIterator[Env]:
    """A running engine + protocol over a fresh store (SQLite: a new file in a temp dir), with
    `EngineConfig` `settings`."""
    with tempfile.TemporaryDirectory(prefix="mcptasks-bench-") as tmp:
        db_path = Path(tmp) / "tasks.db" if kind == "sqlite" else None
        store: TaskStore = SqliteTaskStore(db_path) if db_path is not None else MemoryTaskStore()
        if wrap is not None:
            store = wrap(store)  # a duck-typed TaskStore
        engine = TaskEngine(store, **engine_options(**settings))
        env = Env(engine, task_protocol(engine), TasksProtocol(engine, TOOLS), store, db_path)
        async with engine:
            yield env
        if db_path is not None:  # closed (WAL checkpointed): what the records cost on disk
            env.disk_bytes = directory_bytes(tmp)


LAST_CPU = [0.0]


async def create_many(
    env: Env,
    tool: str,
    n: int,
    k: int,
    *,
    arguments: dict[str, Any] | None = None,
    via: str = "call_tool",
    default_protocol: bool = False,
    meta: dict[str, Any] = META,
) -> float:
    """Create `n` tasks from `k` concurrent anyio tasks; seconds until the last call returned.

    `LAST_CPU[0]` is set to the process CPU seconds (all threads) spent in the same interval.
    """
    arguments = arguments if arguments is not None else {}
    proto, engine = (env.proto_default if default_protocol else env.proto), env.engine
    tool_obj = proto.tools[tool]
    shares = [n // k + (1 if i < n % k else 0) for i in range(k)]
    finished: list[float] = []
    cpu_finished: list[float] = []

    async def via_call_tool(count: int) -> None:
        for _ in range(count):
            await proto.call_tool(tool, arguments, meta=meta)
        finished.append(time.perf_counter())
        cpu_finished.append(time.process_time())

    async def via_start(count: int) -> None:
        for _ in range(count):
            await engine.start(tool_obj, arguments, owner=ANONYMOUS_OWNER)
        finished.append(time.perf_counter())
        cpu_finished.append(time.process_time())

    worker = via_call_tool if via == "call_tool" else via_start
    cpu_start = time.process_time()
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for share in shares:
            if share:
                tg.start_soon(worker, share)
    LAST_CPU[0] = max(cpu_finished) - cpu_start
    return max(finished) - start


async def drain(engine: TaskEngine) -> None:
    """Wait until no body runs on `engine` (every created task has finished)."""
    while engine.active_runs:  # noqa: ASYNC110 - the engine exposes a count, not an event
        await anyio.sleep(0.001)


async def warm_up(env: Env, *, parks: bool = False) -> None:
    """Exercise the create / complete (and park / cancel) paths once so caches and pools exist."""
    first = await env.proto.call_tool("noop", {}, meta=META)
    assert first["resultType"] == "task", first  # the request really opted in
    await create_many(env, "noop", 200, 8)
    await create_many(env, "small", 200, 8, arguments={"i": 1})
    if parks:
        GATE.arm(100)
        ids = [(await env.proto.call_tool("park", {}, meta=META))["taskId"] for _ in range(100)]
        for task_id in ids:
            await env.proto.handle("tasks/cancel", {"taskId": task_id, "_meta": META})
    await drain(env.engine)


WARM_UP_TASKS = 401
"""Records `warm_up` leaves in the store (without parks)."""


def settle() -> None:
    for _ in range(3):
        gc.collect()


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


# -- the benchmarks (each runs in a child process) -------------------------------------------------


async def bench_creates(kind: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.creates[kind]
    out: dict[str, Any] = {"n": n, "repeats": sizes.repeats}
    runs = (
        ("k1", 1, "call_tool", False),
        ("k64", sizes.concurrency, "call_tool", False),
        ("start_k64", sizes.concurrency, "start", False),
        ("default_k64", sizes.concurrency, "call_tool", True),
    )
    for label, k, via, default in runs:
        calls: list[float] = []
        sustained: list[float] = []
        cpu: list[float] = []
        for _ in range(sizes.repeats):
            async with running(kind) as env:
                await warm_up(env)
                settle()
                t0 = time.perf_counter()
                seconds = await create_many(env, "noop", n, k, via=via, default_protocol=default)
                await drain(env.engine)
                total = time.perf_counter() - t0
                assert not await env.store.list_active()
            calls.append(rate(n, seconds))
            sustained.append(rate(n, total))
            cpu.append(rate(n, LAST_CPU[0]))
        out[f"creates_{label}"] = statistics.median(calls)
        out[f"creates_{label}_samples"] = calls
        out[f"sustained_{label}"] = statistics.median(sustained)
        out[f"cpu_creates_{label}"] = statistics.median(cpu)  # per CPU-second: robust to load
    return out


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98], "max": max(samples)}


async def bench_latency(kind: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.latency
    warm = max(50, n // 20)
    seen: list[float] = []
    committed: list[float] = []
    returned: list[float] = []
    async with running(kind, wrap=TerminalWatch) as env:
        watch = env.store
        assert isinstance(watch, TerminalWatch)
        for i in range(warm + n):
            t0 = time.perf_counter()
            created = await env.proto.call_tool("noop", {}, meta=META)
            t_returned = time.perf_counter()
            task_id = created["taskId"]
            t_committed = await watch.wait_terminal(task_id)
            record = await env.engine.get(task_id, owner=ANONYMOUS_OWNER)
            t_seen = time.perf_counter()
            assert record.status == "completed", record
            if i >= warm:
                returned.append((t_returned - t0) * 1e6)
                committed.append((t_committed - t0) * 1e6)
                seen.append((t_seen - t0) * 1e6)
    return {
        "n": n,
        "latency_us": percentiles(seen),
        "call_return_us": percentiles(returned),
        "terminal_commit_us": percentiles(committed),
    }


HEAP_FRAMES = 32
"""Stack depth tracemalloc records, enough to reach the mcptasks frame behind an allocation."""


def heap_sites(snapshot: tracemalloc.Snapshot, n: int, top: int = 10) -> list[dict[str, Any]]:
    """Live memory per task, charged to the innermost mcptasks (or benchmark) line that caused it.

    An allocation made inside anyio or asyncio on behalf of `task_group.start_soon` in the engine
    is charged to that engine line, which is where a change would have to happen.
    """
    package = Path(mcptasks.__file__).resolve().parent
    root = package.parent
    ours = (str(package) + os.sep, str(Path(__file__).resolve()))
    charged: dict[str, int] = {}
    for stat in snapshot.statistics("traceback"):
        site = "(outside mcptasks)"
        for frame in reversed(stat.traceback):  # innermost first
            if frame.filename.startswith(ours):
                where = os.path.relpath(frame.filename, root)
                code = linecache.getline(frame.filename, frame.lineno).strip()
                site = f"{where}:{frame.lineno}  {code[:70]}"
                break
        charged[site] = charged.get(site, 0) + stat.size
    ranked = sorted(charged.items(), key=lambda item: item[1], reverse=True)[:top]
    return [{"site": site, "bytes_per_task": size / n} for site, size in ranked]


async def traced_parks(
    kind: str, n: int, k: int, *, frames: int, sites: dict[str, Any] | None = None
) -> float:
    """Python heap per parked working task (tracemalloc); with `sites`, also its breakdown."""
    async with running(kind) as env:
        await warm_up(env, parks=True)
        settle()
        tracemalloc.start(frames)
        parked = GATE.arm(n)
        await create_many(env, "park", n, k)
        await parked.wait()
        settle()
        heap = tracemalloc.get_traced_memory()[0]
        if sites is not None:
            sites["heap_sites"] = heap_sites(tracemalloc.take_snapshot(), n)
        tracemalloc.stop()
    return heap / n


async def bench_working(kind: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.working
    k = sizes.concurrency
    out: dict[str, Any] = {"n": n}
    # Phase 1: RSS, with tracemalloc off.
    async with running(kind) as env:
        await warm_up(env, parks=True)
        settle()
        before = rss()
        parked = GATE.arm(n)
        await create_many(env, "park", n, k)
        await parked.wait()
        settle()
        after = rss()
        assert env.engine.active_runs == n, env.engine.active_runs
    out["rss_per_working_task"] = (after - before) / n
    out["rss_delta_bytes"] = after - before
    # Phase 2: Python heap via tracemalloc (started after warm-up, so only the n tasks count).
    heap = await traced_parks(kind, n, k, frames=1)
    out["heap_per_working_task"] = heap
    # Phase 2b: where that heap goes, from a smaller run recording deep stacks (slow).
    if sizes.attribute:
        await traced_parks(kind, min(n, 2_000), k, frames=HEAP_FRAMES, sites=out)
    # Phase 3: the floor, the same body parked as a bare anyio task (no engine, no record).
    settle()
    tracemalloc.start()
    parked = GATE.arm(n)
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(bare_park)
        await parked.wait()
        settle()
        bare = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        tg.cancel_scope.cancel()
    out["heap_per_bare_task"] = bare / n
    out["engine_heap_per_working_task"] = heap - bare / n
    return out


async def quiesce() -> None:
    """Let the engine's own duties catch up before memory is measured: the change notifications
    of the last writes can still be queued for the engine's listener (~90 B each), which is
    transient and not what a task keeps."""
    await anyio.wait_all_tasks_blocked()


async def complete_in_batches(env: Env, n: int, k: int, batch: int = 500) -> None:
    """Create `n` small-result tasks, draining after each batch so transient body memory stays small."""
    done = 0
    while done < n:
        count = min(batch, n - done)
        await create_many(env, "small", count, k, arguments={"i": done})
        await drain(env.engine)
        done += count
    await quiesce()


async def bench_completed(kind: str, sizes: Sizes) -> dict[str, Any]:
    n = sizes.completed
    k = sizes.concurrency
    out: dict[str, Any] = {"n": n}
    async with running(kind) as env:
        await warm_up(env)
        settle()
        before = rss()
        await complete_in_batches(env, n, k)
        settle()
        after = rss()
        assert not await env.store.list_active()
        if isinstance(env.store, MemoryTaskStore):
            assert len(env.store) == n + WARM_UP_TASKS, len(env.store)
    out["rss_per_completed_record"] = (after - before) / n
    if env.disk_bytes is not None:
        out["disk_per_completed_record"] = env.disk_bytes / (n + WARM_UP_TASKS)
    async with running(kind) as env:
        await warm_up(env)
        settle()
        tracemalloc.start()
        await complete_in_batches(env, n, k)
        settle()
        heap = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    out["heap_per_completed_record"] = heap / n
    return out


async def bench_gets(kind: str, sizes: Sizes) -> dict[str, Any]:
    m = sizes.gets[kind]
    out: dict[str, Any] = {"n": m}
    async with running(kind) as env:
        created = await env.proto.call_tool("small", {"i": 1}, meta=META)
        await drain(env.engine)
        params = {"taskId": created["taskId"], "_meta": META}
        result = await env.proto.handle("tasks/get", params)
        assert result["status"] == "completed" and "result" in result, result

        async def worker(count: int) -> None:
            for _ in range(count):
                await env.proto.handle("tasks/get", params)

        for label, k in (("k1", 1), ("k64", sizes.concurrency)):
            for _ in range(min(m, 500) // 10):  # warm-up
                await env.proto.handle("tasks/get", params)
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(k):
                    tg.start_soon(worker, m // k + (1 if i < m % k else 0))
            out[f"gets_{label}"] = rate(m, time.perf_counter() - t0)
    return out


async def wait_asking(env: Env, n: int) -> None:
    """Wait until `n` tasks are `input_required` (their bodies wait for an answer)."""
    while True:
        active = await env.store.list_active()
        if sum(1 for record in active if record.status == "input_required") >= n:
            return
        await anyio.sleep(0.05)


async def ask_in_batches(env: Env, n: int, k: int, batch: int = 500) -> None:
    """Create `n` tasks waiting for input, each batch waiting before the next is created: a
    create on the memory store never yields, so one batch of all `n` would start every body at
    once and measure their start-up's high-water mark rather than what a waiting task keeps."""
    done = 0
    while done < n:
        count = min(batch, n - done)
        await create_many(env, "ask", count, k, meta=ASK_META)
        done += count
        await wait_asking(env, done)
    await quiesce()


async def bench_asking(kind: str, sizes: Sizes) -> dict[str, Any]:
    """Memory per task waiting for input: RSS (psutil) and Python heap (tracemalloc).

    The periodic re-read of a waiting body's record is an hour away, so no body is in the middle
    of one when memory is measured (creating 10,000 tasks on SQLite with the heap traced takes
    longer than the default 5 s: the first bodies would be re-reading, each in a task again).
    """
    n = sizes.working
    k = sizes.concurrency
    out: dict[str, Any] = {"n": n}
    for phase in ("rss", "heap"):
        async with running(kind, input_poll_interval=3600.0) as env:
            await warm_up(env, parks=True)
            settle()
            before = rss()
            if phase == "heap":
                tracemalloc.start()
            await ask_in_batches(env, n, k)
            settle()
            if phase == "rss":
                out["rss_per_asking_task"] = (rss() - before) / n
            else:
                out["heap_per_asking_task"] = tracemalloc.get_traced_memory()[0] / n
                tracemalloc.stop()
            out["active_runs"] = env.engine.active_runs
    return out


async def bench_scale(kind: str, sizes: Sizes) -> dict[str, Any]:
    """Create and complete `sizes.scale` zero-work tasks in one process; RSS along the way."""
    n = sizes.scale
    out: dict[str, Any] = {"n": n}
    async with running(kind) as env:
        await warm_up(env)
        settle()
        before = rss()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        done = 0
        peak = before
        while done < n:  # batches, so RSS can be sampled while the run goes on
            count = min(10_000, n - done)
            await create_many(env, "small", count, sizes.concurrency, arguments={"i": done})
            peak = max(peak, rss())
            done += count
        await drain(env.engine)
        out["seconds"] = time.perf_counter() - t0
        out["cpu_seconds"] = time.process_time() - cpu0
        out["rss_before"] = before
        out["rss_peak"] = max(peak, rss())
        settle()
        out["rss_after"] = rss()
        out["rss_per_completed_record"] = (out["rss_after"] - before) / n
        out["completed_per_s"] = n / out["seconds"]
        assert not await env.store.list_active()
    return out


async def gc_burst(kind: str, sizes: Sizes, *, tuned: bool) -> dict[str, Any]:
    """A create burst (K=64, until drained) with every garbage collection timed (`gc.callbacks`)."""
    n = sizes.creates[kind]
    pauses: list[tuple[int, float]] = []
    began = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses.append((int(info["generation"]), time.perf_counter() - began[0]))

    async with running(kind) as env:
        await warm_up(env)
        settle()
        if tuned:  # imported here, so the other benchmarks also run against older checkouts
            from mcptasks._runtime.gctuning import tune_gc

            tune_gc()
        gc.callbacks.append(timed)
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        await create_many(env, "noop", n, sizes.concurrency)
        await drain(env.engine)
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        gc.callbacks.remove(timed)
    times = sorted(p for _, p in pauses) or [0.0]
    return {
        "n": n,
        "collections": len(pauses),
        "full_collections": sum(1 for generation, _ in pauses if generation == 2),
        "gc_total_ms": sum(times) * 1000,
        "gc_max_ms": times[-1] * 1000,
        "gc_share": sum(times) / seconds,
        "sustained": n / seconds,
        "cpu_sustained": n / cpu,
    }


async def bench_gc(kind: str, sizes: Sizes) -> dict[str, Any]:
    """GC pauses on a create burst with CPython's default collector settings."""
    return await gc_burst(kind, sizes, tuned=False)


async def bench_gc_tuned(kind: str, sizes: Sizes) -> dict[str, Any]:
    """The same burst after `tune_gc()` (frozen start-up heap, higher young threshold)."""
    return await gc_burst(kind, sizes, tuned=True)


BENCH_FUNCS = {
    "creates": bench_creates,
    "latency": bench_latency,
    "working": bench_working,
    "asking": bench_asking,
    "completed": bench_completed,
    "gets": bench_gets,
    "scale": bench_scale,
    "gc": bench_gc,
    "gc_tuned": bench_gc_tuned,
}


def child_main(spec: dict[str, Any]) -> None:
    # Cache the source as imported, so heap sites name the right lines even if files change later.
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if name.startswith("mcptasks") and source:
            linecache.getlines(source)
    sizes = Sizes.pick(bool(spec["quick"]))
    func = BENCH_FUNCS[spec["bench"]]

    def go() -> dict[str, Any]:
        return anyio.run(func, spec["store"], sizes, backend=spec["backend"])

    if spec.get("profile"):
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        result = profiler.runcall(go)
        stats = pstats.Stats(profiler, stream=sys.stderr)
        sys.stderr.write(f"\n==== cProfile: {spec['bench']} on {spec['store']} (top by own time) ====\n")
        stats.sort_stats("tottime").print_stats(25)
    else:
        result = go()
    print(json.dumps(result))


# -- parent: run the children, print the table --------------------------------------------------------


def run_child(bench: str, store: str, quick: bool, backend: str, profile: bool = False) -> dict[str, Any]:
    spec = {"bench": bench, "store": store, "quick": quick, "backend": backend, "profile": profile}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        return {
            "error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}",
            "seconds": elapsed,
        }
    if profile:
        sys.stderr.write(proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["seconds"] = elapsed
    return result


@dataclass
class Row:
    store: str
    key: str
    label: str
    value: float | None
    shown: str
    target: str = "-"
    status: str = "info"


def judge(store: str, key: str, value: float | None) -> tuple[str, str]:
    target = TARGETS.get((store, key))
    if target is None:
        return "-", "info"
    op, bound = target
    text = f"{op} {bound:,.0f}" + (" B" if key.startswith("rss") else "/s")
    if value is None:
        return text, "ERROR"
    ok = value >= bound if op == ">=" else value <= bound
    return text, "PASS" if ok else "MISS"


def rows_for(store: str, results: Mapping[str, Mapping[str, Any]], sizes: Sizes) -> list[Row]:
    rows: list[Row] = []

    def add(bench: str, key: str, label: str, fmt: Callable[[float], str]) -> None:
        if bench not in results:
            return
        value = results[bench].get(key)
        shown = "ERROR" if value is None else fmt(value)
        target, status = judge(store, key, value)
        rows.append(Row(store, key, label, value, shown, target, status))

    per_s: Callable[[float], str] = lambda v: f"{v:,.0f}/s"  # noqa: E731
    size_b: Callable[[float], str] = lambda v: f"{v:,.0f} B"  # noqa: E731
    c = sizes.creates[store]
    add("creates", "creates_k1", f"creates/s, call_tool, K=1 (N={c:,})", per_s)
    add("creates", "creates_k64", f"creates/s, call_tool, K={sizes.concurrency}", per_s)
    add("creates", "sustained_k64", f"create+complete/s, K={sizes.concurrency} (until drained)", per_s)
    add("creates", "creates_start_k64", f"creates/s, engine.start, K={sizes.concurrency}", per_s)
    add(
        "creates",
        "creates_default_k64",
        f"call_tool/s, protocol defaults, K={sizes.concurrency} (result inline)",
        per_s,
    )
    lat = results.get("latency", {}).get("latency_us")
    if "latency" in results:
        rows.append(
            Row(
                store,
                "latency_us",
                f"create->completed latency (N={sizes.latency:,})",
                None if lat is None else lat["p50"],
                "ERROR" if lat is None else f"{lat['p50']:,.0f} / {lat['p95']:,.0f} / {lat['p99']:,.0f} us",
                "p50/p95/p99",
            )
        )
    add("working", "rss_per_working_task", f"RSS per parked working task (N={sizes.working:,})", size_b)
    add("working", "heap_per_working_task", "  Python heap (tracemalloc) per working task", size_b)
    add("working", "heap_per_bare_task", "  floor: same body as a bare anyio task (heap)", size_b)
    add("working", "engine_heap_per_working_task", "  engine's share (heap, working - floor)", size_b)
    add("asking", "rss_per_asking_task", f"RSS per task waiting for input (N={sizes.working:,})", size_b)
    add("asking", "heap_per_asking_task", "  Python heap (tracemalloc) per task waiting for input", size_b)
    add("completed", "rss_per_completed_record", f"RSS per completed record (N={sizes.completed:,})", size_b)
    add("completed", "heap_per_completed_record", "  Python heap (tracemalloc) per completed record", size_b)
    if store == "sqlite":
        add("completed", "disk_per_completed_record", "  disk (db file, checkpointed) per record", size_b)
    for bench, name in (("gc", "default GC"), ("gc_tuned", "tune_gc()")):
        add(bench, "cpu_sustained", f"create+complete per CPU-s, K={sizes.concurrency}, {name}", per_s)
        add(bench, "collections", f"  garbage collections ({name})", lambda v: f"{v:,.0f}")
        add(bench, "gc_total_ms", f"  time in GC ({name})", lambda v: f"{v:,.0f} ms")
        add(bench, "gc_max_ms", f"  longest GC pause ({name})", lambda v: f"{v:,.1f} ms")
    add("scale", "completed_per_s", f"create+complete/s, {sizes.scale:,} tasks in one process", per_s)
    add("scale", "rss_peak", "  peak RSS during that run", lambda v: f"{v / 2**20:,.0f} MiB")
    add("scale", "rss_per_completed_record", "  RSS per completed record after it", size_b)
    add("gets", "gets_k1", f"tasks/get/s, completed task, K=1 (N={sizes.gets[store]:,})", per_s)
    add("gets", "gets_k64", f"tasks/get/s, completed task, K={sizes.concurrency}", per_s)
    return rows


def print_table(rows: list[Row]) -> None:
    headers = ("store", "figure", "value", "target", "result")
    cells = [(r.store, r.label, r.shown, r.target, r.status if r.status != "info" else "") for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join("{:<%d}" % w if i != 2 else "{:>%d}" % w for i, w in enumerate(widths))  # noqa: UP031
    print(line.format(*headers))
    print("  ".join("-" * w for w in widths))
    previous = None
    for cell in cells:
        if previous is not None and cell[0] != previous:
            print()
        previous = cell[0]
        print(line.format(*cell))


def environment(backend: str) -> dict[str, Any]:
    import pydantic

    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "anyio": getattr(anyio, "__version__", None) or _dist_version("anyio"),
        "pydantic": pydantic.VERSION,
        "sqlite": sqlite3.sqlite_version,
        "backend": backend,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "api": "TasksProtocol.call_tool / TasksProtocol.handle (in process, no transport)",
    }


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--store", choices=(*STORES, "all"), default="all")
    parser.add_argument("--quick", action="store_true", help="small N, for a CI smoke run (< 30 s)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--bench", choices=BENCHES, action="append", help="run only these (repeatable)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--profile", action="store_true", help="run each benchmark under cProfile; print the hot spots"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0

    stores = STORES if args.store == "all" else (args.store,)
    load_before = os.getloadavg()[0]
    benches = tuple(args.bench) if args.bench else BENCHES
    sizes = Sizes.pick(args.quick)
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for store in stores:
        results[store] = {}
        for bench in benches:
            print(f"running {bench} on {store} ...", file=sys.stderr, flush=True)
            results[store][bench] = run_child(bench, store, args.quick, args.backend, args.profile)
    rows = [row for store in stores for row in rows_for(store, results[store], sizes)]
    env = environment(args.backend)
    env["load_average_at_start"] = round(load_before, 2)
    mode = "quick" if args.quick else "full"
    print(
        f"\nmcptasks engine benchmark ({mode}; Python {env['python']}, anyio {env['anyio']}, "
        f"{env['backend']}, {env['cpus']} CPUs, SQLite {env['sqlite']}, 1-min load "
        f"{load_before:.1f} -> {env['load_average'][0]:.1f})\nvia {env['api']}; "
        "throughputs are medians over repeats\n"
    )
    print_table(rows)
    for store in stores:
        sites = results[store].get("working", {}).get("heap_sites")
        if sites:
            print(f"\n{store}: Python heap per parked working task, by the mcptasks line responsible")
            for site in sites[:8]:
                print(f"  {site['bytes_per_task']:>7,.0f} B  {site['site']}")
    elapsed = time.perf_counter() - started
    print(f"\n(total {elapsed:.1f} s)")
    missed = [r for r in rows if r.status in ("MISS", "ERROR")]
    if args.json:
        payload = {
            "mode": mode,
            "environment": env,
            "sizes": {k: v for k, v in vars(sizes).items()},
            "rows": [vars(r) for r in rows],
            "results": results,
            "seconds": elapsed,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
