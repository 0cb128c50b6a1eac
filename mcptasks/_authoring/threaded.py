"""Run `def` bodies (functions and generators) in worker threads, so blocking code never holds
the event loop.

A `def` generator is stepped one `yield` at a time in a worker thread: between yields (while the
task waits for input, say) it holds no thread. Cancellation reaches it at its next `yield` as
`CancelRequested`, and meanwhile through `TaskContext.cancelled` / `check_cancelled()`.

The threads are bounded twice: `threads` in all, and a share per owner (`OwnerThreads`). A body
over its owner's share waits for one of that owner's threads (it is not refused: it was admitted
already), while the threads left stay free for the bodies of other owners.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Generator
from typing import Any

import anyio
import anyio.to_thread
from anyio import CapacityLimiter

from mcptasks.errors import CancelRequested as CancelRequested


class _Stopped:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _resume(step: Callable[..., Any], argument: Any) -> Any:
    try:
        return step(argument)
    except StopIteration as stop:  # cannot cross an await: PEP 479 would turn it into RuntimeError
        return _Stopped(stop.value)


class ThreadShare:
    """The worker threads one owner's `def` bodies may use: a thread of the shared `pool`, taken
    only once the owner's own limiter (`own`; None: no per-owner share) has a token for it."""

    __slots__ = ("__weakref__", "own", "pool")

    def __init__(self, pool: CapacityLimiter, own: CapacityLimiter | None = None) -> None:
        self.pool = pool
        self.own = own

    async def run_sync(
        self, function: Callable[..., Any], *args: Any, abandon_on_cancel: bool = False
    ) -> Any:
        """Call `function(*args)` in a worker thread once both bounds have room (with
        `abandon_on_cancel`, a cancellation returns at once and leaves the thread to finish)."""
        own = self.own
        if own is None:
            return await anyio.to_thread.run_sync(
                function, *args, limiter=self.pool, abandon_on_cancel=abandon_on_cancel
            )
        borrower = object()  # not the task: one task may step bodies of one owner in turn
        await own.acquire_on_behalf_of(borrower)
        try:
            return await anyio.to_thread.run_sync(
                function, *args, limiter=self.pool, abandon_on_cancel=abandon_on_cancel
            )
        finally:
            own.release_on_behalf_of(borrower)


class OwnerThreads:
    """`threads` worker threads for `def` bodies, at most `per_owner` of them (None: all) held
    by one owner's bodies at once. Create it in the event loop that runs the bodies."""

    def __init__(self, threads: int, per_owner: int | None) -> None:
        self.pool = CapacityLimiter(threads)
        self.per_owner = per_owner if per_owner is not None and per_owner < threads else None
        self._shares: weakref.WeakValueDictionary[str, ThreadShare] = weakref.WeakValueDictionary()
        """Each owner's share while a body of the owner holds it (then it is forgotten)."""
        self._unshared = ThreadShare(self.pool)

    def share(self, owner: str) -> ThreadShare:
        """The threads `owner`'s bodies use (one share for all of them)."""
        if self.per_owner is None:
            return self._unshared
        share = self._shares.get(owner)
        if share is None:
            share = self._shares[owner] = ThreadShare(self.pool, CapacityLimiter(self.per_owner))
        return share


def as_share(limiter: CapacityLimiter | ThreadShare | None) -> ThreadShare:
    """`limiter` as a share (a bare limiter: no per-owner bound; None: anyio's default limiter)."""
    if isinstance(limiter, ThreadShare):
        return limiter
    return ThreadShare(limiter if limiter is not None else anyio.to_thread.current_default_thread_limiter())


class ThreadedGenerator:
    """A `def` generator seen as an async generator; each step runs in a worker thread."""

    def __init__(self, generator: Generator[Any, Any, Any], limiter: CapacityLimiter | ThreadShare) -> None:
        self._generator = generator
        self._limiter = as_share(limiter)
        self.__qualname__ = getattr(generator, "__qualname__", "generator")

    def __aiter__(self) -> ThreadedGenerator:
        return self

    async def _step(self, step: Callable[..., Any], argument: Any, *, shield: bool = False) -> Any:
        with anyio.CancelScope(shield=shield):
            result = await self._limiter.run_sync(_resume, step, argument)
        if isinstance(result, _Stopped):
            raise StopAsyncIteration
        return result

    async def __anext__(self) -> Any:
        return await self._step(self._generator.send, None)

    async def asend(self, value: Any) -> Any:
        """Resume the generator with `value` (in a worker thread)."""
        return await self._step(self._generator.send, value)

    async def athrow(self, error: BaseException, *_: Any) -> Any:
        """Raise `error` at the generator's `yield`; a cancellation arrives as `CancelRequested`."""
        if isinstance(error, anyio.get_cancelled_exc_class()):
            error = CancelRequested()
        return await self._step(self._generator.throw, error, shield=True)

    async def aclose(self) -> None:
        """Close the generator (its `finally:` blocks run in a worker thread)."""
        await self._step(lambda _: self._generator.close(), None, shield=True)


async def run_in_thread(
    function: Callable[..., Any], kwargs: dict[str, Any], limiter: CapacityLimiter | ThreadShare
) -> Any:
    """Call a `def` function in a worker thread; the task waits for it (cancellation included)."""
    return await as_share(limiter).run_sync(functools.partial(function, **kwargs))
