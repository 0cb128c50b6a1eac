"""`Wakeups`: one engine duty that sets events at given times, instead of a timer per waiter."""

from __future__ import annotations

import heapq
import itertools
from typing import Any

import anyio

Wakeup = list[Any]
"""A scheduled wake-up, `[when, order, event or None once cancelled]` (lists order as the heap needs)."""


class Wakeups:
    """Sets each scheduled event at its time (the anyio clock); `run_forever` is the engine's duty.

    A body waiting for input re-reads its record every `input_poll_interval` unless woken sooner;
    scheduling its wake-up here costs a heap entry instead of a cancel scope with its own timer.
    """

    def __init__(self) -> None:
        self._due: list[Wakeup] = []
        self._order = itertools.count()
        self._cancelled = 0
        self._wakeup: anyio.Event | None = None

    def __len__(self) -> int:
        """How many wake-ups are scheduled and not cancelled."""
        return len(self._due) - self._cancelled

    def set_at(self, when: float, event: anyio.Event) -> Wakeup:
        """Set `event` at `when` (`anyio.current_time()` clock); `cancel` the result to forget it."""
        entry: Wakeup = [when, next(self._order), event]
        heapq.heappush(self._due, entry)
        if self._due[0] is entry and self._wakeup is not None:
            self._wakeup.set()
        return entry

    def cancel(self, entry: Wakeup) -> None:
        """Forget a wake-up that is no longer needed (its wait ended); harmless once it fired."""
        if entry[2] is None:
            return
        entry[2] = None
        self._cancelled += 1
        if self._cancelled > 64 and self._cancelled * 2 > len(self._due):
            self._due = [entry for entry in self._due if entry[2] is not None]
            heapq.heapify(self._due)
            self._cancelled = 0

    async def run_forever(self) -> None:
        """Sleep until the earliest wake-up (or an earlier one is scheduled), set it, repeat."""
        while True:
            wakeup = self._wakeup = anyio.Event()
            deadline = self._due[0][0] if self._due else float("inf")
            with anyio.CancelScope(deadline=deadline):
                await wakeup.wait()
            now = anyio.current_time()
            while self._due and self._due[0][0] <= now:
                entry = heapq.heappop(self._due)
                event, entry[2] = entry[2], None
                if event is None:
                    self._cancelled -= 1
                else:
                    event.set()
