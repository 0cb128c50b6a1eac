"""Run `def` bodies (functions and generators) in worker threads, so blocking code never holds
the event loop.

A `def` generator is stepped one `yield` at a time in a worker thread: between yields (while the
task waits for input, say) it holds no thread. Cancellation reaches it at its next `yield` as
`CancelRequested`, and meanwhile through `TaskContext.cancelled` / `check_cancelled()`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from typing import Any

import anyio
import anyio.to_thread
from anyio import CapacityLimiter

from mcptasks.errors import MCPTasksError


class CancelRequested(MCPTasksError):
    """The task was cancelled (or the server is shutting down): raised in a body by
    `TaskContext.check_cancelled()`, and at the `yield` of a `def` generator being stopped."""

    def __init__(self, message: str = "the task was cancelled") -> None:
        super().__init__(message)


class _Stopped:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _resume(step: Callable[..., Any], argument: Any) -> Any:
    try:
        return step(argument)
    except StopIteration as stop:  # cannot cross an await: PEP 479 would turn it into RuntimeError
        return _Stopped(stop.value)


class ThreadedGenerator:
    """A `def` generator seen as an async generator; each step runs in a worker thread."""

    def __init__(self, generator: Generator[Any, Any, Any], limiter: CapacityLimiter) -> None:
        self._generator = generator
        self._limiter = limiter
        self.__qualname__ = getattr(generator, "__qualname__", "generator")

    def __aiter__(self) -> ThreadedGenerator:
        return self

    async def _step(self, step: Callable[..., Any], argument: Any, *, shield: bool = False) -> Any:
        with anyio.CancelScope(shield=shield):
            result = await anyio.to_thread.run_sync(_resume, step, argument, limiter=self._limiter)
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
    function: Callable[..., Any], kwargs: dict[str, Any], limiter: CapacityLimiter
) -> Any:
    """Call a `def` function in a worker thread; the task waits for it (cancellation included)."""
    return await anyio.to_thread.run_sync(functools.partial(function, **kwargs), limiter=limiter)
