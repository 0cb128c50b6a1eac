"""Task transitions as log records: one INFO record per transition on the `mcptasks.tasks` logger.

    created           task <id> created (tool build)
    input_required    task <id> input_required (tool build): waiting for confirm-1
    requeued          task <id> requeued (tool build): attempt 2 of 3 ...
    completed         task <id> completed (tool build) in 2.41s   [or: completed with a tool error ...]
    failed            task <id> failed (tool build) in 0.20s: <message> (code -32603, reason worker_lost)
    cancelled         task <id> cancelled (tool build) in 8.03s: Cancelled by the client.

A cancel written by another process (`mcptasks admin cancel`, the dashboard, another replica) is
logged by the engine running the body when it learns of it, with the status message the canceller
set ("Cancelled by an operator."). The end events' duration is seconds since the task was created.

Every record carries the fields as attributes too (`event`, `task_id`, `tool`, `status`, and for
failures `code`, `reason` and `detail`, for the end events `duration`), so a formatter or handler can use them without parsing the text
(`mcptasks serve --log-format json` does). The message escapes the client- or body-supplied
`detail` (control characters, bidi overrides: see `safe_text`); the `detail` attribute keeps it as
it is, for structured handlers. Task ids are bearer secrets on servers without
authentication: keep these logs as private as the store.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from mcptasks._runtime.safe_text import one_line
from mcptasks.stores.base import TaskRecord

logger = logging.getLogger("mcptasks.tasks")

TaskEvent = Literal["created", "input_required", "requeued", "completed", "failed", "cancelled"]

DEFAULT_REASON = "error"
"""The `reason` of a failure whose error data names none (a JSON-RPC error the body raised, say);
the engine's own failures name theirs: `ttl`, `worker_lost`, `shutdown`."""

FIELDS = ("event", "task_id", "tool", "status", "code", "reason", "detail", "duration")
"""The attributes every task log record carries (`code`, `reason`, `detail`, `duration` may be None)."""

ENDS = ("completed", "failed", "cancelled")
"""The events whose records carry a `duration`: seconds from `created_at` to the transition."""


def _tool_error_text(result: dict[str, Any] | None) -> str | None:
    if not result or not result.get("isError"):
        return None
    content = result.get("content") or [{}]
    first = content[0] if isinstance(content[0], dict) else {}
    return str(first.get("text") or "tool error")


def _one_line(text: str, limit: int = 300) -> str:
    """Client- or body-supplied `text` for the message: whitespace runs as one space, control
    characters and bidi overrides escaped (`safe_text`), at most `limit` characters."""
    text = one_line(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _duration(event: TaskEvent, record: TaskRecord) -> float | None:
    """Seconds from creation to an end event (None for the other events)."""
    return round(max(0.0, record.updated_at - record.created_at), 3) if event in ENDS else None


def _tail(duration: float | None, detail: str | None, code: int | None, reason: str | None) -> str:
    """The message after `task <id> <event> (tool <name>)`: duration, detail, code and reason."""
    text = "" if duration is None else f" in {duration:.2f}s"
    if detail:
        text += ": " + _one_line(detail)
    if code is not None:
        text += f" (code {code}" + (f", reason {reason})" if reason != DEFAULT_REASON else ")")
    return text


def log_task(event: TaskEvent, record: TaskRecord, *, note: str | None = None) -> None:
    """Log one transition of `record` (its state after the transition) at INFO; `note` (the
    server's own words) is appended to the message."""
    if not logger.isEnabledFor(logging.INFO):
        return
    code: int | None = None
    reason: str | None = None
    detail: str | None = None
    what: str = event
    if event == "failed":
        error = record.error or {}
        raw_code = error.get("code")
        code = raw_code if isinstance(raw_code, int) else None
        data = error.get("data")
        named = data.get("reason") if isinstance(data, dict) else None
        reason = named if isinstance(named, str) and named else DEFAULT_REASON
        detail = str(error.get("message") or "failed")
    elif event == "completed":
        tool_error = _tool_error_text(record.result)
        if tool_error is not None:
            what = "completed with a tool error"
            detail = tool_error
    elif event == "input_required":
        detail = "waiting for " + ", ".join(sorted(record.input_requests))
    elif event in ("cancelled", "requeued"):
        detail = record.status_message
    duration = _duration(event, record)
    text = f"task {record.task_id} {what} (tool {record.tool})" + _tail(duration, detail, code, reason)
    if note:
        text += f"; {note}"
    fields = {
        "event": event,
        "task_id": record.task_id,
        "tool": record.tool,
        "status": record.status,
        "code": code,
        "reason": reason,
        "detail": detail,
        "duration": duration,
    }
    logger.info(text, extra=fields)
