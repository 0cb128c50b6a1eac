"""The store contract every backend implements, and the record it stores.

A store keeps `TaskRecord`s. It does not know what a task body is: the engine owns the state
machine and writes every change through `replace`, a compare-and-set on the record's `version`.
Stores enforce the two rules nothing may bypass: a terminal record never changes, and an expired
record is invisible. Wake-ups travel through `publish`/`subscribe`, so an update or cancel received
by one process can reach the body running in another.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from mcptasks.errors import MCPTasksError
from mcptasks.wire import TERMINAL_STATUSES, TaskState, shared_json

if TYPE_CHECKING:
    from collections.abc import Collection

    from mcptasks.stores.admin import TaskPage, TaskQuery, TaskStats

MAX_TRANSITIONS = 50
"""Most entries a record's `transitions` keeps (the first, then the latest)."""

MAX_STATUS_HISTORY = 20
"""Most entries a record's `status_history` keeps (the latest)."""


EMPTY_DICT: dict[str, Any] = shared_json({})
"""The empty dict a record's dict fields start with, one object for every record (records are
values: it is never changed, and changing it in place raises `TypeError`)."""

EMPTY_LIST: list[Any] = shared_json([])
"""The same for `transitions` (an empty list, shared, read-only)."""


_SHARED_EMPTIES: dict[str, Any] = {
    "arguments": EMPTY_DICT,
    "input_requests": EMPTY_DICT,
    "input_responses": EMPTY_DICT,
    "transitions": EMPTY_LIST,
    "status_history": EMPTY_LIST,
}
"""The fields whose empty value is the shared one, however a record is built or evolved."""


def _is_empty(value: object) -> bool:
    """An empty plain dict or list (what `_SHARED_EMPTIES` stands in for)."""
    return (type(value) is dict or type(value) is list) and not value


def _empty_dict() -> dict[str, Any]:
    return EMPTY_DICT


def _empty_list() -> list[Any]:
    return EMPTY_LIST


@dataclass(slots=True)
class TaskRecord:
    """One task as stored. Treat it as a value: build changed copies with `evolve`."""

    task_id: str
    owner: str
    tool: str
    status: TaskState = "working"
    status_message: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    arguments: dict[str, Any] = field(default_factory=_empty_dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=_empty_dict)
    """Outstanding input requests, key -> `{method, params}`."""
    input_responses: dict[str, Any] = field(default_factory=_empty_dict)
    """Answers received for keys the body has not consumed yet."""
    input_key_counter: int = 0
    """How many input keys this task has issued; keys are never reused."""
    runner: str | None = None
    """Identity of the engine instance that runs the body; None while queued for a worker."""
    attempt: int = 1
    """How many times the body has been started (re-runs after a lost worker raise it)."""
    idempotency_key: str | None = None
    """Client-chosen key: a second create with the same (owner, key) returns the first task."""
    checkpoint: Any = None
    """JSON state the body saved with `ctx.checkpoint(...)`; a re-run starts with it (`ctx.saved`)."""
    client_capabilities: dict[str, Any] | None = None
    """The input capabilities (`elicitation`, `sampling`, `roots`) the creating request declared;
    the body may only ask for input through these. None: not restricted."""
    version: int = 0
    # -- operator fields ---------------------------------------------------------------------
    transitions: list[list[Any]] = field(default_factory=_empty_list)
    """Status changes after creation, `[at, status, statusMessage]` each, oldest first (at most
    `MAX_TRANSITIONS`: the first change and the latest ones). `evolve` appends to it."""
    status_history: list[list[Any]] = field(default_factory=_empty_list)
    """The latest `statusMessage` values, `[at, statusMessage]` each, oldest first (at most
    `MAX_STATUS_HISTORY`); `evolve` appends to it when the message changes."""
    trace: dict[str, str] | None = None
    """W3C trace context (`traceparent`, `tracestate`) of the request that created the task, so
    telemetry in any process can link the task's spans to it; None without telemetry."""

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at
        for name, empty in _SHARED_EMPTIES.items():
            if _is_empty(getattr(self, name)):
                setattr(self, name, empty)

    @property
    def terminal(self) -> bool:
        """Whether the task reached `completed`, `failed` or `cancelled`."""
        return self.status in TERMINAL_STATUSES

    @property
    def expires_at(self) -> float | None:
        """Epoch seconds after which the record may be deleted (`None`: never)."""
        if self.ttl_ms is None:
            return None
        return self.created_at + self.ttl_ms / 1000.0

    def expired(self, now: float) -> bool:
        """Whether the record's TTL has elapsed at `now`."""
        expires_at = self.expires_at
        return expires_at is not None and now >= expires_at

    def evolve(self, **changes: Any) -> TaskRecord:
        """A copy with `changes` applied and `updated_at` moved to now (never backwards)."""
        changes.setdefault("updated_at", max(time.time(), self.updated_at))
        status = changes.get("status", self.status)
        if status != self.status and "transitions" not in changes:
            entry = [changes["updated_at"], status, changes.get("status_message", self.status_message)]
            kept = self.transitions
            if len(kept) >= MAX_TRANSITIONS:
                kept = [kept[0], *kept[len(kept) - MAX_TRANSITIONS + 2 :]]
            changes["transitions"] = [*kept, entry]
        message = changes.get("status_message", self.status_message)
        if message != self.status_message and message is not None and "status_history" not in changes:
            history = self.status_history
            if len(history) >= MAX_STATUS_HISTORY:
                history = history[len(history) - MAX_STATUS_HISTORY + 1 :]
            changes["status_history"] = [*history, [changes["updated_at"], message]]
        copy = self.copy()
        for name, value in changes.items():
            if name not in _FIELD_NAMES:
                raise TypeError(f"TaskRecord has no field {name!r}")
            if name in _SHARED_EMPTIES and _is_empty(value):
                value = _SHARED_EMPTIES[name]
            setattr(copy, name, value)
        return copy

    def copy(self) -> TaskRecord:
        """A shallow copy (nested dicts are shared: records are values, never mutated in place)."""
        copy: TaskRecord = _copy_record(self)
        return copy

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field (what serialising stores write)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        """Rebuild a record from `to_dict` output, ignoring unknown keys."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


RECORD_COLUMNS: tuple[str, ...] = (
    "task_id",
    "owner",
    "tool",
    "status",
    "version",
    "created_at",
    "updated_at",
    "runner",
    "idempotency_key",
)
"""The record fields SQL stores keep in columns of their own (the rest goes into a JSON body)."""


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(TaskRecord))


def _compile_copier() -> Any:
    # dataclasses.replace re-runs __init__ and costs ~10x a plain field-by-field copy; records
    # are copied several times per transition, so the copy is generated once, field by field.
    lines = ["def copy(record):", "    new = _new(_cls)"]
    lines += [f"    new.{name} = record.{name}" for name in sorted(_FIELD_NAMES)]
    lines.append("    return new")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": TaskRecord}
    exec("\n".join(lines), namespace)
    return namespace["copy"]


_copy_record = _compile_copier()


def combined_replace(store: object) -> Any:
    """`store.replace_and_publish` (see `TaskStore`), or None when the store has none or may not
    use it: the class that defines it must also define `replace`, so a subclass or a wrapper that
    changes `replace` alone (or forwards unknown attributes with `__getattr__`) keeps its `replace`
    followed by `publish`."""
    cls = type(store)
    allowed = _COMBINED.get(cls)
    if allowed is None:
        definer = _definer(cls, "replace_and_publish")
        allowed = _COMBINED[cls] = definer is not None and definer is _definer(cls, "replace")
    return getattr(store, "replace_and_publish", None) if allowed else None


_COMBINED: dict[type, bool] = {}


def _definer(cls: type, name: str) -> type | None:
    return next((c for c in cls.__mro__ if name in vars(c)), None)


def owner_digest(owner: str) -> str:
    """A short, stable key naming `owner` where the owner itself must not appear or is too long
    (Redis keys, Temporal fairness keys, DBOS partitions): 32 hex digits of its SHA-256."""
    return hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def fair_order(queued: Iterable[TaskRecord], held: Mapping[str, int]) -> list[TaskRecord]:
    """Queued records in the order a fair `claim` takes them: by each owner's turn (the active
    records `held` by runners for that owner, plus the record's place in the owner's queue,
    oldest first), then `created_at` and `task_id`. What the SQL stores compute in their claim."""
    places: dict[str, int] = {}
    turns: list[tuple[int, float, str, TaskRecord]] = []
    for record in sorted(queued, key=lambda r: (r.created_at, r.task_id)):
        place = places[record.owner] = places.get(record.owner, 0) + 1
        turns.append((held.get(record.owner, 0) + place, record.created_at, record.task_id, record))
    turns.sort(key=lambda turn: turn[:3])
    return [turn[3] for turn in turns]


CHANGED_PREFIX = "~"
"""Prefix of the ids the engine publishes after every write of a record: listen streams re-read
the task and push it; runners ignore them. Task ids never contain it."""


class TaskExists(MCPTasksError):
    """`create` was given a task id that is already stored."""


class SchemaVersionError(MCPTasksError, RuntimeError):
    """The database (an SQLite file, a PostgreSQL schema) holds a schema this version of mcptasks
    cannot use: written by a newer mcptasks, or a foreign `tasks` table."""


class StoreNotFound(MCPTasksError, LookupError):
    """`open_existing` found no task store where the URL points (no such file, no such schema,
    or one mcptasks never wrote to)."""


@runtime_checkable
class OpensExisting(Protocol):
    """The optional `open_existing` member of a store, used by the operator tools (admin CLI,
    dashboard), which must never create a store or change its schema by looking at it."""

    async def open_existing(self, *, migrate: bool = False) -> None:
        """Open a store that already holds mcptasks data, creating nothing: `StoreNotFound` when
        there is none; an older schema is migrated with `migrate`, else `SchemaVersionError`."""


@runtime_checkable
class KeepsJournal(Protocol):
    """The optional journal of a store: what durable bodies (`durable=True`) replay from.

    A task's journal is a list of entries (JSON text each, written by the engine) at positions
    0, 1, 2, ... It belongs to the record: it is removed with it (expiry, purge) and cannot be
    written once the record is terminal, expired or gone. Checked by `StoreContract`.
    """

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        """Store `entry` at `position` of the task's journal and return it; when that position
        holds an entry already, store nothing and return the stored one (a repeated append is
        harmless). None, storing nothing, when the task is unknown, expired or terminal.
        `ValueError` when `position` is beyond the end (positions are appended in order)."""

    async def read_journal(self, task_id: str) -> list[str]:
        """The task's entries in position order (empty for an unknown task)."""


@dataclass(frozen=True, slots=True)
class RunnerOffer:
    """What one runner's latest heartbeat said (`KeepsOffers.runner_offers`)."""

    until: float
    """Epoch seconds its lease ends (ended already for a runner that is gone)."""
    tools: frozenset[str] | None
    """The task tools it runs; None when its heartbeat did not say (it may run any)."""


@runtime_checkable
class KeepsOffers(Protocol):
    """The optional tool offers of a store: which task tools each runner runs.

    A runner says which tools it runs with each heartbeat (`tools=`), and `claim(..., tools=...)`
    hands it only records of those tools, so a worker that does not know a tool (a rolling deploy)
    leaves its tasks to one that does. A store without these members keeps working: every runner
    then counts as running any tool. Use `keeps_offers(store)` to tell. Checked by `StoreContract`.
    """

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        """`TaskStore.heartbeat`, also keeping the tools `runner` runs (None: not said)."""

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        """`TaskStore.claim` of records whose tool is in `tools` only (None: any tool)."""

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        """The latest heartbeat of every runner the store still remembers: the live ones and
        those gone for less than `OFFER_MEMORY` seconds at least."""


_OFFERS: dict[type, bool] = {}

OFFER_MEMORY = 3600.0
"""How long (seconds) a store remembers a gone runner's last offer, at least."""


def keeps_offers(store: object) -> KeepsOffers | None:
    """`store` when it keeps tool offers, else None: its `runner_offers` is not None, and the
    class that defines it also defines `heartbeat` and `claim` (a subclass that changes either
    alone, with the old signature, counts as keeping none)."""
    cls = type(store)
    allowed = _OFFERS.get(cls)
    if allowed is None:
        definer = _definer(cls, "runner_offers")
        allowed = _OFFERS[cls] = definer is not None and all(
            _definer(cls, name) is definer for name in ("heartbeat", "claim")
        )
    if not allowed or getattr(store, "runner_offers", None) is None:
        return None
    return cast("KeepsOffers", store)


@runtime_checkable
class CountsActive(Protocol):
    """The optional per-owner count of a store: what admission reads when bodies do not run in the
    process that creates their tasks (`serve --enqueue-only`, an executor), so
    `Limits.max_active_per_owner` holds across every replica and worker. Checked by `StoreContract`.
    """

    async def count_active(self, owner: str) -> int:
        """How many unexpired records of `owner` are active (`working` or `input_required`),
        queued or running anywhere. Cheap: it runs on every create of those placements."""


@runtime_checkable
class TaskStore(Protocol):
    """What the engine needs from a backend. All methods are coroutines except `subscribe`.

    Contract (checked by `mcptasks.testing.store_contract`):

    - `create` is durable: once it returns, `get` from any process sees the record.
    - `get` hides expired records, and with `owner` given, records of other owners.
    - `replace` is compare-and-set: it writes `record` only if the stored version equals
      `expected_version` and the stored record is not terminal; on success the stored (and the
      given) record's `version` becomes `expected_version + 1`.
    - `publish(task_id)` reaches every live `subscribe()` iterator, in this process or another.
    - `heartbeat`/`live_runners` tell which engine instances are alive, so the tasks of a dead one
      can be failed (or re-run) by the survivors.
    - `claim` hands queued records (active, `runner is None`) to exactly one runner each.

    Optional members the engine uses when present: `permanent_errors`, a tuple of the exception
    types that retrying cannot cure (a constraint the record violates, a schema error; `TypeError`
    and `ValueError` always count): every other exception a store call raises is a failure the
    engine retries, and a finished body's end is kept until it is written; `epoch()`, the id of
    the data the store holds, made by its first call over that data, so a store that comes back
    empty (restarted without persistence, restored from a backup) is noticed; `twin()`, a new unopened store over the same data (or None), opened by the engine's
    heartbeat thread on its own event loop; and `replace_and_publish(record, *, expected_version,
    message)`, which is `replace` followed, when it succeeded, by `publish(message)`, done as one
    write (one round trip): the announcement goes out exactly when the write is applied. It is
    used only when the class defining it also defines `replace` (`combined_replace`).
    """

    durable: bool
    """True when records survive a process restart (orphans are then recovered at start-up)."""

    async def open(self) -> None:
        """Acquire connections, create or migrate the schema."""

    async def close(self) -> None:
        """Release everything `open` acquired."""

    async def create(self, record: TaskRecord) -> TaskRecord:
        """Store a new record durably and return it; raise `TaskExists` if its id is taken.

        When `record.idempotency_key` is set and an unexpired record with the same owner and key
        exists, store nothing and return that record instead.
        """

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """The record, or None when unknown, expired, or owned by someone other than `owner`."""

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set; False when the version moved on or the stored record is terminal."""

    async def list_active(self) -> list[TaskRecord]:
        """Every unexpired record that is `working` or `input_required`."""

    async def delete_expired(self, now: float) -> int:
        """Delete records whose TTL elapsed at `now`; return how many."""

    async def heartbeat(self, runner: str, ttl: float) -> None:
        """Record that engine instance `runner` is alive for the next `ttl` seconds."""

    async def live_runners(self) -> set[str]:
        """The runners whose last heartbeat has not expired."""

    async def claim(self, runner: str, limit: int) -> list[TaskRecord]:
        """Assign up to `limit` queued records (active, unexpired, `runner is None`) to `runner`,
        bumping their versions; return them. Each record goes to one claimer. Fair across owners:
        the owners with the fewest active records held by runners go first, each owner's oldest
        record first (`fair_order`), so one owner's backlog never starves another's."""

    # -- operator queries (admin CLI, dashboard; they cross owners) ------------------------------

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """Unexpired records matching `query`, newest first (`created_at`, then `task_id`,
        descending), at most `limit` (capped at `admin.MAX_PAGE`); `after` is a previous page's
        `next_cursor`. `ValueError` for a malformed cursor or a limit below 1."""

    async def stats(self) -> TaskStats:
        """Counts of unexpired records by status and by tool, the oldest active record's
        `created_at`, the queue depth, and the live runners with their lease ends."""

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """Delete terminal records in `statuses` last updated before `older_than` (epoch
        seconds); return how many. `ValueError` when `statuses` names an active status."""

    async def publish(self, task_id: str) -> None:
        """Announce that `task_id` changed in a way its runner must see (input, cancel)."""

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """An iterator of task ids passed to `publish`, live while the context is open."""
