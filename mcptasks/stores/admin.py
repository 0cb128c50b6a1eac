"""Operator queries over a store: filtered listing with paging, statistics, purge.

`AdminStore` is the protocol of these queries, and the shapes below are what they take and
return. They serve operators (the admin CLI, the dashboard), never MCP clients: a listing crosses
owners. The helpers at the bottom implement the operations over an in-memory sequence of records,
for stores that cannot push the filters down (memory, Redis).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mcptasks.stores.record import TaskRecord
from mcptasks.wire import ACTIVE_STATUSES, TERMINAL_STATUSES

__all__ = [
    "AdminStore",
    "MAX_PAGE",
    "RunnerLease",
    "SqlFilter",
    "TaskPage",
    "TaskQuery",
    "TaskStats",
    "check_journal_append",
    "check_limit",
    "check_purge",
    "decode_cursor",
    "encode_cursor",
    "is_tool_error",
    "journal_gap",
    "page_of",
    "split_page",
    "stats_from_rows",
    "stats_of",
]

MAX_PAGE = 1000
"""Most records one `list_tasks` call returns (a larger `limit` is capped)."""

_STATUSES = frozenset(ACTIVE_STATUSES) | frozenset(TERMINAL_STATUSES)


def is_tool_error(record: TaskRecord) -> bool:
    """Whether `record` completed with a tool error: its result says `isError: true` (the task
    is `completed`, not `failed`: a tool error is the tool's answer, not a task failure)."""
    return (
        record.status == "completed"
        and isinstance(record.result, dict)
        and record.result.get("isError") is True
    )


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """Which records `list_tasks` returns; every field left `None` matches everything."""

    statuses: frozenset[str] | None = None
    """Only records in one of these statuses."""
    tools: frozenset[str] | None = None
    """Only records of one of these tools."""
    owner: str | None = None
    """Only records of this owner (exact match)."""
    since: float | None = None
    """Only records created at or after this time (epoch seconds)."""
    tool_error: bool | None = None
    """True: only records that completed with a tool error (`is_tool_error`); False: only the
    others; None: both. Stores written before this field existed ignore it: filter their pages
    with `matches` when that matters."""

    def __post_init__(self) -> None:
        if self.statuses is not None:
            unknown = set(self.statuses) - _STATUSES
            if unknown:
                raise ValueError(
                    f"unknown task status {', '.join(sorted(unknown))}; known: {', '.join(sorted(_STATUSES))}"
                )

    def matches(self, record: TaskRecord) -> bool:
        """Whether `record` passes every filter."""
        return (
            (self.statuses is None or record.status in self.statuses)
            and (self.tools is None or record.tool in self.tools)
            and (self.owner is None or record.owner == self.owner)
            and (self.since is None or record.created_at >= self.since)
            and (self.tool_error is None or is_tool_error(record) is self.tool_error)
        )


@dataclass(frozen=True, slots=True)
class TaskPage:
    """One page of a listing, newest first; pass `next_cursor` back as `after` for the next."""

    records: list[TaskRecord]
    next_cursor: str | None = None
    """Opaque; None when this is the last page."""


@dataclass(frozen=True, slots=True)
class RunnerLease:
    """A live engine instance: when its heartbeat lease ends and how many active tasks it holds."""

    expires_at: float
    active_tasks: int = 0


@dataclass(frozen=True, slots=True)
class TaskStats:
    """A snapshot of a store for operators (expired records are not counted)."""

    by_status: dict[str, int] = field(default_factory=dict)
    by_tool: dict[str, dict[str, int]] = field(default_factory=dict)
    """tool -> status -> count."""
    oldest_active: float | None = None
    """`created_at` of the oldest working / input_required record."""
    queued: int = 0
    """Active records no runner has claimed yet (the worker queue's depth)."""
    runners: dict[str, RunnerLease] = field(default_factory=dict)
    """The live runners (unexpired heartbeat)."""
    tool_errors: int | None = None
    """Records that completed with a tool error (`is_tool_error`; also counted as `completed`);
    None when the store does not count them (a store written before this field existed)."""

    @property
    def total(self) -> int:
        """How many records are counted."""
        return sum(self.by_status.values())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {
            "total": self.total,
            "by_status": dict(self.by_status),
            "by_tool": {tool: dict(counts) for tool, counts in self.by_tool.items()},
            "oldest_active": self.oldest_active,
            "queued": self.queued,
            "tool_errors": self.tool_errors,
            "runners": {
                name: {"expires_at": lease.expires_at, "active_tasks": lease.active_tasks}
                for name, lease in self.runners.items()
            },
        }


def encode_cursor(record: TaskRecord) -> str:
    """The cursor that continues a listing after `record`."""
    raw = json.dumps([record.created_at, record.task_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """`(created_at, task_id)` of the record a cursor continues after; `ValueError` if malformed."""
    try:
        created_at, task_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        if not isinstance(task_id, str) or isinstance(created_at, bool):
            raise TypeError
        return float(created_at), task_id
    except (ValueError, TypeError, UnicodeError) as exc:
        raise ValueError(f"malformed listing cursor {cursor!r}") from exc


def check_limit(limit: int) -> int:
    """`limit` capped at `MAX_PAGE`; `ValueError` when not positive."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    return min(limit, MAX_PAGE)


def check_purge(statuses: Collection[str]) -> frozenset[str]:
    """The statuses a purge may delete: terminal ones only (cancel an active task first)."""
    chosen = frozenset(statuses)
    if not chosen:
        raise ValueError("purge needs at least one status (completed, failed, cancelled)")
    wrong = chosen - frozenset(TERMINAL_STATUSES)
    if wrong:
        raise ValueError(
            f"purge deletes terminal tasks only (completed, failed, cancelled), not {', '.join(sorted(wrong))}: "
            "cancel active tasks first"
        )
    return chosen


def check_journal_append(position: int, entry: str) -> None:
    """The arguments of a `KeepsJournal.append_journal` call: `ValueError` for a position that
    is not a non-negative integer, `TypeError` for an entry that is not text."""
    if isinstance(position, bool) or not isinstance(position, int) or position < 0:
        raise ValueError(f"journal position must be a non-negative integer, got {position!r}")
    if not isinstance(entry, str):
        raise TypeError(f"journal entry must be JSON text (str), got {type(entry).__name__}")


def journal_gap(task_id: str, position: int, length: int | None = None) -> str:
    """The message of the `ValueError` for an append beyond the end of a journal."""
    held = "" if length is None else f" (it holds {length} entries)"
    return f"journal position {position} of task {task_id!r} is beyond the end{held}: append in order"


def page_of(records: Iterable[TaskRecord], query: TaskQuery, limit: int, after: str | None) -> TaskPage:
    """`list_tasks` over records already free of expired ones."""
    limit = check_limit(limit)
    chosen = [r for r in records if query.matches(r)]
    chosen.sort(key=lambda r: (r.created_at, r.task_id), reverse=True)
    if after is not None:
        mark = decode_cursor(after)
        chosen = [r for r in chosen if (r.created_at, r.task_id) < mark]
    return split_page([r.copy() for r in chosen[: limit + 1]], limit)


def stats_of(records: Iterable[TaskRecord], leases: dict[str, float]) -> TaskStats:
    """`stats` over records already free of expired ones and the live runners' lease ends."""
    by_status: dict[str, int] = {}
    by_tool: dict[str, dict[str, int]] = {}
    oldest: float | None = None
    queued = 0
    tool_errors = 0
    held: dict[str, int] = {}
    for record in records:
        by_status[record.status] = by_status.get(record.status, 0) + 1
        tool_errors += is_tool_error(record)
        counts = by_tool.setdefault(record.tool, {})
        counts[record.status] = counts.get(record.status, 0) + 1
        if record.status in ACTIVE_STATUSES:
            oldest = record.created_at if oldest is None else min(oldest, record.created_at)
            if record.runner is None:
                queued += 1
            else:
                held[record.runner] = held.get(record.runner, 0) + 1
    runners = {name: RunnerLease(until, held.get(name, 0)) for name, until in sorted(leases.items())}
    return TaskStats(by_status, by_tool, oldest, queued, runners, tool_errors)


def stats_from_rows(
    counts: Iterable[tuple[str, str, int]],
    oldest_active: float | None,
    queued: int,
    leases: Iterable[tuple[str, float]],
    held: Iterable[tuple[str, int]],
    tool_errors: int | None = None,
) -> TaskStats:
    """`TaskStats` from the aggregate rows SQL stores compute: (tool, status, n), oldest active
    `created_at`, queued count, (runner, lease end), (runner, active tasks held) and the count of
    tool errors."""
    by_status: dict[str, int] = {}
    by_tool: dict[str, dict[str, int]] = {}
    for tool, status, n in counts:
        by_status[status] = by_status.get(status, 0) + int(n)
        by_tool.setdefault(tool, {})[status] = int(n)
    holding = dict(held)
    runners = {name: RunnerLease(float(until), int(holding.get(name, 0))) for name, until in sorted(leases)}
    return TaskStats(
        by_status,
        by_tool,
        oldest_active,
        int(queued),
        runners,
        None if tool_errors is None else int(tool_errors),
    )


class SqlFilter:
    """Builds the WHERE clause of a listing for a SQL store; `mark` renders the n-th parameter
    (`?` for SQLite, `$n` for PostgreSQL); `tool_error` is the store's condition of a row that
    completed with a tool error (`is_tool_error`, read from its JSON body). Without it a query's
    `tool_error` is left out of the clause: filter the page with `TaskQuery.matches` then."""

    def __init__(self, mark: Callable[[int], str], tool_error: str | None = None) -> None:
        self._mark = mark
        self._tool_error = tool_error
        self.params: list[Any] = []
        self.clauses: list[str] = []

    def param(self, value: Any) -> str:
        """Add a parameter; return its placeholder."""
        self.params.append(value)
        return self._mark(len(self.params))

    def listing(self, query: TaskQuery, now: float, after: str | None) -> str:
        """`WHERE ...` selecting the unexpired records `query` matches, after the cursor."""
        self.clauses.append(f"(expires_at IS NULL OR expires_at > {self.param(now)})")
        for column, values in (("status", query.statuses), ("tool", query.tools)):
            if values is not None:
                if not values:
                    self.clauses.append("1 = 0")
                else:
                    marks = ", ".join(self.param(v) for v in sorted(values))
                    self.clauses.append(f"{column} IN ({marks})")
        if query.owner is not None:
            self.clauses.append(f"owner = {self.param(query.owner)}")
        if query.since is not None:
            self.clauses.append(f"created_at >= {self.param(float(query.since))}")
        if query.tool_error is not None and self._tool_error is not None:
            self.clauses.append(self._tool_error if query.tool_error else f"NOT ({self._tool_error})")
        if after is not None:
            created_at, task_id = decode_cursor(after)
            at = self.param(created_at)
            self.clauses.append(
                f"(created_at < {at} OR (created_at = {at} AND task_id < {self.param(task_id)}))"
            )
        return "WHERE " + " AND ".join(self.clauses)


def split_page(records: list[TaskRecord], limit: int) -> TaskPage:
    """A page from up to `limit + 1` records fetched newest first."""
    if len(records) > limit:
        return TaskPage(records[:limit], encode_cursor(records[limit - 1]))
    return TaskPage(records)


@runtime_checkable
class AdminStore(Protocol):
    """What the operator tools (admin CLI, dashboard, metrics) ask of a store, across owners.
    The engine never uses it. Every shipped store implements it; `StoreBase` gives defaults
    (`open_existing` is `open`, the queries raise `UnsupportedByStore`)."""

    async def open_existing(self, *, migrate: bool = False) -> None:
        """Open a store that already holds mcptasks data, creating nothing: `StoreNotFound` when
        there is none; an older schema is migrated with `migrate`, else `SchemaVersionError`."""

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """Unexpired records matching `query`, newest first (`created_at`, then `task_id`,
        descending), at most `limit` (capped at `MAX_PAGE`); `after` is a previous page's
        `next_cursor`. `ValueError` for a malformed cursor or a limit below 1."""

    async def stats(self) -> TaskStats:
        """Counts of unexpired records by status and by tool, the oldest active record's
        `created_at`, the queue depth, and the live runners with their lease ends."""

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """Delete terminal records in `statuses` last updated before `older_than` (epoch
        seconds); return how many. `ValueError` when `statuses` names an active status."""
