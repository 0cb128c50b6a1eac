"""`ImmediateResults`: the answer a new task's call gets when its body ends at once.

A body ends at once when it returns within `IMMEDIATE_TURNS` scheduler turns of starting without
writing a checkpoint or asking a question; the statuses it yields meanwhile are held in memory,
not written. So the rule is about the body alone and a tool gets the same answer on every store.
Once such a body ended with a result, that is the answer while its end is still being written
(at most `Limits.max_unwritten_results` at once: the `RunRegistry` counts them); otherwise (an
error, or that bound reached) the answer waits for the end to be recorded (at most
`IMMEDIATE_WRITE_WAIT` seconds). A body that suspends on real work (I/O, sleeps) is not waited
for: on asyncio it is seen to (`TaskRun.waits`) and the turns end there.

After a `start` with `defer`, a None answer means the record is in the store by now (`settled`
writes it if nothing else did); if that write fails, the body is stopped and `settled` raises.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

import anyio

from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine.duties import guarded
from mcptasks._runtime.engine.records import RecordWriter
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.run import TaskRun

IMMEDIATE_TURNS = 6
"""How many scheduler turns a just-started body gets to end for an immediate result."""

IMMEDIATE_WRITE_WAIT = 5.0
"""How long (seconds) an immediate result waits for the store to record the body's end."""


class ImmediateResults:
    """Answers the call that started a task with the body's result when it ends at once."""

    def __init__(
        self,
        records: RecordWriter,
        runs: RunRegistry,
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, object]]], bool],
    ) -> None:
        self.records = records
        self.runs = runs
        self.start_soon = start_soon
        """Starts a job in the engine's task group (False: the engine is not running)."""

    async def settled(self, task_id: str) -> Outcome | None:
        """See `TaskEngine.settled`."""
        try:
            final = await self._settled(task_id)
            if final is None:  # answered with the task: its record must be in the store first
                await self.records.store_deferred(task_id, None)
        except anyio.get_cancelled_exc_class():
            if self.records.deferred(task_id):  # the caller went away
                self.start_soon(partial(guarded, partial(self.records.store_deferred, task_id, None)))
            raise
        except BaseException:
            # The call fails as a failed create would have: nobody learns of the task, so its
            # body stops and no later write stores it.
            run = self.runs.get(task_id)
            if self.records.forget_deferred(task_id) and run is not None:
                run.stop()
            raise
        return final

    async def _settled(self, task_id: str) -> Outcome | None:
        run = self.runs.get(task_id)
        if run is None or not run.answer_first():
            # a repeat of the call (an idempotency key that another call's run holds) gets the task
            return None
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
        return run.outcome is not None and run.outcome.result is not None and self.runs.answer_early(run)
