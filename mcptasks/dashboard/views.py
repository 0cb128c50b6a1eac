"""What the dashboard shows, as JSON-able data: the summary (counts, rows, chart) and a task.

Pure functions over store reads; the HTTP layer (`app`) and the HTML (`pages`) build on them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection
from typing import Any

from mcptasks._runtime.operator import describe, iso
from mcptasks.stores.admin import TaskQuery
from mcptasks.stores.base import TaskRecord, TaskStore

__all__ = [
    "CHART_BUCKETS",
    "CHART_SPAN",
    "REDACTED",
    "STATUSES",
    "ago_text",
    "chart",
    "duration_text",
    "redact",
    "row",
    "status_at",
    "summary",
    "task_detail",
]

STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
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


def row(record: TaskRecord, now: float) -> dict[str, Any]:
    """A table row: the operator view plus `endedAt` (None while active) and `durationSeconds`
    (created to ended for a finished task, which stops counting; created to now for an active one)."""
    view = describe(record, now=now)
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
    """Tasks per status at the end of each five-minute step of the last hour."""
    step = CHART_SPAN / CHART_BUCKETS
    end = math.ceil(now / step) * step
    moments = [end - CHART_SPAN + step * (i + 1) for i in range(CHART_BUCKETS)]
    moments[-1] = now
    series = {status: [0] * CHART_BUCKETS for status in STATUSES}
    for record in records:
        for i, moment in enumerate(moments):
            status = status_at(record, moment)
            if status in series:
                series[status][i] += 1
    return {"times": [iso(m) for m in moments], "series": series}


async def _recent(store: TaskStore, limit: int) -> list[TaskRecord]:
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
    store: TaskStore,
    *,
    statuses: frozenset[str] | None = None,
    tools: frozenset[str] | None = None,
    can_cancel: bool = False,
) -> dict[str, Any]:
    """Counts, the filtered rows (newest first, at most `ROWS`), the chart and the runners."""
    now = time.time()
    stats = await store.stats()
    page = await store.list_tasks(TaskQuery(statuses=statuses, tools=tools), limit=ROWS)
    recent = await _recent(store, CHART_RECORDS)
    return {
        "generatedAt": iso(now),
        "counts": {status: stats.by_status.get(status, 0) for status in STATUSES},
        "total": stats.total,
        "queued": stats.queued,
        "oldestActive": iso(stats.oldest_active),
        "oldestActiveSeconds": (
            None if stats.oldest_active is None else round(max(0.0, now - stats.oldest_active), 3)
        ),
        "runners": len(stats.runners),
        "tools": sorted(stats.by_tool),
        "tasks": [row(record, now) for record in page.records],
        "more": page.next_cursor is not None,
        "chart": chart(recent, now),
        "canCancel": can_cancel,
    }
