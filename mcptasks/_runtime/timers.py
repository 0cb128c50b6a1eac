"""`TimerHeap`: timed entries for an engine duty that sleeps until the earliest one is due.

`Retention` (record expiry, wall clock) and `Wakeups` (input polls, anyio clock) each keep one.
Entries are cancelled lazily: their owner marks an entry dead its own way (`Timer.live`) and calls
`cancelled`; a dead entry is dropped when it comes due, or by a compaction once dead entries are
more than `COMPACT_AFTER` and half the heap. The owner's duty sleeps in `sleep`, which an entry
pushed ahead of the earliest one cuts short, then takes what is due with `take_due`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio

COMPACT_AFTER = 64
"""How many dead entries a heap keeps before it may be rebuilt without them."""


class Timer:
    """An entry due `at` (on its heap's clock); entries order by `at` alone."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at

    def __lt__(self, other: Timer) -> bool:
        return self.at < other.at

    @property
    def live(self) -> bool:
        """Whether the entry still counts (False once its owner cancelled or replaced it)."""
        return True


T = TypeVar("T", bound=Timer)


class TimerHeap(Generic[T]):
    """A heap of `Timer`s, earliest first, with lazy cancellation."""

    __slots__ = ("_dead", "_heap", "_wakeup")

    def __init__(self) -> None:
        self._heap: list[T] = []
        self._dead = 0
        """Entries in `_heap` that are no longer `live`."""
        self._wakeup: anyio.Event | None = None

    def __len__(self) -> int:
        """How many live entries the heap holds."""
        return len(self._heap) - self._dead

    @property
    def held(self) -> int:
        """How many entries the heap holds, dead ones included (compaction bounds it)."""
        return len(self._heap)

    def push(self, timer: T) -> None:
        """Add `timer`; a duty sleeping in `sleep` wakes when it is the earliest now."""
        heapq.heappush(self._heap, timer)
        if self._heap[0] is timer and self._wakeup is not None:
            self._wakeup.set()

    def cancelled(self) -> None:
        """Count one pushed entry as dead (its owner made it not `live`); compact past the limit."""
        self._dead += 1
        if self._dead > COMPACT_AFTER and self._dead * 2 > len(self._heap):
            self._heap = [timer for timer in self._heap if timer.live]
            heapq.heapify(self._heap)
            self._dead = 0

    def take_due(self, now: float) -> list[T]:
        """Remove the entries due at `now`; return the live ones, earliest first."""
        heap = self._heap
        taken: list[T] = []
        while heap and heap[0].at <= now:
            timer = heapq.heappop(heap)
            if timer.live:
                taken.append(timer)
            else:
                self._dead -= 1
        return taken

    async def sleep(self, clock: Callable[[], float]) -> None:
        """Return when the earliest entry is due on `clock` (at once when it is), or sooner when
        an earlier one is pushed meanwhile."""
        wakeup = self._wakeup = anyio.Event()
        delay = self._heap[0].at - clock() if self._heap else math.inf
        if delay > 0:
            with anyio.move_on_after(delay):
                await wakeup.wait()
