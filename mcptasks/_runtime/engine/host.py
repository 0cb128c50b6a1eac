"""`LocalHost`: where task bodies run in this process, and the default placement (here, now).

It runs each body in the engine's task group, lets a body that waits for answers go to its
`WaitingBodies` (`waiting.py`) and resumes it, and hands a run that is over to `RunEnds`. It is the `RunHost` every `TaskRun` sees (not the
engine). Every placement runs bodies here in the end: claims and executor workers use `launch`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mcptasks._authoring.capabilities import gated
from mcptasks._authoring.context import BodyChannel
from mcptasks._authoring.threaded import OwnerThreads, ThreadShare
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import (
    STOPPED,
    Interrupt,
    Outcome,
    Parked,
    absorb_stray_cancel,
    body_run,
    cancelled_here,
    outcome_of_abort,
    outcome_of_error,
    outcome_of_value,
)
from mcptasks._runtime.engine.bodies import close_body, observed, open_body, stopped_outcome
from mcptasks._runtime.engine.ends import RunEnds
from mcptasks._runtime.engine.records import HALTED, RecordWriter, same_call
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks._runtime.engine.waiting import WaitingBodies
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.ledger import Transition
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver, follows_runs
from mcptasks._runtime.related import related_of
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.wakeups import Wakeup
from mcptasks.stores.base import StoreBase, TaskRecord

BODY_TASK_NAME = "mcptasks task body"
"""The name of every body's anyio task (without one, anyio builds a new string per task)."""

logger = logging.getLogger("mcptasks")


class LocalHost:
    """Runs, parks, resumes and settles task bodies in this process (`RunHost`, `Placement`)."""

    executor: Executor | None = None
    takes_queued = True

    def __init__(
        self,
        store: StoreBase,
        config: EngineConfig,
        tools: dict[str, TaskTool],
        instance_id: str,
        observer: EngineObserver | None,
        records: RecordWriter,
        runs: RunRegistry,
        ends: RunEnds,
        *,
        parks_in_store: bool = False,
    ) -> None:
        self.store = store
        self.config = config
        self.tools = tools
        self.instance_id = instance_id
        self.observer = observer
        self.records = records
        self.runs = runs
        self.ends = ends
        self._closing = False
        self._open: TaskGroup | None = None
        """The engine's task group while it takes new work."""
        self._group: TaskGroup | None = None
        """The task group, until it has closed (bodies ending during shutdown still settle)."""
        self.waiting = WaitingBodies(
            store, config, instance_id, observer, records, runs, in_store=parks_in_store
        )
        """The bodies waiting for answers (`parks_in_store`: durable ones wait in the store)."""
        self._threads = OwnerThreads(config.limits.threads, config.limits.thread_share)
        """The worker threads of `def` bodies (`Limits.threads`, `threads_per_owner`)."""

    def open(self, task_group: TaskGroup) -> None:
        """Run bodies in `task_group` from now on (and its wake-up duty)."""
        self._open = self._group = task_group
        task_group.start_soon(self.waiting.run_forever)

    def leaving(self) -> None:
        """The engine is leaving: take no new work (bodies still settle until `closed`)."""
        self._open = None

    def closed(self) -> None:
        """The task group has closed."""
        self._open = self._group = None

    async def stop_runs(self) -> None:
        """At shutdown: stop every body and give them `cancel_grace` seconds to end."""
        self._closing = True
        await self.runs.stop_all()

    @property
    def permanent_errors(self) -> tuple[type[BaseException], ...]:
        """The store errors that retrying cannot cure; every other store error is retried."""
        return self.records.permanent_errors

    @property
    def stopping(self) -> bool:
        """Whether the engine is shutting down (every body is asked to stop)."""
        return self._closing

    @property
    def taking_work(self) -> bool:
        """Whether new bodies may start here (the engine runs and is not shutting down)."""
        return self._open is not None and not self._closing

    def hosts(self, run: TaskRun) -> bool:
        """Whether `run` is still this engine's run of its task."""
        return self.runs.hosts(run)

    def wake_at(self, when: float, action: Callable[[], object]) -> Wakeup:
        """Call `action` at `when` (`anyio.current_time()` clock): one duty times every waiting body."""
        return self.waiting.wake_at(when, action)

    def forget_wakeup(self, wakeup: Wakeup) -> None:
        """Forget a wake-up from `wake_at` (the wait ended sooner)."""
        self.waiting.forget_wakeup(wakeup)

    def parks(self, run: TaskRun) -> bool:
        """Whether `run`'s body may wait for answers without its task: not while telemetry follows
        the run (its span belongs to the body's task), nor once it is stopping or out of time."""
        return (
            not follows_runs(self.observer)
            and not self._closing
            and run.stopped_at is None
            and (run.deadline is None or anyio.current_time() < run.deadline)
            and self._group is not None
        )

    def resume(self, run: TaskRun) -> None:
        """Resume `run`'s parked body in a new task, in the body's own context (nothing when it
        is not parked, or the engine has stopped)."""
        group = self._group
        if run.parked is None or group is None or not self.runs.hosts(run):
            return
        if self.waiting.holds_for_slot(run, self._closing):
            return
        question = run.unpark()
        assert question is not None and question.context is not None
        if isinstance(question.wakeup, Wakeup):
            self.waiting.forget_wakeup(question.wakeup)
        start = partial(
            group.start_soon, self._run_and_settle, self.tools[run.tool], {}, run, run.owner, Parked(question)
        )
        question.context.run(start, name=BODY_TASK_NAME)

    def _slot_freed(self) -> None:
        """A body gave its task up (it ended or waits): resume the woken bodies waiting for a slot."""
        self.waiting.release_slots(self.resume, self._closing)

    def start_soon(self, job: Callable[[], Coroutine[Any, Any, object]]) -> bool:
        """Start `job` in the engine's task group; False when the engine is not running."""
        if self._open is None:
            return False
        self._open.start_soon(job)
        return True

    async def write_record(
        self, task_id: str, change: Transition, *, known: TaskRecord | None
    ) -> TaskRecord | None:
        """Apply `change` to the record with compare-and-set (None: the task ended or is gone)."""
        written = await self.records.mutate(task_id, change, known=known)
        run = self.runs.get(task_id)
        if written is None and run is not None and not run.cancel_logged:
            # A body's write found its task ended: perhaps cancelled by another process whose
            # announcement does not reach this one (SQLite), so log that cancel here.
            try:
                ended = await self.store.get(task_id)
            except Exception:  # only a log line depends on it; the body ends either way
                ended = None
            run.log_cancel_from_elsewhere(ended)
        return written

    @property
    def threads(self) -> OwnerThreads | None:
        """The worker threads of `def` bodies (None: the engine is not running)."""
        return self._threads if self._group is not None else None

    def threads_for(self, tool: TaskTool, owner: str) -> ThreadShare | None:
        """The worker threads a `def` body of `tool` runs in for `owner` (None: `tool` has no
        `def` body, or the engine is not running)."""
        return self._threads.share(owner) if tool.threaded else None

    def runner_for(self, prepared: StartedBody | None) -> str | None:
        """Every new task runs here."""
        return self.instance_id

    async def place(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        record: TaskRecord,
        prepared: StartedBody | None,
        *,
        defer: bool,
    ) -> TaskRecord:
        """Admit, store and start a new task's body here (see `TaskEngine.start` for `defer`)."""
        group = self._open
        assert group is not None
        owner = record.owner
        task_id = record.task_id
        self.runs.check_room(owner)
        run = self.runs.add(TaskRun(self, task_id, record.expires_at, owner=owner, tool=tool.name))
        run.journal = self.records.journal_for(tool, task_id, owner)
        if self.observer is not None:
            self.observer.creating(record)
        if defer and prepared is None and record.idempotency_key is None:
            # the body runs before its record is written (see `RecordWriter.store_deferred`)
            self.records.defer(record)
            run.record = record
            group.start_soon(self._execute, tool, args, run, owner, None, name=BODY_TASK_NAME)
            return record
        try:
            held = await self.records.create(record)
        except BaseException:
            self.runs.drop(task_id)
            raise
        if held is not None:
            self.runs.drop(task_id)
            if prepared is not None:
                await close_body(prepared.body)
            return same_call(held, record)
        run.record = record
        group.start_soon(self._execute, tool, args, run, owner, prepared, name=BODY_TASK_NAME)
        return record

    async def serve(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        """Nothing to start: bodies run in the engine's task group."""

    async def unparked(self, record: TaskRecord) -> None:
        """Nothing to do: the store's change announcement wakes the claim loops."""

    async def stop(self, task_id: str) -> None:
        """Nothing to release: `cancel` stopped the body."""

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """Nothing to reconcile: the store is all there is."""
        return 0

    def launch(self, tool: TaskTool, args: dict[str, Any], run: TaskRun) -> None:
        """Start the body of a registered run (a claimed or resumed task) in the task group."""
        assert self._open is not None
        self._open.start_soon(self._execute, tool, args, run, run.owner, None, name=BODY_TASK_NAME)

    def _execute(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> Coroutine[Any, Any, None]:
        """The coroutine that runs one body and records its end (inside `EngineObserver.executing`
        when observed; without an observer, no frame of its own: a working task holds less)."""
        if self.observer is None or run.record is None:
            return self._run_and_settle(tool, args, run, owner, prepared)
        return observed(self.observer, run.record, self._run_and_settle(tool, args, run, owner, prepared))

    async def _run_and_settle(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> None:
        """Run one body in this task, then record its outcome.

        Only the engine's own cancellation (stop, TTL, shutdown) decides an outcome here. The body
        may leave this task with its own cancellation requested (`current_task().cancel()` and no
        await after it): when that interrupts the record write, the write is done again in a
        fresh task (writes are compare-and-set and terminal states final, so a repeat is harmless).
        """
        outcome: Outcome | None = None
        try:
            with anyio.CancelScope() as scope:
                channel = self._begin(run, tool, scope, prepared if isinstance(prepared, Parked) else None)
                related = related_of(run.record, self.store)
                body, pending = await open_body(tool, args, run, channel, prepared, self._threads, related)
                del args, prepared  # the body holds what it needs; this frame lives as long as it
                # `settle_body`, without a frame of its own while the body runs
                end: Outcome | Interrupt
                try:
                    value = await body_run(body, channel, pending, run)
                    end = outcome_of_value(value, tool.name, self.config.limits.max_result_bytes)
                except Parked as parked:  # it waits for answers without this task
                    await self.waiting.park(run, tool, parked.question, channel)
                    self._slot_freed()
                    return
                except BaseException as exc:
                    end = outcome_of_error(exc, tool.name)
                if run.journal is not None and isinstance(end, Outcome) and not scope.cancel_called:
                    diverged = run.journal.ended()
                    if diverged is not None:
                        end = Outcome("failed", error=diverged.to_error())
                outcome = end if isinstance(end, Outcome) else HALTED
                await absorb_stray_cancel()
            if scope.cancel_called:
                outcome = stopped_outcome(run, tool, scope, self._closing)
            elif outcome is STOPPED:  # cancelled from outside this run's scope: shutting down
                outcome = None
        except BaseException as exc:  # say, the body broke this task's cancel scope stack
            outcome = None if self._closing else outcome_of_abort(exc, tool.name)
        try:
            await self._settle(run, outcome)
        except anyio.get_cancelled_exc_class():
            if cancelled_here() or self._group is None:
                raise
            self._group.start_soon(self._settle, run, outcome)

    async def _settle(self, run: TaskRun, outcome: Outcome | None) -> None:
        try:
            await self.ends.settle(run, outcome, closing=self._closing)
        finally:
            self._slot_freed()

    def _begin(
        self, run: TaskRun, tool: TaskTool, scope: anyio.CancelScope, resumed: Parked | None
    ) -> BodyChannel:
        """Put a run under `scope` (stop, timeout), keep its record (from its first start; a
        `resumed` body keeps its deadline and its channel too), and give its body's channel."""
        run.begin(scope, tool.timeout_ms, self._closing)
        if resumed is not None and resumed.question.channel is not None:
            return resumed.question.channel
        if tool.ttl_ms is not None and self._open is not None:
            # keep the record of a running body from expiring: `ttl` is retention, not a deadline
            self.runs.retention.keep(run, tool.ttl_ms)
        declared = run.record.client_capabilities if run.record is not None else None
        return gated(run, declared, tool.name)
