"""Task events and the outbox entries that carry them until they are delivered.

An event is made by a record change (`stamped`): the task asked new questions
(`task.input_required`) or ended (`task.completed`, `task.failed`, `task.cancelled`). The change
itself gets one outbox entry per endpoint, so the event is written by the same compare-and-set
as the change: a crash right after the write loses nothing, and a write that lost its race made
no event. An entry is a small JSON dict:

    {"id": "msg_...", "type": "task.completed", "at": 1765000000.12, "to": "<endpoint key>",
     "n": 0, "due": 1765000020.12, "data": {...}}

`id` is the event's stable `webhook-id` (the same for every endpoint, retry and replica), `n` the
attempts made, `due` when a sweep may try it (the process that wrote it tries at once), `data` the
snapshot of an `input_required` event (a terminal record never changes, so the data of an end is
read from it when sent).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

from mcptasks._runtime.ledger import outbox_changed
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import iso_timestamp

EVENT_TYPES: tuple[str, ...] = ("task.input_required", "task.completed", "task.failed", "task.cancelled")
"""Every event type, in the order a task may produce them."""

Entry = dict[str, Any]
Stamp = Callable[["TaskRecord | None", TaskRecord], TaskRecord]
"""Adds the events of a change (`before` -> `after`; `before` None for a new record) to `after`."""


class EventOutbox(NamedTuple):
    """Where the engine's record writes put their events (`WebhookDelivery.outbox`)."""

    stamp: Stamp
    """Adds the events of a change to the written record's outbox (`ledger.with_events`)."""
    wrote: Callable[[TaskRecord], None]
    """Told each record written with events, to send them at once."""


def event_type(before: TaskRecord | None, after: TaskRecord) -> str | None:
    """The event a change makes, if any: an end, or questions that were not outstanding before."""
    if after.terminal:
        return None if before is not None and before.terminal else f"task.{after.status}"
    if after.status != "input_required":
        return None
    asked_before = before.input_requests if before is not None else {}
    return "task.input_required" if any(key not in asked_before for key in after.input_requests) else None


def event_id(before: TaskRecord | None, after: TaskRecord, kind: str) -> str:
    """A stable id made from the write that made the event: the task, the version it replaced,
    the type and the new question keys (no task id shows in it)."""
    version = 0 if before is None else before.version
    asked_before = before.input_requests if before is not None else {}
    new_keys = sorted(key for key in after.input_requests if key not in asked_before)
    seed = "\x1f".join([after.task_id, str(version), kind, *new_keys])
    return "msg_" + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def event_data(record: TaskRecord) -> dict[str, Any]:
    """The `data` of an event about `record`: the task as `tasks/get` shows it (its questions
    while it waits, its result or error once it ended) plus its tool."""
    data: dict[str, Any] = {
        "taskId": record.task_id,
        "tool": record.tool,
        "status": record.status,
        "statusMessage": record.status_message,
        "createdAt": iso_timestamp(record.created_at),
        "lastUpdatedAt": iso_timestamp(record.updated_at),
    }
    if record.status == "input_required":
        data["inputRequests"] = dict(record.input_requests)
    elif record.status == "completed":
        data["result"] = record.result
    elif record.status == "failed":
        data["error"] = record.error
    return data


def stamper(targets: Callable[[], Collection[str]], first_due: float) -> Stamp:
    """The `Stamp` that adds one entry per key of `targets()` (the endpoints taking events now),
    due for a sweep `first_due` seconds after the change (the writer tries it first)."""

    def stamp(before: TaskRecord | None, after: TaskRecord) -> TaskRecord:
        kind = event_type(before, after)
        if kind is None:
            return after
        keys = targets()
        if not keys:
            return after
        identifier = event_id(before, after, kind)
        at = after.updated_at
        entries: list[Entry] = []
        for key in keys:
            entry: Entry = {
                "id": identifier,
                "type": kind,
                "at": at,
                "to": key,
                "n": 0,
                "due": at + first_due,
            }
            if kind == "task.input_required":
                entry["data"] = event_data(after)
            entries.append(entry)
        return outbox_changed(after, [*after.outbox, *entries])

    return stamp


ANY_ENDPOINT = "*"
"""The endpoint of an event made where no endpoint is known (an operator's cancel, outside
`serve`): a process that delivers webhooks gives it one entry per endpoint it knows (`addressed`)."""

OPERATOR_STAMP: Stamp = stamper(lambda: (ANY_ENDPOINT,), first_due=0.0)
"""What a change made outside any engine (`mcptasks admin cancel`, the dashboard) stamps its
event with, in the same compare-and-set as the change."""


def addressed(record: TaskRecord, keys: Collection[str], now: float) -> list[Entry]:
    """`record`'s outbox with each `ANY_ENDPOINT` entry replaced by one per key of `keys`, due now."""
    kept = [entry for entry in record.outbox if entry.get("to") != ANY_ENDPOINT]
    for entry in record.outbox:
        if entry.get("to") == ANY_ENDPOINT:
            kept += [{**entry, "to": key, "due": now} for key in keys]
    return kept


def message(entry: Mapping[str, Any], record: TaskRecord) -> dict[str, Any]:
    """The Standard Webhooks body of `entry` (an event of `record`): `type`, `timestamp`, `data`."""
    data = entry.get("data")
    return {
        "type": entry["type"],
        "timestamp": iso_timestamp(float(entry["at"])),
        "data": data if isinstance(data, dict) else event_data(record),
    }


def entry_key(entry: Mapping[str, Any]) -> tuple[str, str]:
    """What names one delivery: the event id and the endpoint key."""
    return str(entry["id"]), str(entry["to"])


def find(record: TaskRecord, key: tuple[str, str]) -> Entry | None:
    """The outbox entry of `record` named `key`, if it is still there."""
    return next((e for e in record.outbox if entry_key(e) == key), None)


def without(record: TaskRecord, keys: Iterable[tuple[str, str]]) -> list[Entry]:
    """`record`'s outbox without the entries named by `keys`."""
    gone = set(keys)
    return [e for e in record.outbox if entry_key(e) not in gone]


def updated(record: TaskRecord, changes: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[Entry]:
    """`record`'s outbox with the entries named in `changes` updated by them."""
    return [{**e, **changes[entry_key(e)]} if entry_key(e) in changes else e for e in record.outbox]
