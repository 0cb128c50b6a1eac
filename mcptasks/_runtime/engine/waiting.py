"""`WaitingBodies`: the bodies of the `LocalHost` that wait for answers without their task.

A body that asks a question gives its anyio task up. It waits either here, in memory, until an
answer, a cancellation, its timeout, its question's deadline or the `input_poll_interval` re-read
wakes it, or, when it is durable and its host parks in the store (`EngineConfig.park_waiting`, and
always on an executor's workers), in the store: its claim is given up (`ledger.PARKED`), its run
dropped and its generator closed; the answer that leaves nothing outstanding queues the task again
and the worker that claims it replays the body from its journal. Waiting bodies hold no slot of
`max_concurrent`; one woken while every slot is taken waits for one, first in first out.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from contextvars import copy_context

import anyio

from mcptasks._authoring.context import BodyChannel
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import OpenQuestion
from mcptasks._runtime.engine.bodies import close_body
from mcptasks._runtime.engine.records import RecordWriter
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import describe
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.wakeups import Wakeup, Wakeups
from mcptasks.stores.base import StoreBase

logger = logging.getLogger("mcptasks")


class WaitingBodies:
    """Keeps the bodies waiting for answers (in memory or parked in the store) and the woken
    ones waiting for a slot; times every waiting body with one wake-up duty."""

    def __init__(
        self,
        store: StoreBase,
        config: EngineConfig,
        instance_id: str,
        observer: EngineObserver | None,
        records: RecordWriter,
        runs: RunRegistry,
        *,
        in_store: bool,
    ) -> None:
        self.store = store
        self.config = config
        self.instance_id = instance_id
        self.observer = observer
        self.records = records
        self.runs = runs
        self.in_store = in_store
        """Whether a durable body waits in the store (else every body waits here)."""
        self._wakeups = Wakeups()
        """Wakes bodies waiting for input to re-read their record (`input_poll_interval`)."""
        self._for_slots: deque[TaskRun] = deque()
        """Bodies woken while every slot of `max_concurrent` was taken, first in first out."""

    async def run_forever(self) -> None:
        """The wake-up duty (in the engine's task group)."""
        await self._wakeups.run_forever()

    def wake_at(self, when: float, action: Callable[[], object]) -> Wakeup:
        """Call `action` at `when` (`anyio.current_time()` clock)."""
        return self._wakeups.set_at(when, action)

    def forget_wakeup(self, wakeup: Wakeup) -> None:
        """Forget a wake-up from `wake_at` (the wait ended sooner)."""
        self._wakeups.cancel(wakeup)

    def holds_for_slot(self, run: TaskRun, closing: bool) -> bool:
        """Whether `run`'s woken body must wait for a slot (it is queued for one then)."""
        if not self._no_slot(run, closing):
            return False
        if run not in self._for_slots:
            self._for_slots.append(run)
        return True

    def release_slots(self, resume: Callable[[TaskRun], None], closing: bool) -> None:
        """A body gave its task up (it ended or waits): `resume` the woken bodies that now fit."""
        while self._for_slots and not self._no_slot(self._for_slots[0], closing):
            resume(self._for_slots.popleft())

    def _no_slot(self, run: TaskRun, closing: bool) -> bool:
        """Whether every slot of `max_concurrent` is taken (a stopping body never waits)."""
        limit = self.config.max_concurrent
        return limit is not None and run.stopped_at is None and not closing and self.runs.busy() >= limit

    async def park(self, run: TaskRun, tool: TaskTool, question: OpenQuestion, channel: BodyChannel) -> None:
        """Let a body wait for answers without its task: in the store when it is durable and
        this host parks there, else here (`keep`)."""
        if not (tool.durable and run.journal is not None and self.in_store):
            self.keep(run, question, channel)
            return
        with anyio.CancelScope(shield=True):  # a stop meanwhile is seen below
            try:
                written = await self.records.mutate(
                    run.task_id, ledger.parked_by(self.instance_id, run.attempt), known=run.record
                )
            except Exception as exc:  # it waits here, and tries the store again when it wakes
                logger.warning("could not park task %s in the store (%s)", run.task_id, describe(exc))
                self.keep(run, question, channel)
                return
            if written is not None and written.runner == ledger.PARKED:
                await self._leave_in_store(run, question)
                return
        # Answered, ended or stopped meanwhile: resume the body now, it reads its record again.
        self.keep(run, question, channel)
        run.poke()

    def keep(self, run: TaskRun, question: OpenQuestion, channel: BodyChannel) -> None:
        """Keep a body waiting here until `LocalHost.resume` (an answer, a cancellation, its
        timeout, its question's deadline, or the `input_poll_interval` re-read) gives it a task."""
        question.context = copy_context()
        question.channel = channel
        run.park(question)
        # `LocalHost.parks` allowed this just now: nothing stopped the run since (no await between).
        wake_at = anyio.current_time() + self.config.input_poll_interval
        if run.deadline is not None:
            wake_at = min(wake_at, run.deadline)
        if question.due is not None:  # a request's answer deadline
            wake_at = min(wake_at, question.due)
        question.wakeup = self._wakeups.set_at(wake_at, run.poke)

    async def _leave_in_store(self, run: TaskRun, question: OpenQuestion) -> None:
        """The durable body of `run` waits in the store (`ledger.PARKED`): its run is over here and
        its generator closed."""
        self.runs.drop(run.task_id)
        body, question.body = question.body, None
        try:  # its `finally:` blocks run now (a `with` block open around the question cannot park)
            await close_body(body)
        except Exception:
            logger.warning("task %s: its body raised while it was closed to park", run.task_id, exc_info=True)
        if self.observer is not None:
            self.observer.settled(run.task_id)
        logger.debug("task %s waits for answers in the store (parked)", run.task_id)
        try:  # its slot is free: claim loops (this engine's too) wake to fill it
            await self.store.publish(run.task_id)
        except Exception:
            logger.debug("could not announce that task %s parked", run.task_id, exc_info=True)
