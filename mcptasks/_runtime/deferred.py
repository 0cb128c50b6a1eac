"""`DeferredWrites`: immediate results and the deferred first write of a task record.

A task started with `defer=True` runs its body before its record is written; the record is
stored by the body's first write or by `TaskEngine.settled`, whichever comes first
(`_store_deferred`). A body that ends within `IMMEDIATE_TURNS` turns is answered with its result
(`_settled`), at most `Limits.max_unwritten_results` of them before their end is in the store
(`_answers_unwritten`).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine_state import EngineState
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks.stores.base import TaskExists, TaskRecord

IMMEDIATE_TURNS = 6
"""How many scheduler turns a just-started body gets to end for an immediate result."""

IMMEDIATE_WRITE_WAIT = 5.0
"""How long (seconds) an immediate result waits for the store to record the body's end."""


class DeferredWrites(EngineState):
    """The part of `TaskEngine` that answers immediate results and writes deferred records."""

    async def _settled(self, task_id: str) -> Outcome | None:
        run = self._runs.get(task_id)
        if run is None or run.first_answer_taken:
            # a repeat of the call (an idempotency key that another call's run holds) gets the task
            return None
        run.first_answer_taken = True
        run.hold_statuses()
        try:
            for _ in range(IMMEDIATE_TURNS):
                if run.ending or run.yielded:
                    break
                await anyio.lowlevel.checkpoint()
        finally:
            run.release_statuses()
        if run.yielded or not run.ending:
            return None
        if self._answers_unwritten(run):
            self._unwritten.add(task_id)
            return run.outcome
        with anyio.move_on_after(IMMEDIATE_WRITE_WAIT):
            await run.ended.wait()
        return run.final

    def _answers_unwritten(self, run: TaskRun) -> bool:
        """Whether an immediate result is answered before its end is in the store.

        The answer does not name the task, so nobody waits for its record; a record whose write
        fails is kept and written once the store answers, as any task's end. Only an outcome the
        call is answered with (a result), and at most `Limits.max_unwritten_results` at once.
        """
        return (
            run.outcome is not None
            and run.outcome.result is not None
            and self._runs.get(run.task_id) is run
            and len(self._unwritten) < self.limits.max_unwritten_results
        )

    async def _store_deferred(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None] | None
    ) -> TaskRecord | None:
        """The first write of a record started with `defer`: create it with `change` applied.

        Returns the stored record, or None when the record was stored already (by another write,
        waited for here) or is not deferred: the caller then writes the usual way.
        """
        while True:
            record = self._unstored.pop(task_id, None)
            if record is not None:
                break
            storing = self._storing.get(task_id)
            if storing is None:
                return None
            await storing.wait()  # and look again: a failed first write puts the record back
        done = self._storing[task_id] = anyio.Event()
        try:
            first = (change(record) if change is not None else None) or record
            await self.store.create(first)
        except TaskExists:  # an earlier attempt was applied, its answer lost: it is stored
            return None
        except BaseException:
            self._unstored[task_id] = record  # the next write (or the reaper's) tries again
            raise
        finally:
            del self._storing[task_id]
            done.set()
        log_task("created", record)
        if self.observer is not None:
            self.observer.created(record)
            if first is not record:
                self.observer.changed(record, first)
        return first
