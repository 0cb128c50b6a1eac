"""A waiting body holds no worker, proven with real processes on every placement that has
workers: `mcptasks worker` claiming from the store, and the workers of Temporal and of DBOS.

200 durable tasks (`approve` of `tests/durable_app.py`: a step, a yes/no question, a step) wait
for approval on one `mcptasks worker --concurrency 2`: each body parks in the store at its
question, giving its slot up, so all 200 reach `input_required`; answering any of them runs the
body again (a replay from its journal) and completes it, and no finished step ran twice (the
counter files count every real call). A parked task is cancelled, and one parked past its tool's
timeout (`gate`) fails with `timeout`.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from durable.durable_helpers import (
    APP,
    BOUND,
    Server,
    Servers,
    Worker,
    assert_once,
    client_of,
    runs,
    shared_store,
)
from durable_app import GATE_TIMEOUT
from engines import TemporalDevServer
from processes import ROOT, clean_env, free_port, process_test_marks, wait_accepting
from sdk_helpers import Tasks, accept, the_input_request

from mcptasks._runtime import ledger
from mcptasks._runtime.ledger import PARKED
from mcptasks._runtime.operator import open_store

pytestmark = process_test_marks()

WAITING = 200
"""How many tasks wait for approval at once on the one worker."""
CONCURRENCY = 2
"""The worker's `--concurrency`: far fewer slots than waiting tasks."""
ANSWERED = 5
"""How many of the waiting tasks the test answers (any of them completes)."""
LEASE = 3.0


@pytest.fixture(params=["worker", "temporal", "dbos"])
def placement(request: pytest.FixtureRequest) -> Iterator[str]:
    """The `--executor` URL of the placement ("" for `mcptasks worker` claiming from the store):
    a Temporal task queue of its own, or a DBOS system database of its own (dropped afterwards)."""
    if request.param == "worker":
        yield ""
        return
    if request.param == "temporal":
        temporal: TemporalDevServer = request.getfixturevalue("temporal")
        yield f"{temporal.url}?task_queue=waiting-{uuid.uuid4().hex[:12]}"
        return
    yield f"dbos+{request.getfixturevalue('dbos_system_db')}?polling_interval=0.1"


@dataclass
class Placed(Servers):
    """A `serve` that creates tasks (queued, or submitted to the executor) and one worker."""

    executor: str = ""

    def _popen(self, argv: list[str], name: str, log: Path) -> subprocess.Popen[bytes]:
        env = clean_env(
            MCPTASKS_DURABLE_DIR=str(self.counters),
            MCPTASKS_IMMEDIATE_RESULTS="false",
            MCPTASKS_INSTANCE_ID=f"{name}-{uuid.uuid4().hex[:8]}",
            PYTHONUNBUFFERED="1",
        )
        with log.open("wb") as output:
            return subprocess.Popen(
                argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
            )

    def _placed(self) -> list[str]:
        return ["--executor", self.executor] if self.executor else []

    def serve(self, name: str) -> Server:
        port = free_port()
        log = self.workdir / f"{name}.log"
        argv = [sys.executable, "-m", "mcptasks", "serve", APP, "--transport", "http"]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--store", self.store]
        argv += ["--lease-ttl", str(self.lease_ttl), *(self._placed() or ["--enqueue-only"])]
        server = Server(name, self._popen(argv, name, log), log, port)
        self.started.append(server)
        wait_accepting(server.popen, port, log)
        return server

    def worker(self, name: str) -> Worker:
        log = self.workdir / f"{name}.log"
        argv = [sys.executable, "-m", "mcptasks", "worker", APP, "--store", self.store]
        argv += ["--lease-ttl", str(self.lease_ttl), "--concurrency", str(CONCURRENCY), *self._placed()]
        worker = Worker(name, self._popen(argv, name, log), log)
        self.started.append(worker)  # type: ignore[arg-type]  # closed and logged like a server
        worker.wait_ready()
        return worker


@contextmanager
def placed_on(store: str, workdir: Path, executor: str) -> Iterator[Placed]:
    counters = workdir / "counters"
    counters.mkdir(parents=True, exist_ok=True)
    processes = Placed(store, workdir, counters, LEASE, executor=executor)
    try:
        yield processes
    finally:
        processes.close()
        print(processes.logs())  # pytest shows it for a failed test only


async def parked(store: str, task_ids: list[str], *, within: float) -> set[str]:
    """Which of `task_ids` wait in the store (input required, held by no worker: `PARKED`),
    looked at until all do or `within` seconds passed (a pause between looks, never as sync)."""
    wanted, found = set(task_ids), set[str]()
    async with open_store(store) as opened:
        with anyio.move_on_after(within):
            while True:
                found = {
                    record.task_id
                    for record in await opened.list_active()
                    if record.task_id in wanted
                    and record.status == "input_required"
                    and record.runner == PARKED
                }
                if found == wanted:
                    break
                await anyio.sleep(0.2)
    return found


async def temporal_status(url: str, task_id: str) -> str:
    """The status of the task's Temporal workflow once it no longer runs (fails after `BOUND`)."""
    from temporalio.client import Client, WorkflowExecutionStatus

    from mcptasks.executors.temporal import workflow_id

    target = url.removeprefix("temporal://").split("/", 1)[0]
    client = await Client.connect(target, namespace="default")
    handle = client.get_workflow_handle(workflow_id(task_id))
    with anyio.fail_after(BOUND):
        while True:
            status = (await handle.describe()).status
            if status is not None and status != WorkflowExecutionStatus.RUNNING:
                return status.name
            await anyio.sleep(0.1)


async def answer(tasks: Tasks, task_id: str) -> dict[str, Any]:
    waiting = await tasks.wait_input(task_id, count=1)
    key, _ = the_input_request(waiting)
    await tasks.update(task_id, {key: accept(confirm=True)})
    return await tasks.finish(task_id)


async def test_many_waiting_tasks_hold_no_worker_slot_and_each_completes_when_answered(
    tmp_path: Path, placement: str
) -> None:
    with shared_store("postgres") as store, placed_on(store, tmp_path, placement) as procs:
        server = procs.serve("serve")
        worker = procs.worker("w1")
        async with client_of(server) as tasks:
            task_ids = [str((await tasks.start("approve", {}))["taskId"]) for _ in range(WAITING)]
            waiting = await parked(store, task_ids, within=3 * BOUND)
            assert len(waiting) == WAITING, f"{len(waiting)} of {WAITING} waiting after {3 * BOUND} s"
            for task_id in task_ids[:: WAITING // 4][:2]:  # the client sees them waiting
                assert (await tasks.get(task_id))["status"] == "input_required"
            answered = task_ids[-1:] + task_ids[: ANSWERED - 1]  # the last one created, and the first ones
            done = [await answer(tasks, task_id) for task_id in answered]
            # an answer written straight into the store by another process (as an operator tool
            # does) queues the task the same way; the placement notices it by itself
            by_operator = task_ids[ANSWERED + 1]
            async with open_store(store) as opened:
                record = await opened.get(by_operator)
                assert record is not None
                (key,) = record.input_requests
                change = ledger.answered({key: accept(confirm=True)}, {})
                assert (await ledger.apply(opened, by_operator, change)).runner is None
            done.append(await tasks.finish(by_operator))
            answered.append(by_operator)
            cancelled = task_ids[ANSWERED]
            await tasks.cancel(cancelled)
            after = await tasks.finish(cancelled)
        for task_id, final in zip(answered, done, strict=True):
            assert final["status"] == "completed", final
            structured = final["result"]["structuredContent"]
            assert structured == {"outcome": f"plan-{task_id[:8]} applied", "pid": worker.pid}, structured
            assert_once(procs.counters, task_id, "prepare", "apply")
            assert runs(procs.counters, task_id)[("body", "start")] == 2  # its run, and its replay
        for task_id in task_ids:  # no finished step ran again; no unanswered task went on
            counted = runs(procs.counters, task_id)
            assert counted[("prepare", "start")] == counted[("prepare", "end")] == 1, counted
            if task_id not in answered:
                assert counted[("apply", "start")] == 0, counted
        assert after["status"] == "cancelled", after
        if placement.startswith("temporal://"):  # the workflow waiting for its answer ended too
            assert await temporal_status(placement, cancelled) == "CANCELED"
        async with open_store(store) as opened:
            still = await opened.get(task_ids[-2])
        assert still is not None and still.status == "input_required" and still.runner == PARKED


async def test_a_task_parked_past_its_timeout_fails_with_timeout(tmp_path: Path) -> None:
    with shared_store("postgres") as store, placed_on(store, tmp_path, "") as procs:
        server = procs.serve("serve")
        procs.worker("w1")
        async with client_of(server) as tasks:
            started = time.time()
            task_id = str((await tasks.start("timed_gate", {}))["taskId"])
            assert await parked(store, [task_id], within=GATE_TIMEOUT), "timed_gate did not park in time"
            final = await tasks.finish(task_id)
        assert time.time() - started >= GATE_TIMEOUT
        assert final["status"] == "failed", final
        assert final["statusMessage"] == "Failed: timeout", final
        assert runs(procs.counters, task_id)[("apply", "start")] == 0
