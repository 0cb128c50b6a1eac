"""`Wakeups`: one engine duty that calls actions at given times, instead of a timer per waiter."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from mcptasks._runtime.timers import Timer, TimerHeap


class Wakeup(Timer):
    """A scheduled wake-up: `action` is called at `at` (anyio clock); None once cancelled or done."""

    __slots__ = ("action",)

    def __init__(self, at: float, action: Callable[[], object]) -> None:
        self.at = at
        self.action: Callable[[], object] | None = action

    @property
    def live(self) -> bool:
        """Whether the wake-up is still to happen."""
        return self.action is not None


class Wakeups:
    """Calls each scheduled action at its time (the anyio clock); `run_forever` is the engine's duty.

    A body waiting for input re-reads its record every `input_poll_interval` unless woken sooner;
    scheduling its wake-up here costs a heap entry instead of a cancel scope with its own timer.
    """

    def __init__(self) -> None:
        self._timers: TimerHeap[Wakeup] = TimerHeap()

    def __len__(self) -> int:
        """How many wake-ups are scheduled and not cancelled."""
        return len(self._timers)

    def set_at(self, when: float, action: Callable[[], object]) -> Wakeup:
        """Call `action` (quick, not raising) at `when` (`anyio.current_time()` clock); `cancel`
        the result to forget it."""
        wakeup = Wakeup(when, action)
        self._timers.push(wakeup)
        return wakeup

    def cancel(self, wakeup: Wakeup) -> None:
        """Forget a wake-up that is no longer needed (its wait ended); harmless once it fired."""
        if wakeup.action is None:
            return
        wakeup.action = None
        self._timers.cancelled()

    async def run_forever(self) -> None:
        """Sleep until the earliest wake-up (or an earlier one is scheduled), call it, repeat."""
        timers = self._timers
        while True:
            await timers.sleep(anyio.current_time)
            for wakeup in timers.take_due(anyio.current_time()):
                action, wakeup.action = wakeup.action, None
                if action is not None:
                    action()
