"""`Limits`: the bounds that keep one tool or one client from hurting the server or other tasks."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Final, Literal

from mcptasks.errors import TooManyTasks as TooManyTasks

TOO_MANY_TASKS = -32000
"""JSON-RPC error code of a create refused by `max_active_per_owner` / `max_active`."""

SHARE: Final = "share"
"""The default of a per-owner bound: a fixed fraction of its process bound (`_SHARE_OF`)."""

_SHARE_OF = {
    "max_active_per_owner": 10,
    "max_parked_per_owner": 10,
    "threads_per_owner": 2,
    "max_listen_streams_per_owner": 4,
}
"""Each per-owner bound left at `SHARE` is its process bound divided by this (at least 1)."""


_COUNTS = frozenset(
    {
        "max_active_per_owner",
        "max_active",
        "max_result_bytes",
        "max_status_length",
        "max_input_requests",
        "threads",
        "max_unwritten_results",
        "max_parked_per_owner",
        "threads_per_owner",
        "max_listen_streams",
        "max_listen_streams_per_owner",
        "max_journal_entries",
        "max_journal_entry_bytes",
        "max_journal_bytes",
        "max_journal_bytes_per_owner",
    }
)


@dataclass(frozen=True)
class Limits:
    """Bounds on what tasks may use; pass one as `EngineConfig(limits=...)`.

    - `max_active_per_owner` / `max_active`: running tasks one owner / this server may have at
      once (None: unbounded). A create over either gets error -32000 with `data.retryAfterMs`
      and no task is created. The per-owner default `"share"` is a tenth of `max_active`. When
      bodies run elsewhere (`--enqueue-only`, an executor), the per-owner bound counts the
      owner's active tasks in the store, queued or running on any worker (`CountsActive`).
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
    - `max_parked_per_owner`: inline calls of one owner kept waiting at a question between their
      rounds (of `EngineConfig.parked_limit` in all); default `"share"`: a tenth of it.
    - `threads_per_owner`: worker threads one owner's `def` bodies may hold at once (of
      `threads`); its other bodies wait, the threads left stay free for other owners. Default
      `"share"`: half of `threads`.
    - `max_listen_streams` / `max_listen_streams_per_owner`: task listen streams
      (`subscriptions/listen` with `taskIds`) this process / one owner may hold open at once; one
      more is refused with -32603 naming the bound. Default `"share"`: a quarter of
      `max_listen_streams`.
    - `max_journal_entries` / `max_journal_entry_bytes` / `max_journal_bytes`: the bounds of a
      durable body's journal (`durable=True`): entries (a step is one, a question two), the JSON
      of one step's value (over it the step fails with `StepFailed`; answers are bounded by the
      request size), and all entries together.
      A body whose journal is full fails (-32603, `data.reason: "journal_full"`).
    - `max_journal_bytes_per_owner`: bytes of journal the running durable tasks of one owner may
      hold together on this engine (None: no bound); an entry that would go over fails its task
      the same way (`journal_full`, naming this bound).

    A per-owner bound is a whole number, None (no per-owner bound) or `"share"` (the default: a
    fraction of its process bound, at least 1), so one owner never takes all of a resource
    unless configured to; a whole number above its process bound raises `ValueError`.
    """

    max_active_per_owner: int | Literal["share"] | None = SHARE
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
    max_parked_per_owner: int | Literal["share"] | None = SHARE
    threads_per_owner: int | Literal["share"] | None = SHARE
    max_listen_streams: int = 1024
    max_listen_streams_per_owner: int | Literal["share"] | None = SHARE
    max_journal_entries: int = 10_000
    max_journal_entry_bytes: int = 1024 * 1024
    max_journal_bytes: int = 16 * 1024 * 1024
    max_journal_bytes_per_owner: int | None = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.name in (
                "max_active",
                "blocking_threshold",
                "max_journal_bytes_per_owner",
                *_SHARE_OF,
            ):
                continue
            if spec.name in _SHARE_OF and isinstance(value, str):
                _check_share_name(spec.name, value)
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"Limits.{spec.name} must be a finite number, got {value!r}")
            if spec.name in _COUNTS and not isinstance(value, int):
                raise ValueError(f"Limits.{spec.name} must be a whole number, got {value!r}")
            if spec.name in ("status_interval", "max_unwritten_results") and value == 0:
                continue
            if value <= 0:
                raise ValueError(f"Limits.{spec.name} must be positive, got {value!r}")
        for name, bound in (
            ("max_active_per_owner", "max_active"),
            ("threads_per_owner", "threads"),
            ("max_listen_streams_per_owner", "max_listen_streams"),
        ):
            share, total = getattr(self, name), getattr(self, bound)
            if isinstance(share, int) and total is not None and share > total:
                raise ValueError(
                    f"Limits.{name} ({share}) must not be above Limits.{bound} ({total}); "
                    f"set it to {total} to let one owner use all of it"
                )

    @property
    def active_share(self) -> int | None:
        """Running tasks one owner may have: `max_active_per_owner` with `"share"` resolved."""
        return _resolve(self.max_active_per_owner, self.max_active, "max_active_per_owner")

    @property
    def thread_share(self) -> int | None:
        """Worker threads one owner's `def` bodies may hold: `threads_per_owner` resolved."""
        return _resolve(self.threads_per_owner, self.threads, "threads_per_owner")

    @property
    def listen_share(self) -> int:
        """Task listen streams one owner may hold: `max_listen_streams_per_owner` resolved (None:
        all of `max_listen_streams`)."""
        share = _resolve(
            self.max_listen_streams_per_owner, self.max_listen_streams, "max_listen_streams_per_owner"
        )
        return self.max_listen_streams if share is None else share

    def parked_share(self, parked_limit: int) -> int | None:
        """Inline calls one owner may keep parked of `parked_limit` (`max_parked_per_owner`
        resolved; never above `parked_limit`)."""
        share = _resolve(self.max_parked_per_owner, parked_limit, "max_parked_per_owner")
        return None if share is None else min(share, parked_limit)


def _check_share_name(name: str, value: str) -> None:
    if value != SHARE:
        raise ValueError(f"Limits.{name} must be a positive whole number, None or 'share', got {value!r}")


def _resolve(share: int | str | None, total: int | None, name: str) -> int | None:
    """A per-owner bound: `share` itself, or for `"share"` its fraction of `total` (at least 1)."""
    if share != SHARE:
        assert not isinstance(share, str)
        return share
    return None if total is None else default_share(name, total)


def default_share(name: str, total: int) -> int:
    """The per-owner bound `name` left at `"share"` comes to for a process bound of `total`."""
    return max(1, total // _SHARE_OF[name])


def reached(scope: str, limit: int, what: str) -> str:
    """How a refusal names the bound it hit: "you have reached the per-owner limit of N <what>"
    (`scope` "owner") or "this server has reached the server limit of N <what>"."""
    who = "you have reached the per-owner" if scope == "owner" else "this server has reached the server"
    return f"{who} limit of {limit} {what}"
