"""Riding out a store outage.

A store that is briefly unreachable (a Redis or PostgreSQL restart, a network blip) is not a
crash. A running task's own store calls (waiting for input, saving a checkpoint, recording its
end) are retried with backoff for a bounded time (`StoreRetry`); a client request that reaches the
store during an outage gets a clear JSON-RPC error at once (`store_unavailable_error`), never a
hang. Which exceptions mean "unreachable" is the store's to say: a store may list them in an
`outage_errors` attribute (the Redis and PostgreSQL stores do); otherwise `OSError` (connection
refused, reset, ...) and `TimeoutError` count.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

from mcptasks.errors import ProtocolError
from mcptasks.wire import INTERNAL_ERROR

__all__ = [
    "DEFAULT_OUTAGE_ERRORS",
    "STORE_UNAVAILABLE",
    "StoreRetry",
    "gave_up",
    "outage_errors",
    "reported_as_unavailable",
    "store_unavailable_error",
]

T = TypeVar("T")

logger = logging.getLogger("mcptasks")

DEFAULT_OUTAGE_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError)
"""What counts as "the store is unreachable" for a store that declares no `outage_errors`."""

STORE_UNAVAILABLE = "store_unavailable"
"""`error.data.reason` of requests and tasks that failed because the store could not be reached."""


def outage_errors(store: object) -> tuple[type[BaseException], ...]:
    """The exception types that mean `store` is unreachable (its `outage_errors`, or the defaults)."""
    declared = getattr(store, "outage_errors", None)
    return tuple(declared) if declared else DEFAULT_OUTAGE_ERRORS


def describe(exc: BaseException) -> str:
    """`Type: message` of an exception, for error messages and logs."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def store_unavailable_error(exc: BaseException, *, retry_after_ms: int = 1000) -> ProtocolError:
    """The JSON-RPC error a request gets while the store cannot be reached."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"The task store is unreachable ({describe(exc)}); try again shortly.",
        {"reason": STORE_UNAVAILABLE, "retryAfterMs": retry_after_ms},
    )


class reported_as_unavailable:
    """Turn an unreachable store (one of `errors`) into `store_unavailable_error` for a request
    (`with reported_as_unavailable(errors): ...`; a class, as it wraps every `tasks/*` request)."""

    __slots__ = ("_errors",)

    def __init__(self, errors: tuple[type[BaseException], ...]) -> None:
        self._errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if exc is not None and isinstance(exc, self._errors):
            raise store_unavailable_error(exc) from exc


@dataclass(frozen=True, slots=True)
class StoreRetry:
    """How a running task's store calls ride out an outage.

    A failed call is retried after `initial` seconds, the pause doubling up to `maximum`, for at
    most `budget` seconds from the first failure. When the budget is spent, a body's call fails
    the task (`data.reason: "store_unavailable"`); a task's end that could not be recorded is
    kept in memory and written as soon as the store answers again.
    """

    budget: float = 60.0
    initial: float = 0.1
    maximum: float = 2.0

    def __post_init__(self) -> None:
        if not (self.budget >= 0 and self.initial > 0 and self.maximum >= self.initial):
            raise ValueError("StoreRetry needs budget >= 0 and 0 < initial <= maximum")

    async def run(
        self, call: Callable[[], Awaitable[T]], *, errors: tuple[type[BaseException], ...], what: str
    ) -> T:
        """`await call()`, retried on `errors` until it succeeds or the budget is spent (then the
        last error propagates). `what` names the call in the log."""
        delay = self.initial
        deadline: float | None = None
        while True:
            try:
                return await call()
            except errors as exc:
                now = anyio.current_time()
                if deadline is None:
                    deadline = now + self.budget
                    logger.warning("task store unreachable while %s (%s); retrying", what, describe(exc))
                if now + delay > deadline:
                    raise
            await anyio.sleep(delay)
            delay = min(delay * 2, self.maximum)


def gave_up(exc: BaseException, retry: StoreRetry, what: str) -> ProtocolError:
    """The error that fails a task whose store stayed unreachable for the whole retry budget."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"The task store stayed unreachable for {retry.budget:g} s while {what} ({describe(exc)}).",
        {"reason": STORE_UNAVAILABLE},
    )
