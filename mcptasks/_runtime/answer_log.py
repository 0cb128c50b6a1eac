"""Who answered a task's input keys, and what binds an answer to its question.

Each answer the record receives is logged under its key (`TaskRecord.answer_log`): who gave it
(`client`, `operator`, or `deadline` when a request's own deadline passed), when, and digests of
the answer and of the request it answered. The log outlives the answer, so a key takes one answer
only: a different second answer is refused as stale, the same one again (a retried `tasks/update`)
is a no-op. A durable run journals the digest of each question it asks (`question_digest`) and
does not take, on a replay, an answer given to a question its code now asks differently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from mcptasks.stores.record import TaskRecord

Answerer = Literal["client", "operator", "deadline"]
"""Who gave an answer: the task's client (`tasks/update`), an operator, or a request's deadline.
(A key whose question was asked again differently is logged as `withdrawn`.)"""

MAX_LOGGED_KEYS = 200
"""Most keys a record's `answer_log` keeps (the latest); an older key's second answer is ignored
as one to a key that is not outstanding."""


def digest(value: Any) -> str:
    """A short digest of a JSON value (its canonical text: sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def question_digest(wire: Mapping[str, Any]) -> str:
    """The digest binding answers to one request's wire form (`{method, params}`)."""
    return digest({"method": wire.get("method"), "params": wire.get("params")})


def questions_digest(wires: list[dict[str, Any]]) -> str:
    """The digest of a question (its requests' wire forms, in order) a durable run journals."""
    return digest([question_digest(wire) for wire in wires])


def entry(
    record: TaskRecord, key: str, answer: Any, by: Answerer, at: float, name: str | None = None
) -> dict[str, Any]:
    """The log entry of `answer` to the outstanding `key` of `record`."""
    logged: dict[str, Any] = {
        "by": by,
        "at": at,
        "answer": digest(answer),
        "question": question_digest(record.input_requests.get(key, {})),
    }
    if name:
        logged["name"] = name
    if by == "deadline":
        deadline = record.input_deadlines.get(key)
        if deadline is not None:
            logged["deadline"] = deadline.get("at")
    return logged


def logged(log: Mapping[str, dict[str, Any]], added: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """`log` with the `added` entries (the latest `MAX_LOGGED_KEYS` kept)."""
    merged = {**log, **added}
    if len(merged) > MAX_LOGGED_KEYS:
        merged = dict(list(merged.items())[-MAX_LOGGED_KEYS:])
    return merged


def refusal(record: TaskRecord, key: str, answer: Any, *, strict: bool) -> str | None:
    """Why `answer` to `key` is not taken (None: it is, or it is ignored).

    An answered key refuses a different answer (a repeat of the same one is ignored); with
    `strict` (an operator), a key that is not outstanding is refused too.
    """
    if key in record.input_requests:
        return None
    previous = record.answer_log.get(key)
    if previous is not None and previous.get("by") == "withdrawn":
        return (
            f"stale answer: the question of input key {key!r} was asked again differently, under "
            "another key; answer the question as it is asked now"
        )
    if previous is not None:
        if previous.get("answer") == digest(answer) and not strict:
            return None
        by = previous.get("by", "someone")
        who = "its client" if by == "client" else "an operator" if by == "operator" else "its deadline"
        return f"stale answer: input key {key!r} was answered already by {who}; a key takes one answer only"
    if strict:
        pending = ", ".join(sorted(record.input_requests)) or "none"
        return f"input key {key!r} is not a pending question of this task (pending: {pending})"
    return None


def overdue(record: TaskRecord, now: float) -> dict[str, Any]:
    """The answers the deadlines of `record`'s outstanding requests give at `now`, by key."""
    return {
        key: deadline.get("answer")
        for key, deadline in record.input_deadlines.items()
        if key in record.input_requests and float(deadline.get("at", now + 1)) <= now
    }


def next_deadline(record: TaskRecord, keys: tuple[str, ...]) -> float | None:
    """The earliest deadline (epoch seconds) of the outstanding `keys` of `record` (None: none)."""
    times = [
        float(record.input_deadlines[key]["at"])
        for key in keys
        if key in record.input_deadlines and key in record.input_requests
    ]
    return min(times) if times else None
