"""`Retention`: one engine duty that keeps the records of all running bodies from expiring.

A task's `ttl` is how long its record is kept, not a deadline for its body: shortly before the
record of a body still running would expire, its expiry is moved to one `ttl` from now. One
coroutine does this for every run on the engine, sleeping until the earliest renewal is due,
instead of one sleeping coroutine per run.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

import anyio

from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.timers import Timer, TimerHeap

logger = logging.getLogger("mcptasks")

RENEWERS = 32
"""How many renewals due at the same moment are written concurrently."""


def margin_of(ttl_ms: int) -> float:
    """How long (seconds) before the record would expire its expiry is moved."""
    return min(ttl_ms / 2000, 30.0)


class _Due(Timer):
    """A renewal due `at` (wall clock, `time.time()`); dead once `run.renew_at` moved on."""

    __slots__ = ("run", "ttl_ms")

    def __init__(self, at: float, run: TaskRun, ttl_ms: int) -> None:
        self.at = at
        self.run = run
        self.ttl_ms = ttl_ms

    @property
    def live(self) -> bool:
        """Whether this is still the run's scheduled renewal."""
        return self.run.renew_at == self.at


class Retention:
    """Renews the expiry of running bodies' records; `run_forever` is the engine's duty.

    Renewals are written through the run (`TaskRun.renew`), so they are compare-and-set writes
    of the run's own record; a failed renewal is retried `margin / 2` later, and a run that
    ended (or whose task ended) is dropped.
    """

    def __init__(self, hosts: Callable[[TaskRun], bool]) -> None:
        self._hosts = hosts
        self._timers: TimerHeap[_Due] = TimerHeap()
        self._ready: deque[_Due] = deque()
        """Renewals due now, earliest first, waiting for a renewer."""
        self._renewers = 0

    def __len__(self) -> int:
        """How many runs have a renewal scheduled."""
        return len(self._timers)

    def keep(self, run: TaskRun, ttl_ms: int) -> None:
        """Keep `run`'s record (expiring at `run.expires_at`) until the run is forgotten."""
        if run.expires_at is not None:
            self._schedule(run, run.expires_at - margin_of(ttl_ms), ttl_ms)

    def forget(self, run: TaskRun) -> None:
        """Stop renewing `run`'s record (its body ended)."""
        if run.renew_at is None:
            return
        run.renew_at = None
        self._timers.cancelled()

    def _schedule(self, run: TaskRun, at: float, ttl_ms: int) -> None:
        superseded = run.renew_at is not None
        run.renew_at = at
        if superseded:
            self._timers.cancelled()  # after `renew_at` moved: a compaction drops the old entry
        self._timers.push(_Due(at, run, ttl_ms))

    def _take_due(self, now: float) -> list[_Due]:
        taken = self._timers.take_due(now)
        for entry in taken:
            entry.run.renew_at = None
        return [entry for entry in taken if self._hosts(entry.run)]

    async def run_forever(self) -> None:
        """Sleep until the earliest renewal is due (or an earlier one is scheduled), hand the due
        ones to renewers (at most `RENEWERS` at once, while this goes on scheduling), repeat."""
        async with anyio.create_task_group() as renewers:
            while True:
                await self._timers.sleep(time.time)
                self._ready.extend(self._take_due(time.time()))
                while self._ready and self._renewers < RENEWERS:
                    self._renewers += 1
                    renewers.start_soon(self._renew_ready)

    async def _renew_ready(self) -> None:
        try:
            while self._ready:
                await self._renew(self._ready.popleft())
        finally:
            self._renewers -= 1

    async def _renew(self, entry: _Due) -> None:
        run, ttl_ms = entry.run, entry.ttl_ms
        if not self._hosts(run):
            return  # ended while waiting for a renewer
        margin = margin_of(ttl_ms)
        try:
            expires_at = await run.renew(ttl_ms)
        except Exception:
            logger.warning("could not extend the ttl of running task %s", run.task_id, exc_info=True)
            retry_at: float | None = time.time() + margin / 2
        else:
            retry_at = None if expires_at is None else expires_at - margin
        if retry_at is not None and self._hosts(run):
            self._schedule(run, retry_at, ttl_ms)
