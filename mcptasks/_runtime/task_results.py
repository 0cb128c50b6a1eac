"""The result dicts of the Tasks extension built from a task record.

`create_task_result` is what a `tools/call` that created a task answers, `detailed_task` what
`tasks/get` (and a `notifications/tasks` push) carries, and `complete` wraps any other reply with
`resultType: "complete"`. They are plain JSON-able dicts, shared by the protocol handlers, the
push streams and the HTTP fast paths so every path renders a task the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcptasks.stores.base import TaskRecord
from mcptasks.wire import iso_timestamp


def task_fields(record: TaskRecord, poll_interval_ms: int | None) -> dict[str, Any]:
    """The `Task` fields of a record."""
    created = iso_timestamp(record.created_at)
    updated = created if record.updated_at == record.created_at else iso_timestamp(record.updated_at)
    fields: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status,
        "createdAt": created,
        "lastUpdatedAt": updated,
        "ttlMs": record.ttl_ms,
    }
    if record.status_message is not None:
        fields["statusMessage"] = record.status_message
    if poll_interval_ms is not None:
        fields["pollIntervalMs"] = poll_interval_ms
    return fields


def create_task_result(record: TaskRecord, poll_interval_ms: int | None) -> dict[str, Any]:
    """The flat `CreateTaskResult` (`resultType: "task"`)."""
    return {"resultType": "task", **task_fields(record, poll_interval_ms)}


def detailed_task(record: TaskRecord, poll_interval_ms: int | None) -> dict[str, Any]:
    """The `tasks/get` result: the task plus `result`, `error` or outstanding `inputRequests`."""
    result = complete(task_fields(record, poll_interval_ms))
    if record.status == "completed" and record.result is not None:
        result["result"] = complete(record.result)
    elif record.status == "failed" and record.error is not None:
        result["error"] = record.error
    elif record.status == "input_required":
        result["inputRequests"] = dict(record.input_requests)
    return result


def complete(result: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A reply with `resultType: "complete"` and the fields of `result`."""
    return {"resultType": "complete", **(result or {})}
