"""`Wakeups`: one engine duty that sets events at given times, instead of a timer per waiter."""

from __future__ import annotations

import heapq
import itertools

import anyio


class Wakeups:
    """Sets each scheduled event at its time (the anyio clock); `run_forever` is the engine's duty.

    A body waiting for input re-reads its record every `input_poll_interval` unless woken sooner;
    scheduling its wake-up here costs a heap entry instead of a cancel scope with its own timer.
    """

    def __init__(self) -> None:
        self._due: list[tuple[float, int, anyio.Event]] = []
        self._order = itertools.count()
        self._wakeup: anyio.Event | None = None

    def __len__(self) -> int:
        """How many wake-ups are scheduled (some may be for waits that already ended)."""
        return len(self._due)

    def set_at(self, when: float, event: anyio.Event) -> None:
        """Set `event` at `when` (`anyio.current_time()` clock), unless it was set before."""
        entry = (when, next(self._order), event)
        heapq.heappush(self._due, entry)
        if self._due[0] is entry and self._wakeup is not None:
            self._wakeup.set()

    async def run_forever(self) -> None:
        """Sleep until the earliest wake-up (or an earlier one is scheduled), set it, repeat."""
        while True:
            wakeup = self._wakeup = anyio.Event()
            deadline = self._due[0][0] if self._due else float("inf")
            with anyio.CancelScope(deadline=deadline):
                await wakeup.wait()
            now = anyio.current_time()
            while self._due and self._due[0][0] <= now:
                heapq.heappop(self._due)[2].set()
