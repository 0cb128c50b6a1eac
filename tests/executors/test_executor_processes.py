"""The executors proven with real processes, the same scenarios on Temporal and on DBOS:
`mcptasks serve tests/durable_app.py --executor URL` creates the tasks and submits their
workflows, `mcptasks worker ... --executor URL` processes run the bodies, on one shared store
(PostgreSQL; SQLite too for the kill -9 of a worker), killed (SIGKILL) under their tasks.

The `executor` fixture gives each test an executor of its own: on the module's one
`temporal server start-dev`, a task queue of its own; for DBOS, a fresh PostgreSQL system
database (dropped afterwards). Every process runs under an instance id of its own
(`MCPTASKS_INSTANCE_ID`), so none judges another by its PID, as if they ran on different
machines: a killed worker's task is taken over only once its lease (`--lease-ttl 3`) ran out and
the executor ran the body elsewhere (Temporal retries the body's activity; on DBOS, `reconcile`
resumes the workflow the dead worker left PENDING, once the record is older than the executors'
`SUBMIT_GRACE`). The counter files of `tests/durable_app.py` count every real step call over all
processes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from durable.durable_helpers import (
    APP,
    BOUND,
    Server,
    Servers,
    Worker,
    assert_once,
    body_pids,
    client_of,
    events_in,
    runs,
    shared_store,
    sqlite_url,
    until,
)
from engines import TemporalDevServer
from processes import ROOT, clean_env, free_port, process_test_marks, wait_accepting
from rolling_deploy import Deploy
from sdk_helpers import accept, the_input_request

pytestmark = process_test_marks()

LEASE = 3.0
"""The lease of every process: short, a survivor waits it out after a kill -9."""
SLOW = 60.0
"""How long `transform` sleeps the first time it runs: far longer than any test waits for it."""
QUIET = 2.0
"""How long the no-worker test watches a task to see that nothing runs it (a bounded negative check)."""


# -- executors ------------------------------------------------------------------------------------


@dataclass
class Executor:
    """One executor for one test: its `--executor` URL, and how to wait for a task's workflow to end."""

    name: str
    url: str
    closed: Callable[[str], Awaitable[str]]
    """`await closed(task_id)`: the task's workflow's final status, once it no longer runs or
    waits to run, normalised: "completed", "failed", "cancelled", ... (fails after `BOUND`)."""


TEMPORAL_STATUSES = {"CANCELED": "cancelled"}
DBOS_STATUSES = {"SUCCESS": "completed", "ERROR": "failed", "CANCELLED": "cancelled"}
DBOS_RUNNING = ("PENDING", "ENQUEUED", "DELAYED")


def temporal_executor(temporal: TemporalDevServer) -> Executor:
    from temporalio.client import Client, WorkflowExecutionStatus

    from mcptasks.executors.temporal import workflow_id

    async def closed(task_id: str) -> str:
        client = await Client.connect(temporal.address, namespace=temporal.namespace)
        handle = client.get_workflow_handle(workflow_id(task_id))
        last = None
        with anyio.move_on_after(BOUND):
            while True:
                last = (await handle.describe()).status
                if last is not None and last != WorkflowExecutionStatus.RUNNING:
                    return TEMPORAL_STATUSES.get(last.name, last.name.lower())
                await anyio.sleep(0.1)
        raise AssertionError(f"the workflow of task {task_id} still {last} after {BOUND} s")

    url = f"{temporal.url}?task_queue=processes-{uuid.uuid4().hex[:12]}"
    return Executor("temporal", url, closed)


def dbos_executor(system_db: str) -> Executor:
    from dbos import DBOSClient

    from mcptasks.executors.dbos import workflow_id

    def wait_closed(task_id: str) -> str:
        client = DBOSClient(system_database_url=system_db, application_name="mcptasks")
        try:
            last = None
            deadline = time.monotonic() + BOUND
            while time.monotonic() < deadline:
                found = client.list_workflows(
                    workflow_ids=[workflow_id(task_id)], load_input=False, load_output=False
                )
                last = found[0].status if found else None
                if last is not None and last not in DBOS_RUNNING:
                    return DBOS_STATUSES.get(last, last.lower())
                time.sleep(0.1)
        finally:
            client.destroy()
        raise AssertionError(f"the workflow of task {task_id} still {last} after {BOUND} s")

    async def closed(task_id: str) -> str:
        return await anyio.to_thread.run_sync(wait_closed, task_id)

    return Executor("dbos", "dbos+" + system_db, closed)


@pytest.fixture(params=["temporal", "dbos"])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """A Temporal task queue of its own, or a DBOS system database of its own (dropped afterwards)."""
    if request.param == "temporal":
        yield temporal_executor(request.getfixturevalue("temporal"))
        return
    yield dbos_executor(request.getfixturevalue("dbos_system_db"))


# -- processes ------------------------------------------------------------------------------------


@dataclass
class ExecutorProcesses(Servers):
    """`Servers`, with `--executor` on `serve`, and `mcptasks worker` processes beside them."""

    executor: str = ""

    def env(self, name: str) -> dict[str, str]:
        return clean_env(
            MCPTASKS_DURABLE_DIR=str(self.counters),
            MCPTASKS_IMMEDIATE_RESULTS="false",
            MCPTASKS_INSTANCE_ID=f"{name}-{uuid.uuid4().hex[:8]}",
            PYTHONUNBUFFERED="1",
        )

    def serve(self, name: str) -> Server:
        """`mcptasks serve APP --executor URL` on a free port, once it accepts connections."""
        port = free_port()
        log = self.workdir / f"{name}.log"
        argv = [sys.executable, "-m", "mcptasks", "serve", APP, "--transport", "http"]
        argv += ["--host", "127.0.0.1", "--port", str(port), "--store", self.store]
        argv += ["--lease-ttl", str(self.lease_ttl), "--executor", self.executor]
        server = Server(name, self._popen(argv, name, log), log, port)
        self.started.append(server)
        wait_accepting(server.popen, port, log)
        return server

    def worker(self, name: str) -> Worker:
        """`mcptasks worker APP --executor URL`, once it works for the executor."""
        (worker,) = self.workers(name)
        return worker

    def workers(self, *names: str) -> list[Worker]:
        """Worker processes started side by side (after a `serve`: the store's schema exists),
        returned once each works for the executor (a DBOS worker takes seconds to launch)."""
        started = []
        for name in names:
            log = self.workdir / f"{name}.log"
            argv = [sys.executable, "-m", "mcptasks", "worker", APP, "--store", self.store]
            argv += ["--lease-ttl", str(self.lease_ttl), "--executor", self.executor]
            worker = Worker(name, self._popen(argv, name, log), log)
            self.started.append(worker)  # type: ignore[arg-type]  # closed and logged like a server
            started.append(worker)
        for worker in started:
            worker.wait_ready()
        return started

    def _popen(self, argv: list[str], name: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as output:
            return subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env(name),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )


@contextmanager
def processes_on(store: str, workdir: Path, executor: Executor) -> Iterator[ExecutorProcesses]:
    counters = workdir / "counters"
    counters.mkdir(parents=True, exist_ok=True)
    processes = ExecutorProcesses(store, workdir, counters, LEASE, executor=executor.url)
    try:
        yield processes
    finally:
        processes.close()
        print(processes.logs())  # pytest shows it for a failed test only


def recovered_count(procs: ExecutorProcesses) -> int:
    """The tasks every process logged as recovered ("mcptasks recovered N task(s) ...")."""
    found = re.findall(r"mcptasks recovered (\d+) task", "".join(p.output() for p in procs.started))
    return sum(int(count) for count in found)


@contextmanager
def store_for(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield sqlite_url(tmp_path)
        return
    with shared_store(backend) as store:
        yield store


# -- the scenarios --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
async def test_a_worker_killed_inside_a_step_is_replaced_and_finished_steps_do_not_rerun(
    tmp_path: Path, executor: Executor, backend: str
) -> None:
    with store_for(backend, tmp_path) as store, processes_on(store, tmp_path, executor) as procs:
        server = procs.serve("serve")
        workers = {w.pid: w for w in procs.workers("w1", "w2")}
        async with client_of(server) as tasks:
            task_id = str((await tasks.start("pipeline", {"seconds": SLOW}))["taskId"])
            await until(
                lambda: runs(procs.counters, task_id)[("transform", "start")] == 1, "transform to start"
            )
            (holder_pid,) = body_pids(procs.counters, task_id)
            (survivor,) = [w for pid, w in workers.items() if pid != holder_pid]
            killed = time.monotonic()
            workers[holder_pid].kill9()
            done = await tasks.finish(task_id)
            taken = time.monotonic() - killed
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"]["pid"] == survivor.pid, done
    assert body_pids(procs.counters, task_id) == [holder_pid, survivor.pid]
    assert_once(procs.counters, task_id, "fetch", "publish")
    counted = runs(procs.counters, task_id)
    assert counted[("transform", "start")] <= 2 and counted[("transform", "end")] == 1, events_in(
        procs.counters, task_id
    )
    # one task was recovered, by one process (on DBOS, resuming its workflow is no second recovery)
    assert recovered_count(procs) <= 1, procs.logs()
    print(
        f"{executor.name} on {backend}: the survivor finished the task {taken:.2f} s after the kill -9"
        f" (lease {LEASE} s)"
    )


async def test_a_new_serve_answers_a_question_asked_before_the_old_one_was_killed(
    tmp_path: Path, executor: Executor
) -> None:
    with shared_store("postgres") as store, processes_on(store, tmp_path, executor) as procs:
        first = procs.serve("serve1")
        worker = procs.worker("w1")
        async with client_of(first) as tasks:
            task_id = str((await tasks.start("approve", {}))["taskId"])
            waiting = await tasks.wait_input(task_id, count=1)
        key, _ = the_input_request(waiting)
        first.kill9()
        second = procs.serve("serve2")
        async with client_of(second) as tasks:
            again = await tasks.get(task_id)
            assert again["status"] == "input_required", again
            await tasks.update(task_id, {key: accept(confirm=True)})
            done = await tasks.finish(task_id)
    assert done["status"] == "completed", done
    structured = done["result"]["structuredContent"]
    assert structured == {"outcome": f"plan-{task_id[:8]} applied", "pid": worker.pid}, structured
    # the body never moved to another process (it parked and was replayed where it waited)
    assert set(body_pids(procs.counters, task_id)) == {worker.pid}
    assert_once(procs.counters, task_id, "prepare", "apply")


async def test_without_a_worker_a_task_waits_and_a_worker_started_later_runs_it(
    tmp_path: Path, executor: Executor
) -> None:
    with shared_store("postgres") as store, processes_on(store, tmp_path, executor) as procs:
        server = procs.serve("serve")
        async with client_of(server) as tasks:
            task_id = str((await tasks.start("pipeline", {}))["taskId"])
            watched_until = time.monotonic() + QUIET
            while time.monotonic() < watched_until:  # a bounded negative check, not a synchronisation
                task = await tasks.get(task_id)
                assert task["status"] == "working", task
                assert events_in(procs.counters, task_id) == [], "a body ran without a worker"
                await anyio.sleep(0.2)
            worker = procs.worker("w1")
            done = await tasks.finish(task_id)
    assert done["status"] == "completed", done
    assert body_pids(procs.counters, task_id) == [worker.pid]
    assert_once(procs.counters, task_id, "fetch", "transform", "publish")


async def test_cancel_reaches_the_body_on_its_worker(tmp_path: Path, executor: Executor) -> None:
    with shared_store("postgres") as store, processes_on(store, tmp_path, executor) as procs:
        server = procs.serve("serve")
        worker = procs.worker("w1")
        async with client_of(server) as tasks:
            task_id = str((await tasks.start("pipeline", {"seconds": SLOW}))["taskId"])
            await until(
                lambda: runs(procs.counters, task_id)[("transform", "start")] == 1, "transform to start"
            )
            await tasks.cancel(task_id)
            task = await tasks.get(task_id)
            assert task["status"] == "cancelled", task
        # the worker's engine sees the task end (the store tells it, or the executor: Temporal
        # cancels the body's activity at a heartbeat, DBOS preempts the workflow's step); the
        # in-process contract proves the body itself sees the cancel (`test_cancel_reaches_the_body`);
        # here the workflow ends and no later step runs
        await until(lambda: f"task {task_id} cancelled" in worker.output(), "the worker to see the cancel")
        closed = await executor.closed(task_id)
        async with client_of(server) as tasks:
            final = await tasks.get(task_id)
    assert final["status"] == "cancelled", final
    # the workflow ends cancelled when the executor's cancel reaches it first, or completes with
    # the result "cancelled" when its body saw the cancelled record first (DBOS leaves a running
    # workflow to end that way: see DBOSExecutor.stop); it never fails or runs on
    assert closed in ("cancelled", "completed"), closed
    counted = runs(procs.counters, task_id)
    assert counted[("transform", "end")] == 0 and counted[("publish", "start")] == 0, events_in(
        procs.counters, task_id
    )


async def test_a_rolling_deploy_on_temporal_runs_new_tools_only_on_new_workers(
    tmp_path: Path, temporal: TemporalDevServer
) -> None:
    # an old worker (without the tool `fresh`) polls the same queue as a new one: Temporal hands
    # it some of the body activities; it gives each back (retried soon), never failing the task
    url = temporal_executor(temporal).url
    deploy = Deploy(sqlite_url(tmp_path), tmp_path, ("--executor", url))
    try:
        deploy.serve()
        old, new = deploy.worker("old"), deploy.worker("new")
        assert deploy.server is not None
        async with client_of(deploy.server) as tasks:
            fresh = [str((await tasks.start("fresh"))["taskId"]) for _ in range(20)]
            with anyio.fail_after(BOUND):
                finals = {task_id: await tasks.finish(task_id, within=BOUND) for task_id in fresh}
    finally:
        deploy.close()
    failed = {task_id: final for task_id, final in finals.items() if final["status"] != "completed"}
    assert not failed, failed
    ran_on = {final["result"]["structuredContent"]["pid"] for final in finals.values()}
    assert ran_on == {new.pid}, (ran_on, new.pid, old.pid)
