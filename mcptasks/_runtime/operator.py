"""Operator views of stored tasks, shared by the admin CLI and the dashboard.

Operators reach the store directly (never through MCP), so these helpers decide what an operator
sees: owners as opaque hashes unless asked, results and arguments only when asked, a timeline
built from the record's transitions. `cancel_task` cancels like a client's `tasks/cancel`, on
behalf of the task's owner; `answer_task` answers its pending questions like `tasks/update`,
logged in the record as an operator's answers.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any

from mcptasks._runtime import ledger
from mcptasks._runtime.request_params import checked_answers
from mcptasks._runtime.tasklog import log_task
from mcptasks._runtime.webhooks.events import OPERATOR_STAMP
from mcptasks.errors import MCPTasksError, ProtocolError
from mcptasks.stores.base import OpensExisting, OperatorStore, TaskRecord
from mcptasks.stores.foreign import adopt_store
from mcptasks.stores.url import store_from_url

__all__ = [
    "OPERATOR_CANCEL_REASON",
    "AnswerRefused",
    "age_text",
    "answer_task",
    "answers_view",
    "cancel_task",
    "check_operator_url",
    "describe",
    "iso",
    "open_existing",
    "open_store",
    "owner_hash",
    "parse_duration",
    "parse_since",
    "purge_tasks",
    "timeline",
]

OPERATOR_CANCEL_REASON = "Cancelled by an operator."

logger = logging.getLogger("mcptasks.operator")
"""Operator actions (purges, answers); an operator's cancel is logged on `mcptasks.tasks` like any other."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def owner_hash(owner: str) -> str:
    """A short, stable, opaque stand-in for an owner (the first 12 hex digits of its SHA-256)."""
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def age_text(seconds: float) -> str:
    """A short age: `42s`, `5m07s`, `3h02m`, `2d04h`."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def check_operator_url(url: str) -> str:
    """`url` if operator tools can reach it from another process; `ValueError` for `memory://`."""
    if url.strip().lower().startswith("memory:"):
        raise ValueError(
            "memory:// holds tasks inside one server process; point the operator tools at the "
            "server's shared store (sqlite:///..., redis://..., postgresql://...)"
        )
    return url


def iso(epoch: float | None) -> str | None:
    """Epoch seconds as an ISO 8601 UTC timestamp (milliseconds), None stays None."""
    if epoch is None:
        return None
    return (
        datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def parse_duration(text: str) -> float:
    """Seconds in `90`, `90s`, `15m`, `2h`, `7d`, `1w` or sums such as `1h30m`; `ValueError` otherwise."""
    cleaned = text.strip().lower()
    total = 0.0
    position = 0
    for match in _DURATION.finditer(cleaned):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not cleaned or position != len(cleaned):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 7d, 1h30m)")
    return total


def parse_since(text: str, now: float | None = None) -> float:
    """Epoch seconds from an ISO 8601 time (UTC unless it says otherwise) or a duration ago."""
    try:
        return (time.time() if now is None else now) - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"not a time or a duration: {text!r} (use e.g. 2h or 2026-11-30T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def timeline(record: TaskRecord) -> list[dict[str, Any]]:
    """The task's status history, creation first: `{at, status, statusMessage}` entries."""
    entries = [{"at": iso(record.created_at), "status": "created", "statusMessage": None}]
    for at, status, message in record.transitions:
        entries.append({"at": iso(at), "status": status, "statusMessage": message})
    return entries


def describe(
    record: TaskRecord,
    *,
    show_owner: bool = False,
    show_result: bool = False,
    detail: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """A JSON-able operator view of `record`.

    The owner appears as `ownerHash` (and as `owner` too with `show_owner`); `result` and
    `arguments` only with `show_result`; input requests, error and timeline with `detail`.
    """
    current = time.time() if now is None else now
    view: dict[str, Any] = {
        "taskId": record.task_id,
        "tool": record.tool,
        "status": record.status,
        "statusMessage": record.status_message,
        "ownerHash": owner_hash(record.owner),
        "createdAt": iso(record.created_at),
        "lastUpdatedAt": iso(record.updated_at),
        "ageSeconds": round(max(0.0, current - record.created_at), 3),
        "attempt": record.attempt,
        "runner": record.runner,
    }
    if show_owner:
        view["owner"] = record.owner
    if detail:
        view["ttlMs"] = record.ttl_ms
        view["pollIntervalMs"] = record.poll_interval_ms
        view["version"] = record.version
        view["inputRequests"] = record.input_requests
        view["error"] = record.error
        view["timeline"] = timeline(record)
        view["answers"] = answers_view(record)
        view["inputDeadlines"] = {
            key: {"at": iso(float(deadline["at"])), "answer": deadline.get("answer")}
            for key, deadline in record.input_deadlines.items()
            if key in record.input_requests
        }
        view["traceparent"] = (record.trace or {}).get("traceparent")
    if show_result:
        view["arguments"] = record.arguments
        view["result"] = record.result
    return view


async def open_existing(store: OperatorStore, *, migrate: bool = False) -> None:
    """Open `store` without creating it or (unless `migrate`) changing its schema, when it can
    (`OpensExisting`); stores without `open_existing` are opened as usual."""
    if isinstance(store, OpensExisting):
        await store.open_existing(migrate=migrate)
    else:
        await store.open()


@asynccontextmanager
async def open_store(url: str, *, migrate: bool = False) -> AsyncIterator[OperatorStore]:
    """Open the existing store `url` names for operator use, closing it afterwards.

    Nothing is created: `StoreNotFound` when there is no store there. An older schema is
    migrated only with `migrate` (write commands), else refused with `SchemaVersionError`.
    `ValueError` for a malformed URL or for `memory://`, whose records live inside one server
    process and cannot be reached from another; `MissingExtra` when the backend's client
    library is not installed.
    """
    store = adopt_store(store_from_url(check_operator_url(url)))
    await open_existing(store, migrate=migrate)
    try:
        yield store
    finally:
        await store.close()


async def cancel_task(
    store: OperatorStore, task_id: str, *, reason: str = OPERATOR_CANCEL_REASON
) -> TaskRecord | None:
    """Cancel `task_id` as its owner would; return the record afterwards (None: unknown id).

    A terminal task is returned unchanged. The runner, in this process or another, stops the
    body at its next checkpoint. The cancel is logged here (`mcptasks.tasks`, INFO) and, when the
    store's notification reaches it, by the engine running the body.
    """
    record = await store.get(task_id)
    if record is None:
        return None
    change = ledger.with_events(ledger.cancelled(reason), OPERATOR_STAMP)  # a `task.cancelled` webhook
    cancelled = await ledger.apply(store, task_id, change, known=record)
    if cancelled is not None:
        log_task("cancelled", cancelled)
        await store.publish(task_id)  # the runner, wherever it is, stops the body
    return await store.get(task_id)


class AnswerRefused(MCPTasksError, ValueError):
    """An operator's answer that is not recorded (nothing of the answers was): why, in words."""


def answers_view(record: TaskRecord) -> dict[str, dict[str, Any]]:
    """Who answered each input key of `record` and when: `{by, at, name?, deadline?}` by key."""
    view: dict[str, dict[str, Any]] = {}
    for key, entry in record.answer_log.items():
        shown: dict[str, Any] = {"by": entry.get("by"), "at": iso(entry.get("at"))}
        if entry.get("name"):
            shown["name"] = entry["name"]
        if entry.get("deadline") is not None:
            shown["deadline"] = iso(float(entry["deadline"]))
        view[key] = shown
    return view


async def answer_task(
    store: OperatorStore,
    task_id: str,
    responses: dict[str, Any],
    *,
    name: str | None = None,
) -> TaskRecord | None:
    """Answer pending questions of `task_id` as an operator; the record afterwards (None: unknown id).

    `responses` are wire answers by input key, checked as `tasks/update` checks them; each is
    logged in the record as an operator's (with `name`, when given). `AnswerRefused`, with
    nothing recorded, for a terminal task, a key that is not pending, a key answered already, or
    an answer a store cannot keep. The body, in this process or another, resumes with them.
    """
    record = await store.get(task_id)
    if record is None:
        return None
    if record.terminal:
        raise AnswerRefused(f"task {task_id} is {record.status}; it takes no answers")
    wanted = dict(responses)
    if not wanted:
        raise AnswerRefused("no answer given")
    try:
        checked_answers(wanted)
    except ProtocolError as exc:
        raise AnswerRefused(exc.message) from None
    accepted: dict[str, Any] = {}
    refused: dict[str, str] = {}
    change = ledger.answered(wanted, accepted, by="operator", name=name, refused=refused, strict=True)
    answered = await ledger.apply(store, task_id, change, known=record)
    if refused:
        raise AnswerRefused("; ".join(refused.values()) + "; no answer was recorded")
    if answered is None:
        raise AnswerRefused(f"task {task_id} ended; it takes no answers")
    if accepted:
        logger.info(
            "task %s answered by an operator%s: %s",
            task_id,
            f" ({name})" if name else "",
            ", ".join(sorted(accepted)),
            extra={"event": "answered", "detail": ", ".join(sorted(accepted))},
        )
        await store.publish(task_id)  # the runner, wherever it is, resumes the body
    return await store.get(task_id)


async def purge_tasks(store: OperatorStore, statuses: Collection[str], older_than: float) -> int:
    """`store.purge(statuses, older_than)`, logged as one INFO line on `mcptasks.operator`."""
    deleted = await store.purge(statuses, older_than)
    logger.info(
        "purged %d %s task(s) last updated before %s",
        deleted,
        "/".join(sorted(statuses)),
        iso(older_than),
        extra={"event": "purged", "detail": f"{deleted} deleted"},
    )
    return deleted
