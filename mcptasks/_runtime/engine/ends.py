"""`RunEnds`: every way a run on this engine ends, and the outcomes that say how.

A body that is over is settled: its end is written through the `RecordWriter` (retried while the
store fails; kept for later when it keeps failing), a run stopped by shutdown is handed back
(re-queued or failed), and the run leaves the `RunRegistry` whatever happened. A task cancelled
or failed from outside (a client, an executor) stops its run here, and a run whose record ended
elsewhere is stopped when the change is seen (`refresh`). Orphans, whose runner is gone, are
re-queued or failed (`orphaned`); a client's answers wake the run that waits for them (`answer`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine.records import RecordWriter
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.ledger import PARKED, answered, cancelled
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import StoreRetry, describe
from mcptasks._runtime.recovery import lost_outcome, requeue
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks.stores.base import StoreBase, TaskRecord
from mcptasks.wire import INTERNAL_ERROR

logger = logging.getLogger("mcptasks")

LOST_WITH_PROCESS = "its task store is not durable (memory): the task is lost when this process exits"
"""What the log says of a task re-queued at a graceful stop on a store that is not durable (memory)."""

AT_SHUTDOWN = StoreRetry(budget=5.0, maximum=1.0)
"""How long a body that ends while the engine shuts down waits for a failing store."""


class RunEnds:
    """Records how runs ended and forgets them; ends tasks from outside and stops their runs."""

    def __init__(
        self,
        store: StoreBase,
        config: EngineConfig,
        tools: dict[str, TaskTool],
        records: RecordWriter,
        runs: RunRegistry,
        observer: EngineObserver | None,
    ) -> None:
        self.store = store
        self.config = config
        self.tools = tools
        self.records = records
        self.runs = runs
        self.observer = observer

    async def settle(self, run: TaskRun, outcome: Outcome | None, *, closing: bool) -> None:
        """Record how `run` ended (shielded while the engine shuts down: `closing`)."""
        run.settling(outcome)
        try:
            if not closing:
                await self._settle(run, outcome)
                return
            with anyio.CancelScope(shield=True):  # the task group is being cancelled
                await self._settle(run, outcome, patient=False)
        finally:
            if self.observer is not None:
                self.observer.settled(run.task_id)

    async def _settle(self, run: TaskRun, outcome: Outcome | None, *, patient: bool = True) -> None:
        """Record how a run ended and forget it (outcome None: the engine is shutting down).

        While the store fails, the end is retried (`store_retry`, when `patient`; a few seconds
        at shutdown); if it keeps failing, the outcome is kept and written by the reaper once the
        store answers (at shutdown it is logged in full instead).
        """
        try:
            if outcome is None:  # release the task (retry_on_crash) or fail it
                record = await self.store.get(run.task_id)
                if record is not None and run.owns(record):
                    await self.orphaned(record, shutdown=True)
            else:
                retry = self.config.store_retry if patient else AT_SHUTDOWN
                await self.records.record_end(run, outcome, retry, keep=patient)
        except Exception as exc:
            logger.error(
                "could not release task %s at shutdown (%s); it stays active", run.task_id, describe(exc)
            )
        finally:
            self.runs.drop(run.task_id)

    async def answer(
        self, task_id: str, responses: Mapping[str, Any], known: TaskRecord
    ) -> TaskRecord | None:
        """Record a client's answers to outstanding keys and wake the run waiting for them; the
        record when they queued a task parked in the store again (its placement must run it).
        Answers to other keys are ignored, as the protocol says: a key answered already (by
        anyone) or withdrawn (its question was asked again differently) takes no second answer."""
        accepted: dict[str, Any] = {}
        written = await self.records.mutate(task_id, answered(responses, accepted), known=known)
        if written is None or not accepted:
            return None
        run = self.runs.get(task_id)
        if run is not None:
            run.poke()
        await self.store.publish(task_id)  # claim loops wake: a parked task is claimable again
        return written if known.runner == PARKED and written.runner is None else None

    async def cancel(self, task_id: str, reason: str, known: TaskRecord | None) -> bool:
        """Cancel the task and stop its run here; whether this cancelled it."""
        done = await self.records.mutate(task_id, cancelled(reason), known=known)
        if done is None:
            return False
        log_task("cancelled", done)
        run = self.runs.get(task_id)
        if run is not None:
            run.cancelled_here()
        await self.store.publish(task_id)
        return True

    async def fail(self, task_id: str, message: str, *, reason: str) -> bool:
        """Fail an active task with `message` (`data.reason`: `reason`) and stop its run here."""
        error = {"code": INTERNAL_ERROR, "message": message, "data": {"reason": reason}}
        ended = await self.records.finish(task_id, Outcome("failed", error=error))
        if ended is None or ended.status != "failed":
            return False
        run = self.runs.get(task_id)
        if run is not None:
            run.stop()
        await self.store.publish(task_id)
        return True

    async def refresh(self, run: TaskRun) -> None:
        """Re-read the record of `run` after a change was announced: stop the run when its task
        ended, vanished or was taken over, else wake its body."""
        record = await self.store.get(run.task_id)
        if record is None or record.terminal or not run.owns(record):
            run.log_cancel_from_elsewhere(record)
            run.stop()
        else:
            run.poke()

    async def orphaned(self, record: TaskRecord, *, shutdown: bool = False) -> bool:
        """Re-queue (retry_on_crash, attempts left) or fail a task whose runner is gone or stopping."""
        change = requeue(record, self.tools.get(record.tool), shutdown=shutdown)
        if change is None:
            outcome = lost_outcome(record, shutdown=shutdown)
            return await self.records.finish(record.task_id, outcome, only_runner=record.runner) is not None
        requeued = await self.records.mutate(record.task_id, change)
        if requeued is None:
            return False
        if requeued.runner is None:
            log_task(
                "requeued", requeued, note=None if self.store.durable or not shutdown else LOST_WITH_PROCESS
            )
        await self.store.publish(record.task_id)
        return True
