"""Riding out store failures.

A store that fails a call (a Redis or PostgreSQL restart, a terminated backend, a full disk, a
network blip, a driver in a bad state) is not a crash, and what a running task produced is not
to be dropped because of it. The rule is the other way round from a whitelist: every store error
is retried, except the ones that say the request itself can never succeed (`permanent_errors`:
a record that violates a constraint, a schema the store does not know). A running task's own
store calls (waiting for input, saving a checkpoint, recording its end) are retried with backoff
(`StoreRetry`); a client request that meets a store failure gets a clear JSON-RPC error at once
(`store_failure_error`), never a hang and never a bare "Internal server error".

A store declares the exception types that are permanent for it in a `permanent_errors`
attribute (`StoreBase.permanent_errors`, empty by default; the SQLite, Redis and PostgreSQL
stores declare theirs); `TypeError` and `ValueError` (a value that cannot be encoded or decoded)
are permanent for every store.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar, cast

import anyio

from mcptasks.errors import MCPTasksError, ProtocolError
from mcptasks.stores.base import StoreBase, TaskStore
from mcptasks.stores.foreign import adopt_store
from mcptasks.wire import INTERNAL_ERROR

__all__ = [
    "DEFAULT_PERMANENT_ERRORS",
    "STORE_REJECTED",
    "STORE_UNAVAILABLE",
    "StoreRetry",
    "describe",
    "disk_full",
    "gave_up",
    "is_permanent",
    "permanent_errors",
    "raised_by",
    "reported_as_unavailable",
    "store_failure_error",
]

T = TypeVar("T")

logger = logging.getLogger("mcptasks")

DEFAULT_PERMANENT_ERRORS: tuple[type[BaseException], ...] = (TypeError, ValueError, NotImplementedError)
"""Store errors that retrying cannot cure, whatever the store: a value it cannot encode or decode."""

STORE_UNAVAILABLE = "store_unavailable"
"""`error.data.reason` of requests and tasks that failed because the store failed or could not be reached."""

STORE_REJECTED = "store_rejected"
"""`error.data.reason` when the store refused a write for good (one of its `permanent_errors`)."""

RETRY_AFTER_MS = 1000
"""The `retryAfterMs` a request met by a store failure is told."""


def permanent_errors(store: object) -> tuple[type[BaseException], ...]:
    """The exception types `store` declares permanent (its `permanent_errors`), with the defaults."""
    adopted = store if isinstance(store, StoreBase) else adopt_store(cast(TaskStore, store))
    return DEFAULT_PERMANENT_ERRORS + adopted.permanent_errors


def is_permanent(exc: BaseException, permanent: tuple[type[BaseException], ...]) -> bool:
    """Whether a store call that raised `exc` must not be retried (our own errors never are)."""
    return isinstance(exc, (*permanent, MCPTasksError)) or not isinstance(exc, Exception)


def describe(exc: BaseException) -> str:
    """`Type: message` of an exception, for error messages and logs."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) says the store's disk is full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        text = f"{type(current).__name__} {current}".lower()
        if "disk is full" in text or "no space left" in text or "diskfull" in text or "disk full" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


def store_failure_error(exc: BaseException, *, permanent: bool = False) -> ProtocolError:
    """The JSON-RPC error a request gets when the store failed it (`permanent`: for good)."""
    if permanent:
        return ProtocolError(
            INTERNAL_ERROR,
            f"The task store refused this request ({describe(exc)}).",
            {"reason": STORE_REJECTED},
        )
    if disk_full(exc):
        message = f"The task store's disk is full ({describe(exc)}); try again once space is freed."
    else:
        message = f"The task store could not serve this request ({describe(exc)}); try again shortly."
    return ProtocolError(
        INTERNAL_ERROR, message, {"reason": STORE_UNAVAILABLE, "retryAfterMs": RETRY_AFTER_MS}
    )


def raised_by(store: object, exc: BaseException) -> bool:
    """Whether `exc` came out of one of `store`'s methods (its traceback passes through the
    module of the store's class or of one it derives from), not out of the code around it."""
    modules = {cls.__module__ for cls in type(store).__mro__} - {"builtins", "typing"}
    traceback = exc.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_globals.get("__name__") in modules:
            return True
        traceback = traceback.tb_next
    return False


class reported_as_unavailable:
    """Turn a failure of `store` into `store_failure_error` for a request (`with
    reported_as_unavailable(store): ...`; a class, as it wraps every `tasks/*` request).

    Only exceptions that came out of the store are translated (whatever their type): errors of
    our own and cancellation pass through. The failure is logged with its traceback.
    """

    __slots__ = ("_store",)

    def __init__(self, store: object) -> None:
        self._store = store

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, MCPTasksError):
            return
        store = self._store
        if not raised_by(store, exc):
            return
        permanent = isinstance(exc, permanent_errors(store))
        logger.debug("a request failed in the task store: %s", describe(exc), exc_info=exc)
        raise store_failure_error(exc, permanent=permanent) from exc


@dataclass(frozen=True, slots=True)
class StoreRetry:
    """How a running task's store calls ride out a failing store.

    A failed call is retried after `initial` seconds, the pause doubling up to `maximum`, for at
    most `budget` seconds from the first failure; errors the store declares permanent are not
    retried. When the budget is spent, a body's call fails the task (`data.reason:
    "store_unavailable"`); a task's end that could not be recorded is kept in memory and written
    as soon as the store answers again.
    """

    budget: float = 60.0
    initial: float = 0.1
    maximum: float = 2.0

    def __post_init__(self) -> None:
        if not (self.budget >= 0 and self.initial > 0 and self.maximum >= self.initial):
            raise ValueError("StoreRetry needs budget >= 0 and 0 < initial <= maximum")

    async def run(
        self, call: Callable[[], Awaitable[T]], *, permanent: tuple[type[BaseException], ...], what: str
    ) -> T:
        """`await call()`, retried on any store error but the `permanent` ones until it succeeds
        or the budget is spent (then the last error propagates). `what` names the call in the log."""
        delay = self.initial
        deadline: float | None = None
        while True:
            try:
                return await call()
            except Exception as exc:
                if is_permanent(exc, permanent):
                    raise
                now = anyio.current_time()
                first = deadline is None
                if deadline is None:
                    deadline = now + self.budget
                if now + delay > deadline:
                    raise
                if first:
                    logger.warning("the task store failed while %s (%s); retrying", what, describe(exc))
            await anyio.sleep(delay)
            delay = min(delay * 2, self.maximum)


def gave_up(exc: BaseException, retry: StoreRetry, what: str) -> ProtocolError:
    """The error that fails a task whose store kept failing for the whole retry budget."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"The task store kept failing for {retry.budget:g} s while {what} ({describe(exc)}).",
        {"reason": STORE_UNAVAILABLE},
    )
