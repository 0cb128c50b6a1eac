"""`RecordWriter`: every write of a task record the engine makes, and the journals of its runs.

It creates records (now, or deferred until the body's first write), applies transitions with
compare-and-set (`mutate`, through `ledger.apply`), records how runs ended (`finish`,
`record_end`), keeps the ends the store could not take and writes them once it answers
(`write_unsettled`), remembers the runs that found their record gone (`take_vanished`) and makes the journal a durable run replays from (`journal_for`).
It owns that state; nothing else writes a record.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import anyio

from mcptasks._authoring.tool import TaskTool
from mcptasks._runtime import ledger
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.journal import Journal, OwnerJournals
from mcptasks._runtime.ledger import Transition
from mcptasks._runtime.observer import EngineObserver
from mcptasks._runtime.outages import STORE_REJECTED, StoreRetry, describe, is_permanent, permanent_errors
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.webhooks.events import EventOutbox
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import StoreBase, TaskExists, TaskRecord
from mcptasks.wire import INTERNAL_ERROR, INVALID_PARAMS

logger = logging.getLogger("mcptasks")

HALTED = Outcome("failed", error={"code": INTERNAL_ERROR, "message": "The task ended while its body ran."})
"""The end of a body stopped because its record ended or vanished (nothing left to write)."""

ONCE = StoreRetry(budget=0)
"""One attempt, no retry (the reaper tries kept ends again at its next round)."""


class Unsettled(NamedTuple):
    """The end of a run kept while the store was unreachable, written once it answers."""

    run: TaskRun
    outcome: Outcome


def refused(outcome: Outcome, exc: BaseException) -> Outcome:
    """The failure recorded instead of an end the store refused for good."""
    message = f"The task ended ({outcome.status}), but its end could not be recorded ({describe(exc)})."
    return Outcome(
        "failed", error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": STORE_REJECTED}}
    )


def same_call(stored: TaskRecord, record: TaskRecord) -> TaskRecord:
    """`stored` (the live task holding `record`'s idempotency key) when it is the same call;
    -32602 when the key was used for another tool or other arguments."""
    if stored.tool != record.tool or stored.arguments != record.arguments:
        raise ProtocolError(
            INVALID_PARAMS,
            "This idempotency key was already used for a different call (another tool or "
            "other arguments); use a new key for a new call.",
            {"taskId": stored.task_id} if stored.tool == record.tool else None,
        )
    return stored


class RecordWriter:
    """Writes task records for one engine: creates, transitions, ends, kept ends, journals."""

    def __init__(
        self,
        store: StoreBase,
        config: EngineConfig,
        tools: dict[str, TaskTool],
        instance_id: str,
        observer: EngineObserver | None,
        outbox: EventOutbox | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.tools = tools
        self.instance_id = instance_id
        self.observer = observer
        self.outbox = outbox
        """Where the webhook events of every write here go (None: no webhooks configured)."""
        self.permanent_errors = permanent_errors(store)
        """The store errors that retrying cannot cure; every other store error is retried."""
        self._unstored: dict[str, TaskRecord] = {}
        """Records of runs started with `defer=True` and not written yet (the first write stores them)."""
        self._storing: dict[str, anyio.Event] = {}
        """Set when the first write of a deferred record is over (stored, or failed and put back)."""
        self._unsettled: dict[str, Unsettled] = {}
        """Ends of tasks that could not be recorded because the store kept failing."""
        self._vanished: set[str] = set()
        """Runs that ended since the last `take_vanished` and found their record gone."""
        self._owner_journals = OwnerJournals()
        """The journal bytes of each owner's durable runs here (`Limits.max_journal_bytes_per_owner`)."""

    async def create(self, record: TaskRecord) -> TaskRecord | None:
        """Store a new record: None when stored, else the live record that holds its
        idempotency key (nothing was stored)."""
        outbox = self.outbox
        if outbox is not None:
            # in place: the caller goes on with this very object as its known copy
            record.outbox = outbox.stamp(None, record).outbox
        stored = await self.store.create(record)
        if stored.task_id != record.task_id:
            return stored
        log_task("created", record)
        if self.observer is not None:
            self.observer.created(record)
        if outbox is not None and record.outbox:
            outbox.wrote(record)
        return None

    def defer(self, record: TaskRecord) -> None:
        """Keep a new record unwritten: its first write (or `store_deferred`) stores it."""
        self._unstored[record.task_id] = record

    def unwritten(self, task_id: str) -> bool:
        """Whether the record of `task_id` was deferred and is not in the store yet."""
        return task_id in self._unstored or task_id in self._storing

    def deferred(self, task_id: str) -> bool:
        """Whether the record of `task_id` waits for its first write (none has started)."""
        return task_id in self._unstored

    def forget_deferred(self, task_id: str) -> bool:
        """Never write a deferred record (its call failed); whether one was waiting."""
        return self._unstored.pop(task_id, None) is not None

    async def store_deferred(self, task_id: str, change: Transition | None) -> TaskRecord | None:
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

    async def mutate(
        self, task_id: str, change: Transition, *, known: TaskRecord | None = None
    ) -> TaskRecord | None:
        """`ledger.apply` (the first write of a record started with `defer` creates it), with the
        change's webhook events when they are configured."""
        outbox = self.outbox
        if outbox is not None:
            change = ledger.with_events(change, outbox.stamp)
        written: TaskRecord | None = None
        if task_id in self._unstored or task_id in self._storing:
            written = await self.store_deferred(task_id, change)
            known = None  # stored by another write meanwhile, when not by this one
        if written is None:
            written = await ledger.apply(
                self.store, task_id, change, known=known, push=self.config.push, observer=self.observer
            )
        if outbox is not None and written is not None and written.outbox:
            outbox.wrote(written)
        return written

    async def finish(
        self,
        task_id: str,
        outcome: Outcome,
        *,
        only_runner: str | None = None,
        only_attempt: int | None = None,
        known: TaskRecord | None = None,
        status_message: str | None = None,
    ) -> TaskRecord | None:
        """Record that the task ended with `outcome` (only while it is the given run's)."""
        change = ledger.ended(
            outcome,
            ttl_ms=self.ttl_of,
            only_runner=only_runner,
            only_attempt=only_attempt,
            status_message=status_message,
        )
        finished = await self.mutate(task_id, change, known=known)
        if finished is not None and finished.terminal:
            log_task(outcome.status, finished)
        return finished

    def ttl_of(self, record: TaskRecord) -> int | None:
        """The `ttl` of `record`'s tool (None: unknown tool, or kept forever)."""
        tool = self.tools.get(record.tool)
        return None if tool is None else tool.ttl_ms

    async def record_end(
        self, run: TaskRun, outcome: Outcome, retry: StoreRetry, *, keep: bool, again: bool = False
    ) -> bool:
        """Write a run's end, retried on every store error but a permanent one; False when it
        could not be written yet (`keep`: it is kept for `write_unsettled`).

        An end the store refuses for good (a permanent error) is replaced by a failure that says
        so. `again`: a kept end, tried once more by the reaper (its first failure was logged).
        """
        task_id = run.task_id
        permanent = self.permanent_errors

        async def finish() -> TaskRecord | None:
            return await self.finish(
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
                return await self.record_end(run, refused(outcome, exc), retry, keep=keep)
            self._not_recorded(run, outcome, exc, keep=keep, again=again)
            return False
        await self._ended(run, outcome, written)
        return True

    def _not_recorded(
        self, run: TaskRun, outcome: Outcome, exc: Exception, *, keep: bool, again: bool
    ) -> None:
        """Keep (or, at shutdown, log in full) an end the store would not take."""
        task_id = run.task_id
        if not keep:
            logger.error(
                "could not record the end of task %s: the task store keeps failing (%s); its outcome: %s",
                task_id,
                describe(exc),
                outcome.summary(),
            )
            return
        self._unsettled[task_id] = Unsettled(run, outcome)
        if not again:
            logger.error(
                "could not record the end of task %s yet: the task store keeps failing (%s); "
                "it is kept and written once the store answers",
                task_id,
                describe(exc),
            )

    async def _ended(self, run: TaskRun, outcome: Outcome, written: TaskRecord | None) -> None:
        """After an end write: note the final outcome, or say why the end was not written."""
        if written is not None and run.owns(written):
            run.recorded(outcome)
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
        elif outcome is not HALTED:
            logger.info(
                "task %s ended %s elsewhere before this run's end (%s) was written",
                run.task_id,
                current.status,
                outcome.status,
            )

    async def write_unsettled(self) -> None:
        """Record the ends kept while the store failed (stops at the first that still fails)."""
        for task_id, (run, outcome) in list(self._unsettled.items()):
            del self._unsettled[task_id]
            if not await self.record_end(run, outcome, ONCE, keep=True, again=True):
                return
            logger.info("recorded the end of task %s after the task store came back", task_id)

    def keeps_end(self, task_id: str) -> bool:
        """Whether the end of `task_id` is kept, waiting for the store to take it."""
        return task_id in self._unsettled

    def kept_ends(self) -> list[str]:
        """The tasks whose end is kept, waiting for the store."""
        return list(self._unsettled)

    def drop_kept_end(self, task_id: str) -> Unsettled | None:
        """Forget the kept end of `task_id` (its record is gone for good)."""
        return self._unsettled.pop(task_id, None)

    def take_vanished(self) -> set[str]:
        """The runs that found their record gone since the last call (and forget them)."""
        vanished, self._vanished = self._vanished, set()
        return vanished

    def journal_for(
        self, tool: TaskTool, task_id: str, owner: str, entries: list[str] | None = None
    ) -> Journal | None:
        """A journal for a run of `tool` (None: it is not durable). A store without a journal of
        its own keeps nothing there (`adopt_store` says so once)."""
        if not tool.durable:
            return None
        return Journal(
            self.store,
            task_id,
            tool.name,
            self.config.limits,
            entries,
            owner=owner,
            owners=self._owner_journals,
        )
