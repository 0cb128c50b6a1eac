"""Run task bodies on Temporal: one workflow per task, the body in one heartbeating activity.

`mcptasks serve APP --executor temporal://HOST:PORT[/NAMESPACE]` creates tasks and starts their
workflows; `mcptasks worker APP --executor temporal://...` processes are Temporal workers that run
them. The workflow (`mcptasks.Task`) is deterministic and tiny: it runs the activity
`mcptasks.run_task`, which claims the task in the store and runs its body through the engine
(steps and answers journalled in the store, statuses written to the record), heartbeating to
Temporal. A lost worker stops heartbeating; Temporal retries the activity on another worker,
whose replay of a durable body skips every finished step. `tasks/cancel` cancels the workflow;
cancelling or terminating it in Temporal's own tools cancels or fails the task.

Workflow ids are a hash of the task id (task ids are bearer secrets and stay out of Temporal's
visibility); the workflow's input holds the task id, so encrypt histories with a Temporal payload
codec where people who may not hold task ids can read them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
from temporalio import activity, workflow
from temporalio.client import Client, Interceptor, WorkflowExecutionStatus
from temporalio.common import Priority, RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from temporalio.workflow import ActivityCancellationType

from mcptasks._runtime.executor import ExecutorHost, HandedOver, HeldElsewhere, NotServedHere
from mcptasks.executors._reconcile import RECONCILE_BATCH as RECONCILE_BATCH
from mcptasks.executors._reconcile import (
    connected,
    due_for_reconcile,
    end_task_of_closed_workflow,
    let_body_stop,
)
from mcptasks.executors._reconcile import workflow_id as workflow_id
from mcptasks.stores.base import TaskRecord, owner_digest

logger = logging.getLogger("mcptasks")

WORKFLOW_NAME = "mcptasks.Task"
ACTIVITY_NAME = "mcptasks.run_task"
DEFAULT_TASK_QUEUE = "mcptasks"
RESUME_SIGNAL = "mcptasks.resume"
"""The signal that tells a workflow whose body is parked that its answers came."""
PARKED_STATUS = "parked"
"""What the body activity returns when the durable body waits for answers in the store."""
CACHED_WORKFLOWS = 1000
"""The most workflows a worker keeps cached (Temporal's default); fewer with a `--concurrency`."""
RECHECK = timedelta(hours=1)
"""How long a workflow whose body is parked waits for `RESUME_SIGNAL` before it looks again."""
_NOT_SERVED_RETRY = timedelta(seconds=1)
"""When the body activity runs again after a worker that does not know the task's tool gave it
back (Temporal picks any worker polling the queue; the task fails on `no_worker_timeout`)."""


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class TaskWorkflow:
    """One task: run its body activity until the task ends (retried wherever a worker is lost).

    A durable body that waits for answers ends its activity as parked (`"parked"`): the workflow
    then waits, holding no activity slot, for `RESUME_SIGNAL` (sent when the answers are
    recorded) or a cancellation, and runs the activity again, which replays the body from its
    journal on whichever worker takes it. It also looks again every `RECHECK` by itself (an
    answer recorded where no engine could signal, a record that expired meanwhile).
    """

    def __init__(self) -> None:
        self._resumes = 0

    @workflow.signal(name=RESUME_SIGNAL)
    def resume(self) -> None:
        """The answers the parked body waits for may have come."""
        self._resumes += 1

    @workflow.run
    async def run(self, start: dict[str, Any]) -> str:
        """Run the body (again after each park); return the task's final status."""
        while True:
            status = await self._run_body(start)
            if status != PARKED_STATUS:
                return status
            with suppress(asyncio.TimeoutError):
                await workflow.wait_condition(lambda: self._resumes > 0, timeout=RECHECK)
            self._resumes = 0

    async def _run_body(self, start: dict[str, Any]) -> str:
        heartbeat = timedelta(seconds=float(start["heartbeat"]))
        status: str = await workflow.execute_activity(
            ACTIVITY_NAME,
            start,
            start_to_close_timeout=timedelta(days=3650),
            heartbeat_timeout=heartbeat,
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=2.0,
                maximum_interval=max(heartbeat, timedelta(seconds=10)),
                maximum_attempts=0,
            ),
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            result_type=str,
        )
        return status


class _BodyActivity:
    """The activity that runs one task's body on this worker's engine."""

    def __init__(self, host: ExecutorHost) -> None:
        self.host = host

    @activity.defn(name=ACTIVITY_NAME)
    async def run_task(self, start: dict[str, Any]) -> str:
        """Claim the task and run its body to its end, heartbeating; `ApplicationError` (retried)
        when another live worker holds it or the body stopped without ending the task."""
        task_id = str(start["task"])
        every = max(0.2, float(start["heartbeat"]) / 4)
        try:
            async with anyio.create_task_group() as beats:
                beats.start_soon(_heartbeat_forever, every)
                try:
                    status = await self.host.run_task(task_id)
                finally:
                    beats.cancel_scope.cancel()
            return status
        except (HeldElsewhere, HandedOver) as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from None
        except NotServedHere as exc:  # a rolling deploy: soon on a worker that knows the tool
            raise ApplicationError(
                str(exc), type=type(exc).__name__, next_retry_delay=_NOT_SERVED_RETRY
            ) from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cancelled(task_id)
            raise

    async def _cancelled(self, task_id: str) -> None:
        """Temporal cancelled this activity: say so in the task, unless the worker is stopping
        (then the engine hands the run over and another worker's attempt takes it)."""
        details = activity.cancellation_details()
        if details is None or details.worker_shutdown or details.timed_out or details.paused:
            return
        failure = None
        if details.not_found:
            failure = (
                "Its Temporal workflow was terminated or closed outside mcptasks; the task cannot finish."
            )
        if await end_task_of_closed_workflow(self.host, task_id, "Temporal", failure):
            logger.info("task %s ended by Temporal (%s)", task_id, details)
        await let_body_stop(self.host, task_id)


async def _heartbeat_forever(every: float) -> None:
    while True:
        activity.heartbeat()
        await anyio.sleep(every)


class TemporalExecutor:
    """Runs task bodies as Temporal workflows (see the module docstring).

    - `target`: the frontend's `HOST:PORT`; `namespace`: the Temporal namespace (default
      `default`); `task_queue`: the queue workflows and activities are polled from.
    - `interceptors`: Temporal client interceptors (OpenTelemetry's `TracingInterceptor` is added
      when `opentelemetry` is installed, so a trace links `tools/call`, the workflow and its
      activity); `client`: an already connected client to use instead.
    """

    name = "temporal"

    def __init__(
        self,
        target: str = "127.0.0.1:7233",
        *,
        namespace: str = "default",
        task_queue: str = DEFAULT_TASK_QUEUE,
        interceptors: Sequence[Interceptor] | None = None,
        client: Client | None = None,
    ) -> None:
        if not target or ":" not in target:
            raise ValueError(f"a Temporal target must be HOST:PORT, got {target!r}")
        self.target = target
        self.namespace = namespace
        self.task_queue = task_queue
        self.interceptors = list(interceptors) if interceptors is not None else _default_interceptors()
        self._client = client
        self._host: ExecutorHost | None = None
        self._heartbeat = 15.0

    @classmethod
    def from_url(cls, url: str) -> TemporalExecutor:
        """`temporal://HOST:PORT[/NAMESPACE][?task_queue=QUEUE]`."""
        parts = urlsplit(url)
        if parts.scheme != "temporal" or not parts.hostname or parts.port is None:
            raise ValueError(f"a Temporal executor URL is temporal://HOST:PORT[/NAMESPACE], got {url!r}")
        namespace = parts.path.strip("/") or "default"
        queue = parse_qs(parts.query).get("task_queue", [DEFAULT_TASK_QUEUE])[0]
        return cls(f"{parts.hostname}:{parts.port}", namespace=namespace, task_queue=queue)

    def __repr__(self) -> str:
        return (
            f"TemporalExecutor({self.target!r}, namespace={self.namespace!r}, task_queue={self.task_queue!r})"
        )

    @property
    def client(self) -> Client:
        """The connected client (`RuntimeError` outside `serving`)."""
        return connected(self._client, "Temporal")

    @asynccontextmanager
    async def serving(self, host: ExecutorHost) -> AsyncIterator[None]:
        """Connect to Temporal (a clear error when it cannot be reached)."""
        self._host = host
        self._heartbeat = host.lease_ttl
        if self._client is not None:
            yield
            return
        try:
            self._client = await Client.connect(
                self.target, namespace=self.namespace, interceptors=self.interceptors
            )
        except Exception as exc:
            raise RuntimeError(
                f"cannot reach Temporal at {self.target} (namespace {self.namespace!r}): {exc}"
            ) from exc
        try:
            yield
        finally:
            self._client = None

    @asynccontextmanager
    async def working(self, host: ExecutorHost) -> AsyncIterator[None]:
        """Poll the task queue for workflows and body activities while entered."""
        limit = host.max_concurrent
        worker = Worker(
            self.client,
            task_queue=self.task_queue,
            workflows=[TaskWorkflow],
            activities=[_BodyActivity(host).run_task],
            max_concurrent_activities=limit if limit is not None else 1000,
            # Workflows whose body is parked wait in the cache too: keep it near the running ones
            # (an evicted workflow replays its short history when its signal comes).
            max_cached_workflows=CACHED_WORKFLOWS
            if limit is None
            else min(CACHED_WORKFLOWS, 2 * limit + 100),
            graceful_shutdown_timeout=timedelta(seconds=1),
        )
        async with worker:
            yield

    async def submit(self, record: TaskRecord) -> None:
        """Start the task's workflow (a workflow already started for it is left as it is)."""
        with suppress(WorkflowAlreadyStartedError):
            await self.client.start_workflow(
                WORKFLOW_NAME,
                {"task": record.task_id, "heartbeat": self._heartbeat},
                id=workflow_id(record.task_id),
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                # one fairness key per owner (its activity inherits it): a server with fairness
                # on dispatches the queue's tasks fairly across owners, not first in, first out
                priority=Priority(fairness_key=owner_digest(record.owner)),
            )

    async def resume(self, record: TaskRecord) -> None:
        """Signal the task's workflow, waiting with its body parked, to run the body again."""
        try:
            await self.client.get_workflow_handle(workflow_id(record.task_id)).signal(RESUME_SIGNAL)
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise

    async def stop(self, task_id: str) -> None:
        """Cancel the task's workflow (its activity sees the cancellation at its next heartbeat)."""
        try:
            await self.client.get_workflow_handle(workflow_id(task_id)).cancel()
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """Start the workflows of queued tasks that have none; cancel the tasks whose workflow was
        cancelled in Temporal, and fail those whose workflow closed otherwise without ending them
        (terminated or timed out)."""
        changed = 0
        for record in due_for_reconcile(active, live):
            changed += await self._reconcile_one(record)
        return changed

    async def _reconcile_one(self, record: TaskRecord) -> int:
        handle = self.client.get_workflow_handle(workflow_id(record.task_id))
        try:
            described = await handle.describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            logger.info("task %s has no Temporal workflow; starting it", record.task_id)
            await self.submit(record)
            return 1
        status = described.status
        if status in (None, WorkflowExecutionStatus.RUNNING):
            if record.runner is None and record.input_key_counter:
                await self.resume(record)  # perhaps answered where no engine could signal it
            return 0
        assert self._host is not None
        failure = None
        if status != WorkflowExecutionStatus.CANCELED:
            name = status.name.lower().replace("_", " ")
            failure = (
                f"Its Temporal workflow {handle.id} ended ({name}) without ending the task: it was "
                "terminated or timed out outside mcptasks."
            )
        return int(await end_task_of_closed_workflow(self._host, record.task_id, "Temporal", failure))


def _default_interceptors() -> list[Interceptor]:
    try:
        from temporalio.contrib.opentelemetry import TracingInterceptor
    except ImportError:  # OpenTelemetry is not installed
        return []
    return [TracingInterceptor()]
