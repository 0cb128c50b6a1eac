"""`Limits`: the bounds that keep one tool or one client from hurting the server or other tasks."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from mcptasks.errors import ProtocolError

TOO_MANY_TASKS = -32000
"""JSON-RPC error code of a create refused by `max_active_per_owner` / `max_active`."""


_COUNTS = frozenset(
    {
        "max_active_per_owner",
        "max_active",
        "max_result_bytes",
        "max_status_length",
        "max_input_requests",
        "threads",
        "max_unwritten_results",
    }
)


@dataclass(frozen=True)
class Limits:
    """Bounds on what tasks may use; pass one as `EngineConfig(limits=...)`.

    - `max_active_per_owner` / `max_active`: running tasks one owner / this server may have at
      once (None: unbounded). A create over either gets error -32000 with `data.retryAfterMs`
      and no task is created.
    - `retry_after`: the seconds suggested to a refused client.
    - `max_result_bytes`: the largest result (as JSON) a task may end with; over it the task fails.
    - `max_status_length`: longer status messages are cut to this many characters (ending in "…").
    - `max_input_requests`: input requests one task may have outstanding at once; a yield that
      would go over it raises `InvalidValue` in the body.
    - `status_interval`: at most one status write per task per this many seconds; statuses
      yielded in between are coalesced (the last one wins and is written when the interval ends).
    - `threads`: worker threads shared by all `def` bodies (more wait for a free one).
    - `blocking_threshold`: seconds an `async def` body may hold the event loop before a warning
      is logged (None: no watchdog).
    - `cancel_grace`: seconds a body may keep running after it was cancelled before a warning
      names it; shutdown waits at most this long for such bodies.
    - `max_unwritten_results`: immediate results answered before their records are in the store
      (at most this many at once; more wait for their write). 0: every immediate result waits
      until its record is stored.
    """

    max_active_per_owner: int | None = 1000
    max_active: int | None = 10_000
    retry_after: float = 5.0
    max_result_bytes: int = 16 * 1024 * 1024
    max_status_length: int = 4096
    max_input_requests: int = 64
    status_interval: float = 0.1
    threads: int = 32
    blocking_threshold: float | None = 1.0
    cancel_grace: float = 10.0
    max_unwritten_results: int = 256

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.name in ("max_active_per_owner", "max_active", "blocking_threshold"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"Limits.{spec.name} must be a finite number, got {value!r}")
            if spec.name in _COUNTS and not isinstance(value, int):
                raise ValueError(f"Limits.{spec.name} must be a whole number, got {value!r}")
            if spec.name in ("status_interval", "max_unwritten_results") and value == 0:
                continue
            if value <= 0:
                raise ValueError(f"Limits.{spec.name} must be positive, got {value!r}")


class TooManyTasks(ProtocolError):
    """A create refused because the owner or the server has too many running tasks."""

    def __init__(self, scope: str, limit: int, retry_after_ms: int) -> None:
        who = "you have" if scope == "owner" else "this server has"
        super().__init__(
            TOO_MANY_TASKS,
            f"Too many active tasks: {who} {limit} running (the limit); retry in {retry_after_ms} ms "
            "or after some finish",
            {"retryAfterMs": retry_after_ms, "limit": limit, "scope": scope},
        )
        self.retry_after_ms = retry_after_ms
