"""`Wakeups`: one engine duty that sets events at given times, instead of a timer per waiter."""

from __future__ import annotations

import anyio

from mcptasks._runtime.timers import Timer, TimerHeap


class Wakeup(Timer):
    """A scheduled wake-up: `event` is set at `at` (anyio clock); None once cancelled or set."""

    __slots__ = ("event",)

    def __init__(self, at: float, event: anyio.Event) -> None:
        self.at = at
        self.event: anyio.Event | None = event

    @property
    def live(self) -> bool:
        """Whether the wake-up is still to happen."""
        return self.event is not None


class Wakeups:
    """Sets each scheduled event at its time (the anyio clock); `run_forever` is the engine's duty.

    A body waiting for input re-reads its record every `input_poll_interval` unless woken sooner;
    scheduling its wake-up here costs a heap entry instead of a cancel scope with its own timer.
    """

    def __init__(self) -> None:
        self._timers: TimerHeap[Wakeup] = TimerHeap()

    def __len__(self) -> int:
        """How many wake-ups are scheduled and not cancelled."""
        return len(self._timers)

    def set_at(self, when: float, event: anyio.Event) -> Wakeup:
        """Set `event` at `when` (`anyio.current_time()` clock); `cancel` the result to forget it."""
        wakeup = Wakeup(when, event)
        self._timers.push(wakeup)
        return wakeup

    def cancel(self, wakeup: Wakeup) -> None:
        """Forget a wake-up that is no longer needed (its wait ended); harmless once it fired."""
        if wakeup.event is None:
            return
        wakeup.event = None
        self._timers.cancelled()

    async def run_forever(self) -> None:
        """Sleep until the earliest wake-up (or an earlier one is scheduled), set it, repeat."""
        timers = self._timers
        while True:
            await timers.sleep(anyio.current_time)
            for wakeup in timers.take_due(anyio.current_time()):
                event, wakeup.event = wakeup.event, None
                if event is not None:
                    event.set()
