"""Client polls: the `pollIntervalMs` advertised for a task, and limiting polls that come too fast."""

from __future__ import annotations

import math
import time

import anyio

from mcptasks._runtime.config import PollLimit
from mcptasks.errors import PollTooFast
from mcptasks.stores.base import TaskRecord

FORGET_AFTER = 600.0
"""Seconds after which the last poll of a task is forgotten (`PollMarks.forget_stale`)."""


def advertised_interval_ms(record: TaskRecord, adaptive_max_ms: int | None) -> int:
    """The `pollIntervalMs` for `record` now: the tool's interval, or with `adaptive_max_ms`, a
    tenth of the task's age between the tool's interval and that bound."""
    base = record.poll_interval_ms or 1000
    if adaptive_max_ms is None or record.terminal:
        return base
    age_ms = (time.time() - record.created_at) * 1000.0
    return int(min(adaptive_max_ms, max(base, age_ms / 10.0)))


class PollMarks:
    """When each task was last polled (on this engine), to hold back or refuse early polls."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    async def throttle(self, task_id: str, minimum: float, limit: PollLimit) -> None:
        """Mark a poll of `task_id`; one sooner than `minimum` seconds after the last waits for
        the rest (`"delay"`) or raises `PollTooFast` (`"reject"`)."""
        now = anyio.current_time()
        last = self._last.get(task_id)
        if last is not None and now - last < minimum:
            wait = minimum - (now - last)
            if limit == "reject":
                raise PollTooFast(task_id, math.ceil(wait * 1000))
            await anyio.sleep(wait)
        self._last[task_id] = anyio.current_time()

    def forget_stale(self) -> None:
        """Forget the tasks not polled for `FORGET_AFTER` seconds."""
        horizon = anyio.current_time() - FORGET_AFTER
        for task_id in [t for t, seen in self._last.items() if seen < horizon]:
            del self._last[task_id]
