"""`ExecutorPlacement`: bodies run where an `Executor` (Temporal, DBOS) decides.

The engine still creates every task and answers every `tasks/*` request from the store; a new
task is submitted to the executor, whose workers run it here through the `ExecutorHost` calls
(`run_task` claims the record with `Claims.claim_one` and launches it on the `LocalHost`). The
executor's own `submit`, `stop` and `reconcile` are wrapped unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

from anyio.abc import TaskGroup

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.engine.bodies import close_body
from mcptasks._runtime.engine.duties import guarded
from mcptasks._runtime.engine.ends import RunEnds
from mcptasks._runtime.engine.host import LocalHost
from mcptasks._runtime.engine.queue import Claims, QueuedAdmission
from mcptasks._runtime.engine.records import RecordWriter, same_call
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.journal import encoded
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import describe
from mcptasks.stores.base import StoreBase, TaskRecord

logger = logging.getLogger("mcptasks")


class ExecutorPlacement:
    """Submits new tasks to an executor and is the `ExecutorHost` its workers call."""

    takes_queued = False

    def __init__(
        self,
        executor: Executor,
        *,
        works: bool,
        store: StoreBase,
        config: EngineConfig,
        instance_id: str,
        observer: EngineObserver | None,
        records: RecordWriter,
        runs: RunRegistry,
        ends: RunEnds,
        host: LocalHost,
        claims: Claims,
        admission: QueuedAdmission,
    ) -> None:
        self.executor = executor
        self.works = works
        """Whether this engine runs bodies for the executor (`mcptasks worker`)."""
        self.store = store
        self.config = config
        self.instance_id = instance_id
        self.observer = observer
        self.records = records
        self.runs = runs
        self.ends = ends
        self.host = host
        self.claims = claims
        self.admission = admission

    # -- ExecutorHost ------------------------------------------------------------------------------

    @property
    def lease_ttl(self) -> float:
        """How long a runner counts as alive after its last heartbeat (seconds)."""
        return self.config.lease_ttl

    @property
    def max_concurrent(self) -> int | None:
        """The most tasks this engine runs at once (None: no bound)."""
        return self.config.max_concurrent

    async def run_task(self, task_id: str) -> str:
        """Claim the task and run its body here until it ends; return its final status (an
        executor's worker calls this: see `ExecutorHost.run_task`)."""
        return await self.claims.run_one(task_id)

    async def cancel_task(self, task_id: str, reason: str) -> bool:
        """Cancel the task whatever its owner (an executor's own tools cancelled its run)."""
        if not await self.ends.cancel(task_id, reason, None):
            return False
        await guarded(partial(self.stop, task_id))
        return True

    async def fail_task(self, task_id: str, message: str, *, reason: str) -> bool:
        """Fail an active task with `message` (`data.reason`: `reason`)."""
        return await self.ends.fail(task_id, message, reason=reason)

    # -- Placement ---------------------------------------------------------------------------------

    def runner_for(self, prepared: StartedBody | None) -> str | None:
        """Queued: an executor's worker claims it."""
        return None

    async def place(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        record: TaskRecord,
        prepared: StartedBody | None,
        *,
        defer: bool,
    ) -> TaskRecord:
        """Store the new record queued and submit it to the executor.

        A body started by input rounds cannot cross to a worker: it is closed, and a durable
        one's journal starts with what the rounds did (a worker's replay answers them); any other
        asks its questions again there. A submit that fails leaves the task queued, saying why;
        `reconcile` submits it again."""
        held = await self.admission.create(record, self.records, self.observer)
        if prepared is not None:
            await close_body(prepared.body)
        if held is not None:
            return same_call(held, record)
        if prepared is not None and tool.durable:
            for position, entry in enumerate(prepared.entries):
                await self.store.append_journal(record.task_id, position, encoded(entry))
        executor = self.executor
        try:
            await executor.submit(record)
        except Exception as exc:
            logger.warning(
                "could not start task %s on %s (%s); it stays queued and is submitted again",
                record.task_id,
                executor.name,
                describe(exc),
            )
            note = f"Waiting to start on {executor.name}: {describe(exc)}"
            await guarded(partial(self.records.mutate, record.task_id, ledger.waiting(note)))
        await self.store.publish(record.task_id)
        return record

    async def serve(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        """Connect the executor (and work for it, when this engine runs bodies)."""
        await stack.enter_async_context(self.executor.serving(self))
        if self.works:
            await stack.enter_async_context(self.executor.working(self))

    async def unparked(self, record: TaskRecord) -> None:
        """The task's answers came: the executor runs it again (`Executor.resume`)."""
        await self.executor.resume(record)

    async def stop(self, task_id: str) -> None:
        """The task was cancelled: the executor releases what it holds for it."""
        await self.executor.stop(task_id)

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """The executor submits what was never started and fails what it ended without ending
        its task (it logs each task it changes)."""
        return await self.executor.reconcile(active, live)
