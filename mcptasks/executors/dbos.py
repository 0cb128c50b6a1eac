"""Run task bodies on DBOS: one workflow per task on a DBOS queue, the body in one step.

`mcptasks serve APP --executor dbos+postgresql://USER@HOST:PORT/DB` creates tasks and enqueues
their workflows in the DBOS system database (the URL without `dbos+`; `dbos+sqlite:///PATH` for a
one-machine setup); `mcptasks worker APP --executor dbos+...` processes launch DBOS, dequeue them
and run them. The workflow (`mcptasks.task`) is tiny: one step, `mcptasks.run_task`, which claims
the task in the store and runs its body through the worker's engine (steps and answers journalled
in the store, statuses written to the record), retrying while another live worker holds it.

DBOS runs an async workflow on its own event loop thread; the step hands the body's run to the
engine's loop (`asyncio.run_coroutine_threadsafe`) and waits for it there. Each worker launches
DBOS with its engine's instance id as DBOS executor id, so `reconcile` can tell a workflow left
PENDING by a worker that is gone (DBOS itself recovers those only when a process with the same
executor id launches again) and resume it on the queue, where another worker replays it: the
store's journal skips every finished step, and a stale run is fenced by the record's
compare-and-set. `tasks/cancel` cancels a workflow no worker has started (a running one ends
when its body sees the cancelled record); cancelling it with DBOS's own tools
(`DBOS.cancel_workflow`, `dbos workflow cancel`, Conductor) cancels the task.

DBOS keeps one instance per process: one engine per process can work for a DBOS executor, and it
owns the process's DBOS (launched on entering `working`, destroyed on leaving it). Workflow ids
are a hash of the task id (task ids are bearer secrets); the workflow's input holds the task id,
so restrict who may read the system database's workflow inputs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import anyio
from dbos import DBOS, DBOSClient, DBOSConfig, WorkflowStatus
from dbos import error as dbos_errors

from mcptasks._runtime.executor import ExecutorHost, HandedOver, HeldElsewhere, NotServedHere
from mcptasks._runtime.ledger import PARKED
from mcptasks.executors._reconcile import RECONCILE_BATCH as RECONCILE_BATCH
from mcptasks.executors._reconcile import (
    connected,
    due_for_reconcile,
    end_task_of_closed_workflow,
    let_body_stop,
)
from mcptasks.executors._reconcile import workflow_id as workflow_id
from mcptasks.stores.base import TaskRecord
from mcptasks.stores.redaction import redact_url

logger = logging.getLogger("mcptasks")

T = TypeVar("T")

WORKFLOW_NAME = "mcptasks.task"
STEP_NAME = "mcptasks.run_task"
DEFAULT_APP_NAME = "mcptasks"
DEFAULT_QUEUE = "mcptasks"
APP_VERSION = "mcptasks-1"
"""The DBOS application version every process uses: the workflow is one step and does not change
with the tools, so every worker may replay every workflow (DBOS would hash the registered code)."""
DEFAULT_WORKER_CONCURRENCY = 100
"""The queue's per-worker limit when the engine has no `max_concurrent`."""
_ENDED = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS workflow statuses after which the workflow runs no more."""
_SCHEMES = ("dbos+postgresql", "dbos+postgres", "dbos+sqlite")
PARKED_STATUS = "parked"
"""What the step returns when the durable body waits for answers in the store: the workflow
ends with it (freeing its slot on the queue) and `resume` enqueues a new one for the task."""


# -- the worker side: the workflow, its step and the engine they run on --------------------------


@dataclass
class _Worker:
    """The engine this process's DBOS runs bodies on (set while an engine is in `working`)."""

    host: ExecutorHost
    loop: asyncio.AbstractEventLoop
    runs: set[concurrent.futures.Future[Any]] = field(default_factory=set)


_worker: _Worker | None = None


def _current_worker() -> _Worker:
    worker = _worker
    if worker is None:  # DBOS was launched here by something else than `DBOSExecutor.working`
        raise RuntimeError(
            "no mcptasks engine works for DBOS in this process: start it with `mcptasks worker`"
        )
    return worker


async def _on_engine(worker: _Worker, call: Callable[[ExecutorHost], Awaitable[T]]) -> T:
    """Run `call(host)` on the engine's event loop and wait for it here (on DBOS's loop);
    cancelling the wait cancels the call."""

    async def on_engine() -> T:
        return await call(worker.host)

    future = asyncio.run_coroutine_threadsafe(on_engine(), worker.loop)
    worker.runs.add(future)
    future.add_done_callback(worker.runs.discard)
    return await asyncio.wrap_future(future)


async def _run_until_ended(task_id: str, host: ExecutorHost) -> str:
    """`host.run_task` until the task ends (on the engine's loop), trying again while another
    live runner holds it, after a run stopped without ending it, and after an error (the store
    unreachable, say: like Temporal's activity retries, so the workflow never fails for it)."""
    delay = 0.5
    while True:
        try:
            return await host.run_task(task_id)
        except (HeldElsewhere, HandedOver, NotServedHere) as exc:
            logger.debug("task %s did not end on this DBOS worker yet: %s", task_id, exc)
        except Exception:
            logger.warning("running task %s for DBOS failed; trying again", task_id, exc_info=True)
        await anyio.sleep(delay)
        delay = min(delay * 2, max(1.0, host.lease_ttl / 2))


async def _run_step(task_id: str) -> str:
    """The step: run the body on the engine until the task ends; return its final status."""
    worker = _current_worker()
    return await _on_engine(worker, partial(_run_until_ended, task_id))


async def _cancelled_in_dbos(task_id: str, host: ExecutorHost) -> None:
    """The workflow was cancelled in DBOS: cancel the task (nothing when mcptasks cancelled it
    first), then wait a little for the body to stop at its next checkpoint."""
    if await end_task_of_closed_workflow(host, task_id, "DBOS"):
        logger.info("task %s cancelled in DBOS", task_id)
    await let_body_stop(host, task_id)


async def _task_workflow(task_id: str) -> str:
    """One task: its body in one preemptible step (cancelling the workflow stops the step)."""
    try:
        status: str = await DBOS.run_step_async({"name": STEP_NAME, "preemptible": True}, _run_step, task_id)
    except dbos_errors.DBOSWorkflowCancelledError:
        worker = _worker
        if worker is not None:
            await _on_engine(worker, partial(_cancelled_in_dbos, task_id))
        raise
    return status


DBOS.workflow(name=WORKFLOW_NAME)(_task_workflow)


def resume_id(record: TaskRecord) -> str:
    """The id of the workflow that runs a task again after its body parked at the question whose
    keys end at `record.input_key_counter`."""
    return f"{workflow_id(record.task_id)}-r{record.input_key_counter}"


# -- the executor ---------------------------------------------------------------------------------


class DBOSExecutor:
    """Runs task bodies as DBOS workflows (see the module docstring).

    - `system_database_url`: DBOS's system database (`postgresql://...` or `sqlite:///PATH`),
      created and migrated by the first engine that connects; `app_name`: the DBOS application
      (workers only dequeue their application's queues); `queue`: the queue workflows go on.
    - `polling_interval`: how often (seconds) a worker looks for new workflows on the queue;
      `log_level`: DBOS's own log level in workers.

    A worker sets the queue's per-worker concurrency to its engine's `max_concurrent` (or
    `DEFAULT_WORKER_CONCURRENCY`) before it launches DBOS; DBOS keeps one value per queue, so give
    every worker the same. The queue is first in, first out across owners (bounded per owner by
    `Limits.max_active_per_owner`, counted in the store by the engine that creates the tasks).
    """

    name = "dbos"

    def __init__(
        self,
        system_database_url: str,
        *,
        app_name: str = DEFAULT_APP_NAME,
        queue: str = DEFAULT_QUEUE,
        polling_interval: float = 1.0,
        log_level: str = "WARNING",
    ) -> None:
        scheme = urlsplit(system_database_url).scheme
        if not (scheme.startswith("postgres") or scheme.startswith("sqlite")):
            raise ValueError(
                f"a DBOS system database URL is postgresql://... or sqlite:///PATH, got {system_database_url!r}"
            )
        self.system_database_url = system_database_url
        self.app_name = app_name
        self.queue = queue
        self.polling_interval = polling_interval
        self.log_level = log_level
        self._client: DBOSClient | None = None
        self._host: ExecutorHost | None = None

    @classmethod
    def from_url(cls, url: str) -> DBOSExecutor:
        """`dbos+postgresql://USER@HOST:PORT/DB` or `dbos+sqlite:///PATH` (DBOS's system database),
        with an optional `polling_interval=SECONDS` query parameter (taken off the URL)."""
        parts = urlsplit(url)
        if parts.scheme not in _SCHEMES:
            raise ValueError(
                f"a DBOS executor URL is dbos+postgresql://USER@HOST:PORT/DB or dbos+sqlite:///PATH, got {url!r}"
            )
        query = parse_qsl(parts.query, keep_blank_values=True)
        polling = [value for name, value in query if name == "polling_interval"]
        if not polling:
            return cls(url.removeprefix("dbos+"))
        rest = urlencode([(name, value) for name, value in query if name != "polling_interval"])
        base = url.removeprefix("dbos+").partition("?")[0]
        system_db = f"{base}?{rest}" if rest else base
        try:
            interval = float(polling[-1])
        except ValueError:
            interval = math.nan
        if not interval > 0 or math.isinf(interval):
            raise ValueError(f"polling_interval must be a positive number of seconds, got {polling[-1]!r}")
        return cls(system_db, polling_interval=interval)

    def __repr__(self) -> str:
        return f"DBOSExecutor({redact_url(self.system_database_url)!r}, app_name={self.app_name!r}, queue={self.queue!r})"

    @property
    def client(self) -> DBOSClient:
        """The connected client (`RuntimeError` outside `serving`)."""
        return connected(self._client, "DBOS")

    @asynccontextmanager
    async def serving(self, host: ExecutorHost) -> AsyncIterator[None]:
        """Create or migrate the system database and connect a client to it."""
        self._host = host
        url = self.system_database_url

        def connect() -> DBOSClient:
            DBOS.migrate(url)
            client = DBOSClient(system_database_url=url, application_name=self.app_name)
            try:
                client.register_queue(
                    self.queue,
                    polling_interval_sec=self.polling_interval,
                    on_conflict="never_update",
                    application_name=self.app_name,
                )
            except BaseException:
                client.destroy()
                raise
            return client

        try:
            self._client = await anyio.to_thread.run_sync(connect)
        except Exception as exc:
            raise RuntimeError(f"cannot reach the DBOS system database {redact_url(url)}: {exc}") from exc
        try:
            yield
        finally:
            client, self._client = self._client, None
            if client is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(client.destroy)

    @asynccontextmanager
    async def working(self, host: ExecutorHost) -> AsyncIterator[None]:
        """Launch DBOS in this process (executor id: the engine's instance id) and dequeue the
        queue's workflows while entered; destroy it on leaving (bodies still running are handed
        over by the engine, their workflows left PENDING for `reconcile` to resume)."""
        global _worker
        if _worker is not None:
            raise RuntimeError(
                "another engine in this process already works for DBOS: DBOS runs one instance per process"
            )
        limit = host.max_concurrent
        config: DBOSConfig = {
            "name": self.app_name,
            "system_database_url": self.system_database_url,
            "executor_id": host.instance_id,
            "application_version": APP_VERSION,
            "log_level": self.log_level,
        }

        def launch() -> None:
            # The queue's worker concurrency is stored before DBOS launches: its queue thread
            # reads the stored queue before it first dequeues, so a worker starting on a backlog
            # never runs more than `limit` bodies at once.
            self.client.register_queue(
                self.queue,
                worker_concurrency=limit if limit is not None else DEFAULT_WORKER_CONCURRENCY,
                polling_interval_sec=self.polling_interval,
                on_conflict="always_update",
                application_name=self.app_name,
            )
            DBOS(config=config)
            try:
                DBOS.launch()
            except BaseException:
                DBOS.destroy()
                raise

        worker = _worker = _Worker(host, asyncio.get_running_loop())
        try:
            await anyio.to_thread.run_sync(launch)
        except BaseException:
            _worker = None
            raise
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(DBOS.destroy)
                for run in list(worker.runs):
                    run.cancel()  # a wait on the engine's loop DBOS's loop no longer awaits
                _worker = None

    async def submit(self, record: TaskRecord) -> None:
        """Enqueue the task's workflow (a workflow already enqueued for it is left as it is)."""
        await self._enqueue(record.task_id, workflow_id(record.task_id))

    async def resume(self, record: TaskRecord) -> None:
        """Enqueue a workflow that runs the task again: its durable body waited for answers in
        the store, its workflow ended as parked, and the answers came (one workflow per park,
        named after the question's keys, so a second resume starts nothing)."""
        await self._enqueue(record.task_id, resume_id(record))

    async def _enqueue(self, task_id: str, wf_id: str) -> None:
        await self.client.enqueue_async(
            {"queue_name": self.queue, "workflow_name": WORKFLOW_NAME, "workflow_id": wf_id}, task_id
        )

    async def stop(self, task_id: str) -> None:
        """The task was cancelled: cancel its workflow if no worker has started it yet. A running
        one is left to end by itself (its body sees the cancelled record and the workflow returns
        `"cancelled"`): cancelling it too would race that end, and DBOS logs the loser as an error."""
        wf_id = workflow_id(task_id)
        found = await self.client.list_workflows_async(
            workflow_ids=[wf_id], load_input=False, load_output=False
        )
        if found and found[0].status in ("ENQUEUED", "DELAYED"):
            with suppress(dbos_errors.DBOSNonExistentWorkflowError):
                await self.client.cancel_workflow_async(wf_id)

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """Enqueue the workflows of tasks that have none; resume the workflows left PENDING by a
        worker that is gone; cancel the tasks whose workflow was cancelled in DBOS's own tools and
        fail those whose workflow ended otherwise without ending them (failed, or out of recovery
        attempts)."""
        queued = due_for_reconcile(active, live)
        if not queued:
            return 0
        ids = {workflow_id(record.task_id): record for record in queued}
        resumes = {resume_id(record): record for record in queued if record.input_key_counter}
        found = await self.client.list_workflows_async(
            workflow_ids=[*ids, *resumes], load_input=False, load_output=False
        )
        statuses = {status.workflow_id: status for status in found}
        changed = 0
        for wf_id, record in ids.items():
            status = statuses.get(wf_id)
            if status is not None and status.status == "SUCCESS":  # it parked: a resume runs it
                if record.runner == PARKED:
                    continue  # it waits for answers
                resumed = statuses.get(resume_id(record))
                if resumed is None:  # answered where no engine with this executor saw it
                    logger.info("task %s was answered while parked; running it again", record.task_id)
                    await self.resume(record)
                    changed += 1
                    continue
                status = resumed
            changed += await self._reconcile_one(record, status, live)
        return changed

    async def _reconcile_one(self, record: TaskRecord, status: WorkflowStatus | None, live: set[str]) -> int:
        if status is None:
            logger.info("task %s has no DBOS workflow; enqueuing it", record.task_id)
            await self.submit(record)
            return 1
        if status.status == "PENDING":
            if status.executor_id in live:
                return 0
            logger.info(
                "task %s: its DBOS workflow was left running on executor %s, which is gone; resuming it",
                record.task_id,
                status.executor_id,
            )
            await self.client.resume_workflow_async(status.workflow_id, queue_name=self.queue)
            return 1
        if status.status not in _ENDED:
            return 0  # ENQUEUED or DELAYED: a worker will run it
        assert self._host is not None
        failure = None
        if status.status != "CANCELLED":
            name = status.status.lower().replace("_", " ")
            failure = (
                f"Its DBOS workflow {status.workflow_id} ended ({name}) without ending the task: it "
                "failed outside mcptasks, or ran out of recovery attempts."
            )
        return int(await end_task_of_closed_workflow(self._host, record.task_id, "DBOS", failure))
