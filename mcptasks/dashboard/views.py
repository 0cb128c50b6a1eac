"""What the dashboard shows, as JSON-able data: the summary (counts, rows, chart) and a task.

Pure functions over store reads; the HTTP layer (`app`) and the HTML (`pages`) build on them.
"""

from __future__ import annotations

import math
import time
from typing import Any

from mcptasks._runtime.operator import describe, iso
from mcptasks.stores.admin import TaskQuery
from mcptasks.stores.base import TaskRecord, TaskStore

__all__ = ["CHART_BUCKETS", "CHART_SPAN", "STATUSES", "chart", "status_at", "summary"]

STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
CHART_SPAN = 3600.0
"""The chart covers the last hour..."""
CHART_BUCKETS = 12
"""...in five-minute steps."""
ROWS = 200
"""Most rows the table shows."""
CHART_RECORDS = 2000
"""Most records (newest first) the chart is computed from."""


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
        "runners": len(stats.runners),
        "tools": sorted(stats.by_tool),
        "tasks": [describe(record, now=now) for record in page.records],
        "more": page.next_cursor is not None,
        "chart": chart(recent, now),
        "canCancel": can_cancel,
    }
