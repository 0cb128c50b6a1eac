"""The record ledger: a task's record changes only by pure transitions applied with compare-and-set.

A transition is a function `TaskRecord -> TaskRecord | None` (None: nothing to change). The
ones every component shares are here (a client's answers and cancel, a body's end), next to
`apply`, which runs one against the store: it reads (or starts from a copy the caller knows),
computes, writes with `replace` on the version it read, and on a conflict reads and computes
again. Nothing here knows where bodies run; the engine, the runs and the operator tools use
the same transitions, so the state machine is in one place.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from mcptasks._runtime import answer_log
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.observer import EngineObserver
from mcptasks.stores.base import CHANGED_PREFIX, TaskRecord, TaskStore, combined_replace

logger = logging.getLogger("mcptasks")

Transition = Callable[[TaskRecord], "TaskRecord | None"]
"""A pure change of one record (None: leave it as it is)."""

PARKED = "~parked"
"""The runner of a durable task whose body waits for answers in the store, not on a worker: no
claim takes it (claims take `runner` None), recovery leaves it alone (no worker holds it), and
the answer that leaves no question outstanding queues it again (`answered`)."""


def retained(record: TaskRecord, ttl_ms: int, since: float | None = None) -> TaskRecord | None:
    """`record` kept until one `ttl_ms` after `since` (default now), when that is later than its
    expiry (else None)."""
    if record.ttl_ms is None:
        return None
    start = time.time() if since is None else since
    wanted = math.ceil((start - record.created_at) * 1000) + ttl_ms
    if wanted <= record.ttl_ms:
        return None
    return record.evolve(ttl_ms=wanted, updated_at=max(start, record.updated_at))


def cancelled(reason: str) -> Transition:
    """The task is cancelled: its questions and unread answers go with it."""

    def change(record: TaskRecord) -> TaskRecord:
        return record.evolve(status="cancelled", status_message=reason, input_requests={}, input_responses={})

    return change


def answered(
    responses: Mapping[str, Any],
    accepted: dict[str, Any],
    *,
    by: answer_log.Answerer = "client",
    name: str | None = None,
    refused: dict[str, str] | None = None,
    strict: bool = False,
) -> Transition:
    """Answers to outstanding keys are received (others are ignored); `accepted` is filled with
    the ones taken, each logged in `answer_log` as given `by` (and `name`). The task is `working`
    again once nothing is outstanding.

    With `refused`, nothing is written when an answer is refused (`answer_log.refusal`: a second,
    different answer to a key; with `strict`, a key that is not outstanding): `refused` holds why.
    """

    def change(record: TaskRecord) -> TaskRecord | None:
        accepted.clear()
        if refused is not None:
            refused.clear()
            for key, value in responses.items():
                reason = answer_log.refusal(record, key, value, strict=strict)
                if reason is not None:
                    refused[key] = reason
            if refused:
                return None
        accepted.update({k: v for k, v in responses.items() if k in record.input_requests})
        if not accepted:
            return None
        now = time.time()
        log = {key: answer_log.entry(record, key, value, by, now, name) for key, value in accepted.items()}
        outstanding = {k: v for k, v in record.input_requests.items() if k not in accepted}
        deadlines = {k: v for k, v in record.input_deadlines.items() if k not in accepted}
        return record.evolve(
            input_requests=outstanding,
            input_responses={**record.input_responses, **accepted},
            input_deadlines=deadlines,
            answer_log=answer_log.logged(record.answer_log, log),
            status="input_required" if outstanding else "working",
            runner=None if record.runner == PARKED and not outstanding else record.runner,
        )

    return change


def deadline_passed(now: float, accepted: dict[str, Any]) -> Transition:
    """The outstanding requests whose deadline is at or before `now` are answered as their
    authors chose (`answer_log.overdue`), logged as given by the deadline."""

    def change(record: TaskRecord) -> TaskRecord | None:
        due = answer_log.overdue(record, now)
        if not due:
            accepted.clear()
            return None
        return answered(due, accepted, by="deadline")(record)

    return change


def ended(
    outcome: Outcome,
    *,
    ttl_ms: Callable[[TaskRecord], int | None],
    only_runner: str | None = None,
    only_attempt: int | None = None,
    status_message: str | None = None,
) -> Transition:
    """The body ended with `outcome` (only when the record is still the run's: `only_runner`,
    `only_attempt`). A record that ran past its first expiry is kept one `ttl_ms(record)` from its
    end; the status message is the outcome's, else the body's last one."""

    def change(record: TaskRecord) -> TaskRecord | None:
        if only_runner is not None and record.runner != only_runner:
            return None
        if only_attempt is not None and record.attempt != only_attempt:
            return None
        done = record.evolve(
            status=outcome.status,
            result=outcome.result,
            error=outcome.error,
            status_message=outcome.message or status_message or record.status_message,
            input_requests={},
            input_responses={},
        )
        ttl = ttl_ms(record)
        if ttl is not None and record.ttl_ms is not None and record.ttl_ms > ttl:
            return retained(done, ttl, since=done.updated_at) or done
        return done

    return change


def with_status(record: TaskRecord, message: str) -> TaskRecord:
    """`record` with the status message `message`."""
    return record.evolve(status_message=message)


def checkpointed(record: TaskRecord, state: Any) -> TaskRecord:
    """`record` holding the body's checkpoint `state`."""
    return record.evolve(checkpoint=state)


def asked(
    record: TaskRecord,
    requests: Mapping[str, Any],
    counter: int,
    deadlines: Mapping[str, dict[str, Any]] | None = None,
) -> TaskRecord:
    """`record` waiting for input: the wire `requests` added under their keys (`counter`: the
    highest key number issued so far), with the `deadlines` of those that have one (a key that
    has a deadline already keeps it: a replay asking again does not move it)."""
    if deadlines:
        deadlines = {**deadlines, **record.input_deadlines}
        return record.evolve(
            input_requests={**record.input_requests, **requests},
            input_key_counter=counter,
            input_deadlines=deadlines,
            status="input_required",
        )
    return record.evolve(
        input_requests={**record.input_requests, **requests},
        input_key_counter=counter,
        status="input_required",
    )


def withdrawn_keys(record: TaskRecord, keys: Collection[str]) -> TaskRecord:
    """`record` without the requests, answers and deadlines of `keys` (their question is no
    longer asked as it was); the answer log says so, and refuses a late answer to them."""
    gone = set(keys)
    now = time.time()
    log = {key: {"by": "withdrawn", "at": now} for key in keys}
    return record.evolve(
        answer_log=answer_log.logged(record.answer_log, log),
        input_requests={k: v for k, v in record.input_requests.items() if k not in gone},
        input_responses={k: v for k, v in record.input_responses.items() if k not in gone},
        input_deadlines={k: v for k, v in record.input_deadlines.items() if k not in gone},
    )


def answers_taken(record: TaskRecord, keys: Collection[str]) -> TaskRecord:
    """`record` without the answers to `keys` (the body received them)."""
    left = {k: v for k, v in record.input_responses.items() if k not in keys}
    return record.evolve(input_responses=left)


def requeued(lost: str | None, attempt: int, message: str) -> Transition:
    """The task `lost` ran is queued again for its attempt `attempt`, re-run from the start."""

    def change(record: TaskRecord) -> TaskRecord | None:
        if record.runner != lost:
            return None
        return record.evolve(
            runner=None,
            attempt=attempt,
            status="working",
            status_message=message,
            input_requests={},
            input_responses={},
        )

    return change


def handed_over(lost: str | None, attempt: int) -> Transition:
    """The durable task `lost` ran is queued again as it stands (it resumes from its journal)."""

    def change(record: TaskRecord) -> TaskRecord | None:
        return record.evolve(runner=None, attempt=attempt) if record.runner == lost else None

    return change


def claimed_by(runner: str) -> Transition:
    """A queued task is claimed by `runner` (nothing when it is held or ended)."""

    def change(record: TaskRecord) -> TaskRecord | None:
        return record.evolve(runner=runner) if record.runner is None and not record.terminal else None

    return change


def parked_by(runner: str, attempt: int) -> Transition:
    """`runner`'s durable body waits for answers in the store (`PARKED`): it gives its claim up
    while a question is outstanding (nothing once all are answered, or the run is not the task's)."""

    def change(record: TaskRecord) -> TaskRecord | None:
        if record.runner != runner or record.attempt != attempt or not record.input_requests:
            return None
        return record.evolve(runner=PARKED)

    return change


def released_by(runner: str) -> Transition:
    """`runner` gives its claim back: the task is queued again (nothing when another holds it)."""

    def change(record: TaskRecord) -> TaskRecord | None:
        return record.evolve(runner=None) if record.runner == runner else None

    return change


def while_queued(change: Transition) -> Transition:
    """`change`, only while the task is queued (no runner holds it)."""

    def queued(record: TaskRecord) -> TaskRecord | None:
        return change(record) if record.runner is None else None

    return queued


def waiting(note: str) -> Transition:
    """A queued task says why it waits (`note`; nothing once it is claimed or ended)."""

    def change(record: TaskRecord) -> TaskRecord | None:
        if record.terminal or record.runner is not None:
            return None
        return record.evolve(status_message=note)

    return change


def with_events(
    change: Transition, stamp: Callable[[TaskRecord | None, TaskRecord], TaskRecord]
) -> Transition:
    """`change`, plus the webhook events it makes (`stamp(before, after)` adds them to the
    record's outbox), so the events are written by the same compare-and-set as the change."""

    def stamped(record: TaskRecord) -> TaskRecord | None:
        after = change(record)
        return None if after is None else stamp(record, after)

    return stamped


def outbox_changed(
    record: TaskRecord, outbox: list[dict[str, Any]], keep_until: float | None = None
) -> TaskRecord:
    """`record` with its webhook outbox replaced by `outbox` (written with `replace_outbox`, the
    task itself unchanged: `updated_at` stays), and while entries remain kept at least until
    `keep_until`, so a pending event does not expire with its record before its last attempt."""
    changed = record.evolve(outbox=outbox, updated_at=record.updated_at)
    expires_at = record.expires_at
    if outbox and keep_until is not None and expires_at is not None and expires_at < keep_until:
        changed.ttl_ms = math.ceil((keep_until - record.created_at) * 1000)
    return changed


async def apply(
    store: TaskStore,
    task_id: str,
    change: Transition,
    *,
    known: TaskRecord | None = None,
    push: bool = True,
    observer: EngineObserver | None = None,
) -> TaskRecord | None:
    """Apply `change` to the stored record with compare-and-set, again on a conflict.

    `known` is a copy the caller believes current (a runner's own last write): the first try
    uses it without reading the store. Returns the stored record after the change (the
    unchanged one when `change` returns None), or None when the task is gone or terminal.
    With `push`, each write is announced to listen streams (`CHANGED_PREFIX`).
    """
    record = known
    while True:
        if record is None:
            record = await store.get(task_id)
        if record is None or record.terminal:
            return None
        updated = change(record)
        if updated is None:
            return record
        if await replace(store, record, updated, push=push, observer=observer):
            return updated
        record = None


async def replace(
    store: TaskStore,
    record: TaskRecord,
    updated: TaskRecord,
    *,
    push: bool = True,
    observer: EngineObserver | None = None,
) -> bool:
    """Compare-and-set `record` to `updated`, announced on the change feed with `push`."""
    # A store that can announce the change in the write itself saves the feed a round trip.
    combined = combined_replace(store) if push else None
    if combined is not None:
        message = CHANGED_PREFIX + record.task_id
        written = bool(await combined(updated, expected_version=record.version, message=message))
    else:
        written = await store.replace(updated, expected_version=record.version)
    if written:
        if observer is not None:
            observer.changed(record, updated)
        if push and combined is None:
            await announce(store, record.task_id)
    return written


async def announce(store: TaskStore, task_id: str) -> None:
    """Tell listen streams on every instance that the task changed (they re-read it). Losing one
    is tolerated (streams re-read periodically), so a failure does not fail the write."""
    try:
        await store.publish(CHANGED_PREFIX + task_id)
    except Exception:
        logger.debug("could not announce a change of task %s", task_id, exc_info=True)
