"""What the dashboard shows, as JSON-able data: the summary (counts, rows, chart) and a task.

Pure functions over store reads; the HTTP layer (`app`) and the HTML (`pages`) build on them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection
from typing import Any

from mcptasks._runtime.operator import describe, iso
from mcptasks.stores.admin import TaskQuery, is_tool_error
from mcptasks.stores.base import OperatorStore, TaskRecord

__all__ = [
    "CHART_BUCKETS",
    "CHART_SPAN",
    "FILTERS",
    "KINDS",
    "PREVIEW_CHARS",
    "REDACTED",
    "STATUSES",
    "TOOL_ERROR",
    "ago_text",
    "chart",
    "duration_text",
    "kind_counts",
    "kind_of",
    "preview",
    "query_for",
    "redact",
    "row",
    "status_at",
    "summary",
    "task_detail",
]

STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
TOOL_ERROR = "tool_error"
"""The kind of a task that completed with a tool error (`isError: true`): its status is
`completed`, but the dashboard shows, counts and filters it apart from the ones that succeeded."""
KINDS = ("working", "input_required", "completed", TOOL_ERROR, "failed", "cancelled")
"""What the dashboard tells tasks apart by: the statuses, with `completed` split in two."""
FILTERS = frozenset(KINDS)
"""The values of the list's `status` filter."""
PREVIEW_CHARS = 120
"""Most characters of a statusMessage the table shows (its first line; the detail view has it all)."""
CHART_SPAN = 3600.0
"""The chart covers the last hour..."""
CHART_BUCKETS = 12
"""...in five-minute steps."""
ROWS = 200
"""Most rows the table shows."""
CHART_RECORDS = 2000
"""Most records (newest first) the chart is computed from."""


REDACTED = "\u2022\u2022\u2022 (redacted)"
"""What a masked argument value shows instead of itself (the value never leaves the server)."""

_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def duration_text(seconds: float) -> str:
    """A human duration in at most two units: `45 s`, `1 min 5 s`, `12 min`, `3 h 5 min`, `2 d 4 h`."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s} s"
    for i, (size, unit) in enumerate(_UNITS[:-1]):
        if s >= size:
            smaller, small_unit = _UNITS[i + 1]
            rest = s % size // smaller
            return f"{s // size} {unit}" + (f" {rest} {small_unit}" if rest else "")
    raise AssertionError(s)  # pragma: no cover


def ago_text(seconds: float) -> str:
    """How long ago, without seconds past the first minute: `just now`, `40 s ago`, `12 min ago`,
    `3 h 5 min ago`."""
    s = int(max(0.0, seconds))
    if s < 1:
        return "just now"
    if s < 60:
        return f"{s} s ago"
    if s < 3600:
        return f"{s // 60} min ago"
    return f"{duration_text(s - s % 60)} ago"


def _ended_at(record: TaskRecord) -> float | None:
    """When a terminal task reached its final status (its last transition; else its last update)."""
    if not record.terminal:
        return None
    for at, status, _ in reversed(record.transitions):
        if status == record.status:
            return float(at)
    return record.updated_at


def kind_of(record: TaskRecord) -> str:
    """The record's status, or `TOOL_ERROR` for one that completed with a tool error."""
    return TOOL_ERROR if is_tool_error(record) else record.status


def preview(message: str | None) -> str | None:
    """What the table shows of a statusMessage: its first non-blank line, cut at `PREVIEW_CHARS`,
    with `…` when anything was left out."""
    if message is None:
        return None
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    cut = len(first) > PREVIEW_CHARS
    shown = first[: PREVIEW_CHARS - 1].rstrip() if cut else first
    return shown + "\u2026" if cut or len(lines) > 1 else shown


def query_for(kind: str | None, tools: frozenset[str] | None = None) -> TaskQuery:
    """The listing of the `status` filter's `kind` (`completed`: without a tool error;
    `tool_error`: completed with one); `ValueError` for an unknown kind."""
    if not kind:
        return TaskQuery(tools=tools)
    if kind not in FILTERS:
        raise ValueError(kind)
    if kind in ("completed", TOOL_ERROR):
        return TaskQuery(statuses=frozenset({"completed"}), tools=tools, tool_error=kind == TOOL_ERROR)
    return TaskQuery(statuses=frozenset({kind}), tools=tools)


def row(record: TaskRecord, now: float) -> dict[str, Any]:
    """A table row: the operator view plus `kind` (`kind_of`), `toolError`, `messagePreview`
    (`preview`), `endedAt` (None while active) and `durationSeconds` (created to ended for a
    finished task, which stops counting; created to now for an active one)."""
    view = describe(record, now=now)
    view["kind"] = kind_of(record)
    view["toolError"] = view["kind"] == TOOL_ERROR
    view["messagePreview"] = preview(record.status_message)
    ended = _ended_at(record)
    view["endedAt"] = iso(ended)
    view["durationSeconds"] = round(max(0.0, (now if ended is None else ended) - record.created_at), 3)
    return view


def redact(value: Any, names: frozenset[str]) -> Any:
    """`value` with the value of every object key in `names` (lower case) masked, at any depth."""
    if isinstance(value, dict):
        return {k: REDACTED if str(k).lower() in names else redact(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, names) for v in value]
    return value


def task_detail(
    record: TaskRecord,
    now: float,
    *,
    show_result: bool,
    redact_all: bool = False,
    redacted: Collection[str] = (),
) -> dict[str, Any]:
    """A task's detail view: the row, its input requests, error, timeline, `statusHistory`
    (`{at, statusMessage}`, oldest first) and `arguments`, masked as asked (`redact_all`: every
    value; `redacted`: the values of these argument names, case-insensitive, at any depth)."""
    view = describe(record, detail=True, show_result=show_result, now=now)
    view.update(row(record, now))
    names = frozenset(n.lower() for n in redacted)
    arguments = dict(record.arguments)
    view["arguments"] = (
        {k: REDACTED for k in arguments} if redact_all else redact(arguments, names) if names else arguments
    )
    view["generatedAt"] = iso(now)
    view["statusHistory"] = [
        {"at": iso(at), "statusMessage": message} for at, message in record.status_history
    ]
    return view


def status_at(record: TaskRecord, moment: float) -> str | None:
    """The record's status at `moment` (None: not created yet), from its transitions."""
    if record.created_at > moment:
        return None
    if not record.transitions:  # written before transitions were recorded
        return record.status if record.updated_at <= moment or record.status == "working" else "working"
    status = "working"
    for at, new_status, _ in record.transitions:
        if at > moment:
            break
        status = new_status
    return status


def chart(records: list[TaskRecord], now: float) -> dict[str, Any]:
    """Tasks per kind (`KINDS`) at the end of each five-minute step of the last hour."""
    step = CHART_SPAN / CHART_BUCKETS
    end = math.ceil(now / step) * step
    moments = [end - CHART_SPAN + step * (i + 1) for i in range(CHART_BUCKETS)]
    moments[-1] = now
    series = {kind: [0] * CHART_BUCKETS for kind in KINDS}
    for record in records:
        ended_badly = is_tool_error(record)
        for i, moment in enumerate(moments):
            status = status_at(record, moment)
            if status == "completed" and ended_badly:
                status = TOOL_ERROR
            if status in series:
                series[status][i] += 1
    return {"times": [iso(m) for m in moments], "series": series}


def kind_counts(by_status: dict[str, int], tool_errors: int | None) -> dict[str, int | None]:
    """Counts by `KINDS`: `completed` without the tool errors, `tool_error` those (None, and
    `completed` all of them, when the store does not count tool errors)."""
    counts: dict[str, int | None] = {status: by_status.get(status, 0) for status in STATUSES}
    completed = by_status.get("completed", 0)
    counts["completed"] = completed if tool_errors is None else completed - tool_errors
    counts[TOOL_ERROR] = tool_errors
    return {kind: counts[kind] for kind in KINDS}


async def _recent(store: OperatorStore, limit: int) -> list[TaskRecord]:
    records: list[TaskRecord] = []
    after: str | None = None
    while len(records) < limit:
        page = await store.list_tasks(TaskQuery(), limit=min(1000, limit - len(records)), after=after)
        records += page.records
        if page.next_cursor is None:
            break
        after = page.next_cursor
    return records


async def summary(
    store: OperatorStore,
    *,
    query: TaskQuery | None = None,
    can_cancel: bool = False,
) -> dict[str, Any]:
    """Counts, the rows `query` lists (newest first, at most `ROWS`), the chart and the runners.

    `counts` are by status (`completed` includes the tool errors); `toolErrors` counts those
    (None when the store does not count them)."""
    now = time.time()
    stats = await store.stats()
    query = query or TaskQuery()
    page = await store.list_tasks(query, limit=ROWS)
    recent = await _recent(store, CHART_RECORDS)
    return {
        "generatedAt": iso(now),
        "counts": {status: stats.by_status.get(status, 0) for status in STATUSES},
        "toolErrors": stats.tool_errors,
        "kinds": kind_counts(stats.by_status, stats.tool_errors),
        "total": stats.total,
        "queued": stats.queued,
        "oldestActive": iso(stats.oldest_active),
        "oldestActiveSeconds": (
            None if stats.oldest_active is None else round(max(0.0, now - stats.oldest_active), 3)
        ),
        "runners": len(stats.runners),
        "tools": sorted(stats.by_tool),
        # a store that predates `TaskQuery.tool_error` ignores it: filter its page here too
        "tasks": [row(record, now) for record in page.records if query.matches(record)],
        "more": page.next_cursor is not None,
        "chart": chart(recent, now),
        "canCancel": can_cancel,
    }
