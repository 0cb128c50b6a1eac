"""`TaskRun`: one task body running on an engine; it is also the body's `BodyChannel`.

The run writes its own record (statuses, checkpoints, input requests, taking answers) through a
`RunHost`, the small part of the engine a run needs; the engine starts it and records its end.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from mcptasks._authoring.steps import Step, step_entry, step_value
from mcptasks._authoring.values import InvalidValue
from mcptasks._authoring.yields import InputRequest, InvalidAnswer
from mcptasks._runtime.answer_log import next_deadline, questions_digest
from mcptasks._runtime.driver import OpenQuestion, Outcome, Parked, input_deadlines, wire_requests
from mcptasks._runtime.journal import Journal
from mcptasks._runtime.ledger import (
    answers_taken,
    asked,
    checkpointed,
    deadline_passed,
    retained,
    with_status,
    withdrawn_keys,
)
from mcptasks._runtime.outages import gave_up, is_permanent
from mcptasks._runtime.questions import (
    MAX_INVALID_ANSWERS,
    Question,
    answers_received,
    error_response,
    question_name,
)
from mcptasks._runtime.run_host import RunHost
from mcptasks._runtime.tasklog import log_task
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import INVALID_PARAMS

if TYPE_CHECKING:
    from mcptasks._authoring.threaded import ThreadShare

T = TypeVar("T")

logger = logging.getLogger("mcptasks")


class TaskRun:
    """A body running on this engine; it is also the body's `BodyChannel`."""

    __slots__ = (
        "_ended",
        "attempt",
        "cancel_logged",
        "deadline",
        "ending",
        "expires_at",
        "final",
        "first_answer_taken",
        "flushing",
        "holding",
        "host",
        "journal",
        "keys_issued",
        "next_status_at",
        "outcome",
        "owner",
        "parked",
        "pending_status",
        "record",
        "renew_at",
        "saved",
        "scope",
        "stepping",
        "stop_outcome",
        "stopped_at",
        "task_id",
        "threads",
        "tool",
        "waiters",
        "yielded",
    )

    def __init__(
        self,
        host: RunHost[TaskRun],
        task_id: str,
        expires_at: float | None,
        attempt: int = 1,
        *,
        owner: str,
        tool: str,
    ) -> None:
        self.host = host
        self.task_id = task_id
        self.owner = owner
        self.tool = tool
        self.expires_at = expires_at
        self.attempt = attempt
        """Which run of the task this is (re-runs after a lost worker count up)."""
        self.record: TaskRecord | None = None
        """The newest copy of the record this run wrote or read (saves a read before a write)."""
        self.scope: anyio.CancelScope | None = None
        self.deadline: float | None = None
        """When the tool's timeout stops the body (`anyio.current_time()` clock; None: no timeout)."""
        self.parked: OpenQuestion | None = None
        """The body, while it waits for answers without a task."""
        self.renew_at: float | None = None
        """When the engine next moves the record's expiry (None: not scheduled)."""
        self.waiters: list[anyio.Event] | None = None
        """One event per `ask` waiting for answers (a body may wait in several at once)."""
        self.stop_outcome: Outcome | None = None
        self.outcome: Outcome | None = None
        """How the body ended, from when its end starts being recorded (None until then, and for
        an end with nothing to record, such as the engine shutting down)."""
        self.final: Outcome | None = None
        """The outcome recorded when the body ended."""
        self.first_answer_taken = False
        """Whether the call that started the run was answered (`TaskEngine.settled` answers once)."""
        self.saved: Any = None
        """The body's checkpoint (loaded from the record when a re-run starts)."""
        self.stopped_at: float | None = None
        """When the body was first asked to stop (for the ignored-cancellation warning)."""
        self.cancel_logged = False
        """Whether this engine logged the task's cancel (its own, or one written elsewhere)."""
        self.pending_status: str | None = None
        """A status yielded within `Limits.status_interval` of the last write, not written yet."""
        self.next_status_at = 0.0
        self.flushing = False
        self.holding = False
        """Whether yielded statuses are kept in memory for now (`hold_statuses`)."""
        self.yielded = False
        """Whether the body wrote a checkpoint, asked a question, or waited on real work while
        statuses were held (so it did not end at once)."""
        self.ending = False
        """Whether the body is over and its end is being recorded."""
        self._ended: anyio.Event | bool = False
        """False, True once over, or the event `ended` handed out (created when first asked for)."""
        self.journal: Journal | None = None
        """The journal of a durable body (None: the body is not durable, or the store keeps none)."""
        self.threads: ThreadShare | None = None
        """The worker threads the body's sync steps run in (None: anyio's default limiter)."""
        self.keys_issued = 0
        """The input keys this run chose (a durable run picks keys before it issues them)."""
        self.stepping = False
        """Whether a step of the durable body is running (they run one at a time)."""

    @property
    def ended(self) -> anyio.Event:
        """Set once the run is over on this engine (its end recorded, or given up)."""
        ended = self._ended
        if isinstance(ended, bool):
            event = anyio.Event()
            if ended:
                event.set()
            self._ended = ended = event
        return ended

    def end(self) -> None:
        """Mark the run over (sets `ended`); its journal no longer counts for its owner."""
        if self.journal is not None:
            self.journal.release()
        if isinstance(self._ended, bool):
            self._ended = True
        else:
            self._ended.set()

    @property
    def cancelled(self) -> bool:
        """Whether the body was asked to stop (cancel, TTL, shutdown); readable from any thread."""
        return self.stopped_at is not None or self.host.stopping

    def poke(self) -> None:
        """Wake the body if it waits for input (resume it, when parked)."""
        if self.parked is not None:
            self.host.resume(self)
        for waiter in self.waiters or ():
            waiter.set()

    def stop(self, outcome: Outcome | None = None) -> None:
        """Cancel the body at its next checkpoint; `outcome` is recorded unless already terminal."""
        if self.stop_outcome is None:
            self.stop_outcome = outcome
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        if self.scope is not None:
            self.scope.cancel()
        elif self.parked is not None:
            self.host.resume(self)  # the body gets the cancellation at its question

    def begin(self, scope: anyio.CancelScope, timeout_ms: int | None, stopping: bool) -> None:
        """Put the body under `scope` (cancelled at once when the run or its host is stopping);
        the tool's timeout starts with the first start and holds across resumes."""
        self.scope = scope
        if self.stopped_at is not None or stopping:
            scope.cancel()
        if timeout_ms is not None:
            if self.deadline is None:
                self.deadline = anyio.current_time() + timeout_ms / 1000
            scope.deadline = self.deadline

    def replayed(self, timeout_ms: int | None) -> None:
        """The body replays from its journal: one that asked a question may have waited parked in
        the store, where no run held its deadline, so its timeout counts from the task's creation."""
        record = self.record
        if timeout_ms is not None and record is not None and record.input_key_counter:
            left = record.created_at + timeout_ms / 1000 - time.time()
            self.deadline = anyio.current_time() + max(0.0, left)

    def park(self, question: OpenQuestion) -> None:
        """Keep the body waiting for answers without its task (the record is read again when it
        resumes)."""
        self.parked = question
        self.scope = self.record = None

    def unpark(self) -> OpenQuestion | None:
        """Take the parked question to resume the body at (None: it is not parked)."""
        question, self.parked = self.parked, None
        return question

    def claimed(self, record: TaskRecord) -> None:
        """The run starts from a claimed `record` (its checkpoint is the body's saved state)."""
        self.record = record
        self.saved = record.checkpoint

    def settling(self, outcome: Outcome | None) -> None:
        """The body is over and its end (`outcome`; None: nothing to record) is being written."""
        self.ending = True
        self.outcome = outcome

    def recorded(self, outcome: Outcome) -> None:
        """The run's end was written as `outcome`."""
        self.final = outcome

    def answer_first(self) -> bool:
        """Whether the call that started the run is still to be answered (it is, from now)."""
        if self.first_answer_taken:
            return False
        self.first_answer_taken = True
        return True

    def ignoring_reported(self) -> None:
        """The warning that the body ignores its cancellation was logged (it is not repeated)."""
        self.stopped_at = math.inf

    def cancelled_here(self) -> None:
        """The task was cancelled (and logged) by this engine: stop the body."""
        self.cancel_logged = True
        self.stop()

    def log_cancel_from_elsewhere(self, record: TaskRecord | None) -> None:
        """Log the cancel another process (an operator's `mcptasks admin cancel`, the dashboard, a
        replica answering `tasks/cancel`) wrote for this run, when it learns of it; a cancel
        written here has stopped the run already and was logged then."""
        if record is not None and record.status == "cancelled" and not self.cancel_logged:
            self.cancel_logged = True
            log_task("cancelled", record)

    def owns(self, record: TaskRecord) -> bool:
        """Whether `record` still belongs to this run (not re-run elsewhere after a stall)."""
        return record.runner == self.host.instance_id and record.attempt == self.attempt

    async def _write(
        self, change: Callable[[TaskRecord], TaskRecord | None], what: str | None = None
    ) -> TaskRecord | None:
        """Apply a body's change to its record; None when the task ended or is no longer ours.

        With `what` (a description for messages), an unreachable store is retried within the
        engine's `store_retry` budget, then the task fails saying so; without, the error propagates.
        """
        owned = True

        status = self.pending_status

        def guarded(record: TaskRecord) -> TaskRecord | None:
            nonlocal owned
            owned = self.owns(record)
            if not owned:
                return None
            updated = change(record)
            if status is not None and status != record.status_message:
                updated = with_status(updated or record, status)
            return updated

        host = self.host
        if what is None:
            written = await host.write_record(self.task_id, guarded, known=self.record)
        else:
            written = await self._patiently(
                lambda: host.write_record(self.task_id, guarded, known=self.record), what
            )
        if written is None or not owned:
            self.record = None
            return None
        if self.pending_status is status:
            self.pending_status = None
        self.record = written
        return written

    async def _patiently(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        """`call()` retried while the store fails (`store_retry`), then a task failure."""
        host = self.host
        try:
            return await host.config.store_retry.run(
                call, permanent=host.permanent_errors, what=f"{what} ({self.task_id})"
            )
        except Exception as exc:
            if is_permanent(exc, host.permanent_errors):
                raise
            raise gave_up(exc, host.config.store_retry, what) from exc

    async def _halt(self) -> None:
        # The record is terminal or gone: end the body through cancellation so `finally:` runs.
        self.stop()
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("task body continued after its task ended")  # pragma: no cover

    async def set_status(self, message: str) -> None:
        """Write `statusMessage` (skipped when unchanged), at most once per `status_interval`.

        A status yielded sooner is kept and written when the interval ends (the last one wins);
        so is one yielded while statuses are held (`hold_statuses`).
        Always gives the event loop a turn, so a body yielding statuses in a loop cannot starve it.
        """
        await anyio.lowlevel.checkpoint()
        if self.journal is not None and self.journal.replaying:
            return  # said by the run that wrote the journal: not a change
        limits = self.host.config.limits
        if len(message) > limits.max_status_length:
            message = message[: limits.max_status_length - 1] + "…"
        if self.holding:
            self.pending_status = message
            return
        now = anyio.current_time()
        if now < self.next_status_at:
            self.pending_status = message
            if not self.flushing and self.host.start_soon(self._flush_status):
                self.flushing = True
            return
        self.next_status_at = now + limits.status_interval
        self.pending_status = message
        try:
            written = await self._write(lambda record: None)
        except Exception:
            logger.warning("could not write the status of task %s", self.task_id, exc_info=True)
            return
        if written is None:
            await self._halt()

    def waits(self) -> None:
        """The body suspended on real work (see `Label.waits`): while its end is awaited for an
        immediate result (`hold_statuses`), that means it did not end at once."""
        if self.holding:
            self.yielded = True

    def hold_statuses(self) -> None:
        """Keep yielded statuses in memory until `release_statuses` (or the end, which writes the
        last one): while the engine waits for an immediate result, a status costs no store write."""
        self.holding = True

    def release_statuses(self) -> None:
        """Stop holding statuses; a held one is written now."""
        self.holding = False
        if self.pending_status is None or self.flushing or self.final is not None or self.ending:
            return
        self.flushing = self.host.start_soon(self._flush_status)

    async def _flush_status(self) -> None:
        """Write the coalesced status once its interval has passed (unless a write took it)."""
        try:
            await anyio.sleep_until(self.next_status_at)
            if self.pending_status is None or self.final is not None or not self.host.hosts(self):
                return
            self.next_status_at = anyio.current_time() + self.host.config.limits.status_interval
            if await self._write(lambda record: None) is None:
                self.stop()
        except Exception:
            logger.warning("could not write the status of task %s", self.task_id, exc_info=True)
        finally:
            self.flushing = False

    async def renew(self, ttl_ms: int) -> float | None:
        """Move the record's expiry to one `ttl_ms` from now (when later); return the new expiry.

        None when the task ended or is no longer this run's. `_finish` keeps a record that ended
        after its first expiry for one more `ttl` after its end.
        """
        written = await self._write(lambda record: retained(record, ttl_ms))
        return None if written is None else written.expires_at

    async def save(self, state: Any) -> None:
        """Write the body's checkpoint into its record (durable when this returns)."""
        self.yielded = True
        if self.journal is not None and self.journal.replaying:
            self.saved = state  # the record holds this run's predecessor's later checkpoint
            return
        if await self._write(lambda record: checkpointed(record, state), "saving a checkpoint") is None:
            await self._halt()
        self.saved = state

    async def step(self, step: Step) -> Any:
        """Run `step` against the journal: its recorded value on a replay, else run it and
        journal its value (or error) before returning (see `TaskContext.step`)."""
        journal = self.journal
        if journal is None:
            entry, cause = await step_entry(
                step, self.threads, self.host.config.limits.max_journal_entry_bytes
            )
            return step_value(entry, cause)
        if self.stepping:
            raise InvalidValue(
                "the steps of a durable body run one at a time (the journal records them in order); "
                f"step {step.name!r} was started while another one runs"
            )
        recorded = journal.recorded("step", step.name)
        if recorded is not None:
            return step_value(recorded)
        journal.check_room()
        self.yielded = True
        self.stepping = True
        try:
            entry, cause = await step_entry(
                step, self.threads, self.host.config.limits.max_journal_entry_bytes
            )
            stored = await self._journal(entry, "journalling a step")
        finally:
            self.stepping = False
        return step_value(stored, cause if stored is entry else None)

    async def carry(self, entries: Sequence[dict[str, Any]]) -> None:
        """Start a durable run's journal with what its body did in input rounds before the task
        (nothing without a journal), so a replay does not ask those questions again."""
        if self.journal is None:
            return
        for entry in entries:
            self.journal.check_room()
            await self._journal(entry, "journalling the input before the task")
            self._note_keys(entry.get("keys", ()))

    def _note_keys(self, keys: Sequence[object]) -> None:
        """Keys a journal holds were issued: a later question must not choose them again."""
        for key in keys:
            number = str(key).rpartition("-")[2]
            if number.isdigit():
                self.keys_issued = max(self.keys_issued, int(number))

    async def _journal(self, entry: dict[str, Any], what: str) -> dict[str, Any]:
        """Append `entry` to the journal (the record is stored first, when deferred); return the
        entry stored at its position. The body is halted when its task ended."""
        journal = self.journal
        assert journal is not None
        if not journal.stored:
            if await self._write(lambda record: None, what) is None:
                await self._halt()
            journal.stored = True
        stored = await journal.append(entry, lambda call: self._patiently(call, what))
        if stored is None:
            await self._halt()
            raise AssertionError("unreachable")  # pragma: no cover
        return stored

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Issue the requests under fresh keys, wait until all are answered, parse the answers."""
        return await self._answer(self._question(requests), False)

    async def ask_or_park(self, requests: Sequence[InputRequest]) -> list[Any]:
        """`ask`, except that once the requests are issued and not all answered, `Parked` is
        raised instead of waiting when the engine lets the body wait without its task
        (`RunHost.parks`); resuming continues the same question (`Question.answers`)."""
        return await self._answer(self._question(requests), self.host.parks(self))

    def _question(self, requests: Sequence[InputRequest]) -> Question:
        self.yielded = True
        limit = self.host.config.limits.max_input_requests
        outstanding = len(self.record.input_requests) if self.record is not None else 0
        if outstanding + len(requests) > limit:
            raise InvalidValue(
                f"a task may have at most {limit} input requests outstanding; "
                f"{outstanding} are and {len(requests)} more were yielded"
            )
        return Question(self, requests)

    async def _answer(self, question: Question, park: bool) -> list[Any]:
        """Issue what `question` still needs, wait for the answers, take and parse them; invalid
        answers are asked again (at most `MAX_INVALID_ANSWERS` times each)."""
        while True:
            requests = question.requests
            todo = range(len(requests)) if question.todo is None else question.todo
            if not todo:
                return question.parsed if question.parsed is not None else []
            received = await self._round(question, [requests[i] for i in todo], park)
            if question.parsed is None:
                question.parsed = [None] * len(requests)
            retry: list[int] = []
            for index, raw in zip(todo, received, strict=True):
                refusal = error_response(raw)
                if refusal is not None:
                    raise refusal
                request = requests[index]
                try:
                    question.parsed[index] = request.parse(raw)
                except InvalidAnswer as exc:
                    if question.reject(index, request.retry_with(str(exc))) >= MAX_INVALID_ANSWERS:
                        raise ProtocolError(
                            INVALID_PARAMS,
                            f"The client answered {request.method} with invalid content "
                            f"{MAX_INVALID_ANSWERS} times; last problem: {exc}",
                        ) from None
                    retry.append(index)
            question.todo = retry

    async def _round(self, question: Question, asked: Sequence[InputRequest], park: bool) -> list[Any]:
        """One round of `_answer`: issue `asked` (unless issued), wait for and take the answers
        (a durable run journals them first, or has them from its journal already)."""
        if question.keys is None:
            if self.journal is None:
                question.keys = await self._issue(asked)
            else:
                question.keys, question.recorded = await self._issue_journalled(asked)
        keys = question.keys
        received = question.recorded
        if received is None:
            received = await self._await_answers(keys, question if park else None)
            if self.journal is not None:
                entry = {"kind": "answer", "name": question_name(asked), "answers": received}
                received = list((await self._journal(entry, "journalling the answers"))["answers"])
            await self._take_answers(keys)
        question.keys = question.recorded = None
        return received

    async def _issue_journalled(
        self, requests: Sequence[InputRequest]
    ) -> tuple[tuple[str, ...], list[Any] | None]:
        """A durable run's `_issue`: the keys come from the journal on a replay (the question is
        asked again under the keys a client saw), else they are chosen and journalled before
        they are issued. Returns the keys and the journalled answers (None: not answered yet).

        A question journalled with another wire form (the code changed) is not answered by what
        its old keys got: unanswered, it is asked afresh under new keys (journalled as replacing
        the old ones); answered, the run diverged from its journal.
        """
        journal = self.journal
        assert journal is not None
        name = question_name(requests)
        wanted = questions_digest([request.to_wire() for request in requests])
        asked = journal.recorded("ask", name)
        withdrawn: tuple[str, ...] = ()
        while asked is not None and asked.get("digest", wanted) != wanted:
            old = [str(key) for key in asked["keys"]]
            following = journal.peek()
            if following is None:
                withdrawn, asked = tuple(old), None  # ask afresh below
            elif following.get("kind") == "ask" and following.get("replaces") == old:
                asked = journal.recorded("ask", name)
            else:
                journal.diverge(
                    f"a question ({name}) is asked differently from the one answered there; an "
                    "answer given to the old question is not taken"
                )
        if asked is None:
            journal.check_room()
            base = max(self.keys_issued, self.record.input_key_counter if self.record is not None else 0)
            chosen = [f"{request.key or 'input'}-{base + n}" for n, request in enumerate(requests, 1)]
            self.keys_issued = base + len(requests)
            entry: dict[str, Any] = {"kind": "ask", "name": name, "keys": chosen, "digest": wanted}
            if withdrawn:
                entry["replaces"] = list(withdrawn)
            asked = await self._journal(entry, "journalling a question")
        keys = tuple(str(key) for key in asked["keys"])
        self._note_keys(keys)
        answered = journal.recorded("answer", name) if journal.replaying else None
        if answered is not None:
            return keys, list(answered["answers"])
        return await self._issue(requests, keys, withdrawn), None

    async def _issue(
        self, requests: Sequence[InputRequest], chosen: Sequence[str] = (), withdrawn: Sequence[str] = ()
    ) -> tuple[str, ...]:
        """Add the requests to the record under fresh, never reused keys (or the `chosen` ones,
        which a durable run journalled); return the keys. The `withdrawn` keys (a question asked
        differently now) leave the record, with any answer they got."""
        keys: list[str] = list(chosen)
        issued = False

        def issue(record: TaskRecord) -> TaskRecord | None:
            nonlocal issued
            issued = False
            if keys and all(k in record.input_requests or k in record.input_responses for k in keys):
                return None  # an earlier try landed (its reply lost), or a replay asks again
            issued = True
            if withdrawn:
                record = withdrawn_keys(record, withdrawn)
            counter = record.input_key_counter
            if chosen:
                counter = max(counter, self.keys_issued)
            else:
                keys[:] = [f"{request.key or 'input'}-{counter + n}" for n, request in enumerate(requests, 1)]
                counter += len(requests)
            return asked(record, wire_requests(requests, keys), counter, input_deadlines(requests, keys))

        written = await self._write(issue, "asking for input")
        if written is None:
            await self._halt()
        elif issued or any(key in written.input_requests for key in keys):
            log_task("input_required", written)  # not for a replay of a question answered already
        return tuple(keys)

    async def _await_answers(self, keys: tuple[str, ...], parking: Question | None) -> list[Any]:
        """Wait until every key has an answer; return the answers, in order (still in the record).

        A request whose deadline passed is answered as its author chose, here (the run wakes at
        the deadline) or by any engine's sweep (`Liveness`). With `parking` (the question the
        keys belong to), raise `Parked` instead of waiting.
        This frame stays alive while the body waits, so it holds no closures (their cells would
        too) and nothing the wait does not need.
        """
        if self.waiters is None:
            self.waiters = []
        try:
            while True:
                wake = anyio.Event()
                self.waiters.append(wake)
                try:
                    record = await self._patiently(
                        partial(self.host.store.get, self.task_id), "waiting for input"
                    )
                    if record is None or record.terminal or not self.owns(record):
                        await self._halt()
                        raise AssertionError("unreachable")  # pragma: no cover
                    self.record = record
                    received = answers_received(keys, record.input_responses)
                    if received is not None:
                        break
                    due = next_deadline(record, keys)
                    if due is not None and due <= time.time():
                        await self._answer_overdue()
                        continue
                    wait = self.host.config.input_poll_interval
                    if due is not None:
                        wait = min(wait, max(0.0, due - time.time()))
                    if parking is not None and not wake.is_set() and self.host.parks(self):
                        parking.due = None if due is None else anyio.current_time() + wait
                        raise Parked(parking)
                    wakeup = self.host.wake_at(anyio.current_time() + wait, wake.set)
                    try:
                        await wake.wait()
                    finally:
                        self.host.forget_wakeup(wakeup)
                finally:
                    self.waiters.remove(wake)
        finally:
            if not self.waiters:
                self.waiters = None
        return received

    async def _answer_overdue(self) -> None:
        """Answer the record's requests whose deadline passed, as their authors chose."""
        written = await self._write(deadline_passed(time.time(), {}), "answering at a deadline")
        if written is None:
            await self._halt()

    async def _take_answers(self, keys: tuple[str, ...]) -> None:
        """Take the answers to `keys` out of the record (they were received)."""
        consumed = set(keys)

        def consume(record: TaskRecord) -> TaskRecord:
            return answers_taken(record, consumed)

        if await self._write(consume, "taking the answers") is None:
            await self._halt()
