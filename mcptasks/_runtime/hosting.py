"""`RunHosting`: the in-process run host, where task bodies run and settle.

The engine keeps a registry of the runs it hosts (`_add_run`, `_drop_run`), gives each `TaskRun`
what it may use (`RunHost`: wakeups, parking, record writes), runs each body in its task group
(`_execute`, `_run_and_settle`), parks a body waiting for answers and resumes it (`_park`,
`resume`), records how a run ended (`_settle`, `_record_end`, `_ended`), keeps the ends the store
could not take (`_unsettled`, `_write_unsettled`), and stops every body at shutdown (`_stop_runs`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Coroutine
from contextvars import copy_context
from functools import partial
from typing import Any

import anyio

from mcptasks._authoring.capabilities import gated
from mcptasks._authoring.context import BodyChannel, TaskContext
from mcptasks._authoring.threaded import ThreadShare
from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime.driver import (
    STOPPED,
    Interrupt,
    OpenQuestion,
    Outcome,
    Parked,
    Pending,
    absorb_stray_cancel,
    body_run,
    cancelled_here,
    outcome_of_abort,
    outcome_of_error,
    outcome_of_value,
)
from mcptasks._runtime.engine_state import EngineState, Unsettled
from mcptasks._runtime.mrtr import StartedBody
from mcptasks._runtime.observer import EngineObserver, follows_runs
from mcptasks._runtime.outages import STORE_REJECTED, StoreRetry, describe, is_permanent
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.wakeups import Wakeup
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import INTERNAL_ERROR

BODY_TASK_NAME = "mcptasks task body"
"""The name of every body's anyio task (without one, anyio builds a new string per task)."""

logger = logging.getLogger("mcptasks")

_ONCE = StoreRetry(budget=0)
"""One attempt, no retry (the reaper tries kept ends again at its next round)."""

_AT_SHUTDOWN = StoreRetry(budget=5.0, maximum=1.0)
"""How long a body that ends while the engine shuts down waits for a failing store."""


def _refused(outcome: Outcome, exc: BaseException) -> Outcome:
    """The failure recorded instead of an end the store refused for good."""
    message = f"The task ended ({outcome.status}), but its end could not be recorded ({describe(exc)})."
    return Outcome(
        "failed", error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": STORE_REJECTED}}
    )


_HALTED = Outcome("failed", error={"code": INTERNAL_ERROR, "message": "The task ended while its body ran."})


def _log_cancel_from_elsewhere(run: TaskRun, record: TaskRecord | None) -> None:
    """Log the cancel another process (an operator's `mcptasks admin cancel`, the dashboard, a
    replica answering `tasks/cancel`) wrote for a body this engine runs, when it learns of it;
    a cancel written here has stopped the run already and was logged then."""
    if record is not None and record.status == "cancelled" and not run.cancel_logged:
        run.cancel_logged = True
        log_task("cancelled", record)


class RunHosting(EngineState):
    """The part of `TaskEngine` that hosts task bodies in this process (`RunHost`)."""

    @property
    def stopping(self) -> bool:
        """Whether the engine is shutting down (every body is asked to stop)."""
        return self._closing

    def hosts(self, run: TaskRun) -> bool:
        """Whether `run` is still this engine's run of its task."""
        return self._runs.get(run.task_id) is run

    def wake_at(self, when: float, action: Callable[[], object]) -> Wakeup:
        """Call `action` at `when` (`anyio.current_time()` clock): one duty times every waiting body."""
        return self._wakeups.set_at(when, action)

    def forget_wakeup(self, wakeup: Wakeup) -> None:
        """Forget a wake-up from `wake_at` (the wait ended sooner)."""
        self._wakeups.cancel(wakeup)

    def parks(self, run: TaskRun) -> bool:
        """Whether `run`'s body may wait for answers without its task: not while telemetry follows
        the run (its span belongs to the body's task), nor once it is stopping or out of time."""
        return (
            not follows_runs(self.observer)
            and not self._closing
            and run.stopped_at is None
            and (run.deadline is None or anyio.current_time() < run.deadline)
            and self._spawn_group is not None
        )

    def resume(self, run: TaskRun) -> None:
        """Resume `run`'s parked body in a new task, in the body's own context (nothing when it
        is not parked, or the engine has stopped)."""
        question = run.parked
        group = self._spawn_group
        if question is None or group is None or self._runs.get(run.task_id) is not run:
            return
        run.parked = None
        if isinstance(question.wakeup, Wakeup):
            self._wakeups.cancel(question.wakeup)
        assert question.context is not None
        start = partial(
            group.start_soon, self._run_and_settle, self.tools[run.tool], {}, run, run.owner, Parked(question)
        )
        question.context.run(start, name=BODY_TASK_NAME)

    def _park(self, run: TaskRun, question: OpenQuestion, channel: BodyChannel) -> None:
        """Keep a body that waits for answers without its task, until `resume` (an answer, a
        cancellation, its timeout, or the `input_poll_interval` re-read) gives it a new one."""
        question.context = copy_context()
        question.channel = channel
        run.parked = question
        run.scope = run.record = None  # the record is read again when the body resumes
        # `parks` allowed this just now: nothing stopped the run since (no await in between).
        wake_at = anyio.current_time() + self.input_poll_interval
        if run.deadline is not None:
            wake_at = min(wake_at, run.deadline)
        question.wakeup = self._wakeups.set_at(wake_at, run.poke)

    def start_soon(self, job: Callable[[], Coroutine[Any, Any, object]]) -> bool:
        """Start `job` in the engine's task group; False when the engine is not running."""
        if self._task_group is None:
            return False
        self._task_group.start_soon(job)
        return True

    async def write_record(
        self, task_id: str, change: Callable[[TaskRecord], TaskRecord | None], *, known: TaskRecord | None
    ) -> TaskRecord | None:
        """Apply `change` to the record with compare-and-set (None: the task ended or is gone)."""
        written = await self._mutate(task_id, change, known=known)
        run = self._runs.get(task_id)
        if written is None and run is not None and not run.cancel_logged:
            # A body's write found its task ended: perhaps cancelled by another process whose
            # announcement does not reach this one (SQLite), so log that cancel here.
            try:
                ended = await self.store.get(task_id)
            except Exception:  # only a log line depends on it; the body ends either way
                ended = None
            _log_cancel_from_elsewhere(run, ended)
        return written

    def threads_for(self, tool: TaskTool, owner: str) -> ThreadShare | None:
        """The worker threads a `def` body of `tool` runs in for `owner` (None: `tool` has no
        `def` body, or the engine is not running)."""
        if self._threads is None or not tool.threaded:
            return None
        return self._threads.share(owner)

    def _add_run(self, run: TaskRun) -> TaskRun:
        self._runs[run.task_id] = run
        self._active_by_owner[run.owner] = self._active_by_owner.get(run.owner, 0) + 1
        return run

    def _drop_run(self, task_id: str) -> None:
        run = self._runs.pop(task_id, None)
        if run is not None:
            self._unwritten.discard(task_id)
            run.end()
            self._retention.forget(run)
            left = self._active_by_owner[run.owner] - 1
            if left:
                self._active_by_owner[run.owner] = left
            else:
                del self._active_by_owner[run.owner]
            if not self._runs and self._drained is not None:
                self._drained.set()

    async def _stop_runs(self) -> None:
        """At shutdown: stop every body and give them `cancel_grace` seconds to end."""
        self._closing = True
        for run in list(self._runs.values()):
            run.stop()
        drained = self._drained = anyio.Event()
        if not self._runs:
            drained.set()
        with anyio.move_on_after(self.limits.cancel_grace):
            await drained.wait()
        if self._runs:
            stuck = sorted({f"{run.tool!r} (task {run.task_id})" for run in self._runs.values()})
            logger.error(
                "shutting down with task bodies that ignore cancellation after %.0f s: %s",
                self.limits.cancel_grace,
                ", ".join(stuck),
            )
            if self.on_stuck_shutdown is not None:
                self.on_stuck_shutdown(stuck)

    async def _report_ignored(self) -> None:
        """Warn (once each) about bodies still running `cancel_grace` seconds after being stopped."""
        now = time.monotonic()
        for run in list(self._runs.values()):
            if run.stopped_at is not None and now - run.stopped_at > self.limits.cancel_grace:
                logger.warning(
                    "task tool %r (task %s) is still running %.0f s after it was cancelled: its body "
                    "ignores cancellation (it catches the cancellation exception or blocks in a thread)",
                    run.tool,
                    run.task_id,
                    now - run.stopped_at,
                )
                run.stopped_at = math.inf

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
        return self._observed(self.observer, run.record, tool, args, run, owner, prepared)

    async def _observed(
        self,
        observer: EngineObserver,
        record: TaskRecord,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> None:
        with observer.executing(record):
            await self._run_and_settle(tool, args, run, owner, prepared)

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
                body, pending = await self._open_body(tool, args, run, channel, owner, prepared)
                del args, prepared  # the body holds what it needs; this frame lives as long as it
                # `settle_body`, without a frame of its own while the body runs
                end: Outcome | Interrupt
                try:
                    value = await body_run(body, channel, pending, run)
                    end = outcome_of_value(value, tool.name, self.limits.max_result_bytes)
                except Parked as parked:  # it waits for answers without this task
                    self._park(run, parked.question, channel)
                    return
                except BaseException as exc:
                    end = outcome_of_error(exc, tool.name)
                if run.journal is not None and isinstance(end, Outcome) and not scope.cancel_called:
                    diverged = run.journal.ended()
                    if diverged is not None:
                        end = Outcome("failed", error=diverged.to_error())
                outcome = end if isinstance(end, Outcome) else _HALTED
                await absorb_stray_cancel()
            if scope.cancel_called:
                outcome = self._stopped_outcome(run, tool, scope)
            elif outcome is STOPPED:  # cancelled from outside this run's scope: shutting down
                outcome = None
        except BaseException as exc:  # say, the body broke this task's cancel scope stack
            outcome = None if self._closing else outcome_of_abort(exc, tool.name)
        try:
            await self._settle_shielded(run, outcome)
        except anyio.get_cancelled_exc_class():
            if cancelled_here() or self._spawn_group is None:
                raise
            self._spawn_group.start_soon(self._settle_shielded, run, outcome)

    def _begin(
        self, run: TaskRun, tool: TaskTool, scope: anyio.CancelScope, resumed: Parked | None
    ) -> BodyChannel:
        """Put a run under `scope` (stop, timeout), keep its record (from its first start; a
        `resumed` body keeps its deadline and its channel too), and give its body's channel."""
        run.scope = scope
        if run.stopped_at is not None or self._closing:
            scope.cancel()
        if tool.timeout_ms is not None:
            if run.deadline is None:
                run.deadline = anyio.current_time() + tool.timeout_ms / 1000
            scope.deadline = run.deadline
        if resumed is not None and resumed.question.channel is not None:
            return resumed.question.channel
        self._keep_while_running(run, tool)
        declared = run.record.client_capabilities if run.record is not None else None
        return gated(run, declared, tool.name)

    async def _open_body(
        self,
        tool: TaskTool,
        args: dict[str, Any],
        run: TaskRun,
        channel: BodyChannel,
        owner: str,
        prepared: StartedBody | Parked | None,
    ) -> tuple[Any, Pending | None]:
        """The body to run and the yield it stopped at (a body handed over from input rounds, or
        one resumed at its question)."""
        if isinstance(prepared, Parked):
            return prepared.question.body, Pending(prepared)
        if run.journal is not None and self._threads is not None:
            run.threads = self._threads.share(owner)
        if prepared is None:
            context = TaskContext(channel, owner=owner, tool=tool.name)
            return tool.open_body(args, context, self.threads_for(tool, owner)), None
        body, context, pending, entries = prepared
        carried = context.saved  # saved during the input rounds before the task
        context._rebind(channel)
        if carried is not None:
            await run.save(carried)
        if entries:
            await run.carry(entries)
        return body, pending

    async def _settle_shielded(self, run: TaskRun, outcome: Outcome | None) -> None:
        run.ending = True
        run.outcome = outcome
        try:
            if not self._closing:
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
                    await self._orphaned(record, shutdown=True)
            else:
                await self._record_end(
                    run, outcome, self.store_retry if patient else _AT_SHUTDOWN, keep=patient
                )
        except Exception as exc:
            logger.error(
                "could not release task %s at shutdown (%s); it stays active", run.task_id, describe(exc)
            )
        finally:
            self._drop_run(run.task_id)

    async def _record_end(
        self, run: TaskRun, outcome: Outcome, retry: StoreRetry, *, keep: bool, again: bool = False
    ) -> bool:
        """Write a run's end, retried on every store error but a permanent one; False when it
        could not be written yet (`keep`: it is kept in `_unsettled` for the reaper).

        An end the store refuses for good (a permanent error) is replaced by a failure that says
        so. `again`: a kept end, tried once more by the reaper (its first failure was logged).
        """
        task_id = run.task_id
        permanent = self.permanent_errors

        async def finish() -> TaskRecord | None:
            return await self._finish(
                task_id,
                outcome,
                only_runner=self.instance_id,
                only_attempt=run.attempt,
                known=None if again else run.record,
                status_message=run.pending_status,
            )

        try:
            written = await retry.run(
                finish, permanent=permanent, what=f"recording the end of task {task_id}"
            )
        except Exception as exc:
            if is_permanent(exc, permanent) and outcome.error_reason != STORE_REJECTED:
                logger.error(
                    "the task store refused the end of task %s (%s); recording a failure instead",
                    task_id,
                    describe(exc),
                    exc_info=exc,
                )
                return await self._record_end(run, _refused(outcome, exc), retry, keep=keep)
            if keep:
                self._unsettled[task_id] = Unsettled(run, outcome)
                if not again:
                    logger.error(
                        "could not record the end of task %s yet: the task store keeps failing (%s); "
                        "it is kept and written once the store answers",
                        task_id,
                        describe(exc),
                    )
            else:
                logger.error(
                    "could not record the end of task %s: the task store keeps failing (%s); its outcome: %s",
                    task_id,
                    describe(exc),
                    outcome.summary(),
                )
            return False
        await self._ended(run, outcome, written)
        return True

    async def _ended(self, run: TaskRun, outcome: Outcome, written: TaskRecord | None) -> None:
        """After an end write: note the final outcome, or say why the end was not written."""
        if written is not None and run.owns(written):
            run.final = outcome
            return
        if written is not None:
            logger.warning(
                "task %s was taken over by %s (attempt %d); this run's end (%s) is not written",
                run.task_id,
                written.runner,
                written.attempt,
                outcome.status,
            )
            return
        try:
            current = await self.store.get(run.task_id)
        except Exception:
            return  # ended, or vanished: nothing here to tell which
        if current is None:
            self._vanished.add(run.task_id)
            logger.error(
                "task %s is no longer in the task store; its end was not written: %s",
                run.task_id,
                outcome.summary(),
            )
        elif outcome is not _HALTED:
            logger.info(
                "task %s ended %s elsewhere before this run's end (%s) was written",
                run.task_id,
                current.status,
                outcome.status,
            )

    async def _write_unsettled(self) -> None:
        """Record the ends kept while the store failed (stops at the first that still fails)."""
        for task_id, (run, outcome) in list(self._unsettled.items()):
            del self._unsettled[task_id]
            if not await self._record_end(run, outcome, _ONCE, keep=True, again=True):
                return
            logger.info("recorded the end of task %s after the task store came back", task_id)

    def _stopped_outcome(self, run: TaskRun, tool: TaskTool, scope: anyio.CancelScope) -> Outcome | None:
        """The outcome of a body this engine cancelled (None: shutting down)."""
        if run.stop_outcome is not None:
            return run.stop_outcome
        if anyio.current_time() >= scope.deadline:
            return self._timeout_outcome(tool)
        if self._closing:
            return None
        return _HALTED  # stopped because the record ended or vanished: nothing left to write

    @staticmethod
    def _timeout_outcome(tool: TaskTool) -> Outcome:
        timeout_ms = tool.timeout_ms
        message = f"The task ran longer than its timeout ({timeout_ms} ms) and was stopped."
        data = {"reason": "timeout", "timeoutMs": timeout_ms}
        return Outcome("failed", error={"code": INTERNAL_ERROR, "message": message, "data": data})

    def _keep_while_running(self, run: TaskRun, tool: TaskTool) -> None:
        """Keep the record of a running body from expiring: `ttl` is retention, not a deadline."""
        if tool.ttl_ms is not None and self._task_group is not None:
            self._retention.keep(run, tool.ttl_ms)
