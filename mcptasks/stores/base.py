"""The store contract every backend implements, and the record it stores.

A store keeps `TaskRecord`s. It does not know what a task body is: the engine owns the state
machine and writes every change through `replace`, a compare-and-set on the record's `version`.
Stores enforce the two rules nothing may bypass: a terminal record never changes, and an expired
record is invisible. Wake-ups travel through `publish`/`subscribe`, so an update or cancel received
by one process can reach the body running in another.
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from mcptasks.errors import MCPTasksError
from mcptasks.errors import SchemaVersionError as SchemaVersionError
from mcptasks.errors import StoreNotFound as StoreNotFound
from mcptasks.errors import TaskExists as TaskExists
from mcptasks.stores.admin import AdminStore, TaskPage, TaskQuery, TaskStats
from mcptasks.stores.record import EMPTY_DICT as EMPTY_DICT
from mcptasks.stores.record import EMPTY_LIST as EMPTY_LIST
from mcptasks.stores.record import MAX_STATUS_HISTORY as MAX_STATUS_HISTORY
from mcptasks.stores.record import MAX_TRANSITIONS as MAX_TRANSITIONS
from mcptasks.stores.record import RECORD_COLUMNS as RECORD_COLUMNS
from mcptasks.stores.record import TaskRecord as TaskRecord


def combined_replace(store: object) -> Any:
    """The store's own one-round-trip `replace_and_publish`, or None when it has none (the engine
    then calls `replace` and `publish`). A `StoreBase` has one unless its class keeps the default
    (`StoreBase.__init_subclass__` puts the default back on a subclass that changes `replace`
    alone). Any other store: the class that defines it must also define `replace`, so a wrapper
    that forwards unknown attributes with `__getattr__` keeps its own `replace`."""
    cls = type(store)
    allowed = _COMBINED.get(cls)
    if allowed is None:
        if issubclass(cls, StoreBase):
            allowed = cls.replace_and_publish is not StoreBase.replace_and_publish
        else:
            definer = _definer(cls, "replace_and_publish")
            allowed = definer is not None and definer is _definer(cls, "replace")
        _COMBINED[cls] = allowed
    return cast(Any, store).replace_and_publish if allowed else None


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
    """`store` when it keeps tool offers, else None: a `StoreBase` answers with `offers()`; any
    other store keeps them when the class that defines `runner_offers` also defines `heartbeat`
    and `claim` (a subclass that changes either alone, with the old signature, keeps none) and
    its `runner_offers` is not None."""
    if isinstance(store, StoreBase):
        return store.offers()
    cls = type(store)
    allowed = _OFFERS.get(cls)
    if allowed is None:
        allowed = _OFFERS[cls] = _defines_offers(cls)
    if not allowed or getattr(store, "runner_offers", None) is None:
        return None
    return cast("KeepsOffers", store)


def _defines_offers(cls: type) -> bool:
    """Whether the class that defines `runner_offers` for `cls` also defines `heartbeat` and `claim`."""
    definer = _definer(cls, "runner_offers")
    return definer is not None and all(_definer(cls, name) is definer for name in ("heartbeat", "claim"))


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
class KeepsOutbox(Protocol):
    """The optional webhook outbox of a store: the records whose `outbox` holds events not
    delivered yet, and a write of that field alone that a terminal record also takes.

    The events themselves are written by the ordinary `create` / `replace` of the change that
    produced them (so a crash right after the write loses none); these two members let any
    replica find them (`outbox_records`) and note each delivery (`replace_outbox`). Use
    `StoreBase.outbox()` to tell whether a store has one. Checked by `StoreContract`.
    """

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        """Up to `limit` unexpired records of any status whose `outbox` is not empty, the least
        recently updated first."""

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set that writes `record` (the stored record with only its `outbox`
        changed), terminal or not; False when the version moved on or the record is gone or
        expired. On success the version becomes `expected_version + 1`, as with `replace`."""


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

    The optional members (`permanent_errors`, `epoch()`, `twin()`, `replace_and_publish`, tool
    offers, `count_active`) and their defaults are those of `StoreBase`, the class every shipped
    store subclasses; a store that does not subclass it gets the same defaults from
    `mcptasks.stores.foreign.adopt_store`. The protocols are split by who uses them: this one is
    the engine's; the operator queries (admin CLI, dashboard, metrics) are `AdminStore`
    (`mcptasks.stores.admin`); the journal of durable bodies is `KeepsJournal`.
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

    async def publish(self, task_id: str) -> None:
        """Announce that `task_id` changed in a way its runner must see (input, cancel)."""

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """An iterator of task ids passed to `publish`, live while the context is open."""


class OperatorStore(TaskStore, AdminStore, Protocol):
    """What the operator tools (admin CLI, dashboard) hold: a store with the operator queries."""


class UnsupportedByStore(MCPTasksError, NotImplementedError):
    """A store was asked for something its class does not offer (the message names the class)."""


class StoreBase(abc.ABC):
    """The base class of a task store: the members the engine needs, with an explicit default for
    every optional one. Subclass it and implement the abstract methods (records, queue, liveness,
    change feed, journal); override a default only when the store can do better.

    The defaults: no `permanent_errors`; `epoch()` returns None (a store that comes back empty
    goes unnoticed); `twin()` returns None (no heartbeat thread: leases are renewed on the event
    loop); `replace_and_publish` is `replace`, then `publish` when it applied; `count_active`
    counts through `list_active`; no tool offers (`offers()` is None, `runner_offers` raises
    `UnsupportedByStore`, and `heartbeat`/`claim` may ignore `tools`); `open_existing` is `open`;
    the operator queries (`list_tasks`, `stats`, `purge`) raise `UnsupportedByStore`; no webhook
    outbox (`outbox()` is None, `outbox_records` and `replace_outbox` raise `UnsupportedByStore`).

    Two rules keep a subclass's own `replace`, `heartbeat` and `claim` in use, fixed once when the
    subclass is created: a subclass that defines `replace` but not `replace_and_publish` gets the
    default `replace_and_publish` back (an inherited one would write around its `replace`), and
    a store keeps tool offers only when the class that defines `runner_offers` also defines
    `heartbeat` and `claim`.
    """

    durable: bool
    """True when records survive a process restart (orphans are then recovered at start-up)."""

    permanent_errors: tuple[type[BaseException], ...] = ()
    """The exception types retrying cannot cure (a value the store cannot hold, a constraint or
    schema error); `TypeError` and `ValueError` always count. Every other exception a store call
    raises is a failure the engine retries."""

    _keeps_offers: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "replace" in vars(cls) and "replace_and_publish" not in vars(cls):
            cls.replace_and_publish = StoreBase.replace_and_publish  # type: ignore[method-assign]
        cls._keeps_offers = _definer(cls, "runner_offers") is not StoreBase and _defines_offers(cls)

    # -- records ---------------------------------------------------------------------------------

    @abc.abstractmethod
    async def open(self) -> None:
        """Acquire connections, create or migrate the schema."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release everything `open` acquired."""

    @abc.abstractmethod
    async def create(self, record: TaskRecord) -> TaskRecord:
        """See `TaskStore.create`."""

    @abc.abstractmethod
    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """See `TaskStore.get`."""

    @abc.abstractmethod
    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """See `TaskStore.replace`."""

    async def replace_and_publish(self, record: TaskRecord, *, expected_version: int, message: str) -> bool:
        """`replace`, then `publish(message)` when it applied. Override it to do both in one
        write (one round trip), so the announcement goes out exactly when the write is applied."""
        written = await self.replace(record, expected_version=expected_version)
        if written:
            await self.publish(message)
        return written

    @abc.abstractmethod
    async def list_active(self) -> list[TaskRecord]:
        """See `TaskStore.list_active`."""

    @abc.abstractmethod
    async def delete_expired(self, now: float) -> int:
        """See `TaskStore.delete_expired`."""

    async def count_active(self, owner: str) -> int:
        """See `CountsActive.count_active`. The default counts through `list_active`, which reads
        every active record: override it with an indexed count."""
        return sum(1 for record in await self.list_active() if record.owner == owner)

    async def epoch(self) -> str | None:
        """The id of the data the store holds, made by the first call over that data, so a store
        that comes back empty (restarted without persistence, restored from a backup) is noticed.
        None (the default): no epoch, such a store goes unnoticed."""
        return None

    def twin(self) -> StoreBase | None:
        """A new, unopened store over the same data, opened by the engine's heartbeat thread on
        its own event loop; None (the default): leases are renewed on the engine's loop."""
        return None

    # -- queue and liveness ----------------------------------------------------------------------

    @abc.abstractmethod
    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        """See `TaskStore.heartbeat`; a store that keeps tool offers also keeps `tools`."""

    @abc.abstractmethod
    async def live_runners(self) -> set[str]:
        """See `TaskStore.live_runners`."""

    @abc.abstractmethod
    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        """See `TaskStore.claim`; a store that keeps tool offers hands out records of `tools` only."""

    def offers(self) -> KeepsOffers | None:
        """This store as a keeper of tool offers (`KeepsOffers`), or None when it keeps none."""
        return cast("KeepsOffers", self) if self._keeps_offers else None

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        """See `KeepsOffers.runner_offers`; the default raises `UnsupportedByStore`."""
        raise UnsupportedByStore(f"{type(self).__name__} keeps no tool offers (runner_offers)")

    # -- webhook outbox --------------------------------------------------------------------------

    def outbox(self) -> KeepsOutbox | None:
        """This store as a keeper of a webhook outbox (`KeepsOutbox`), or None: a store has one
        when its class overrides both `outbox_records` and `replace_outbox`."""
        cls = type(self)
        kept = all(_definer(cls, name) is not StoreBase for name in ("outbox_records", "replace_outbox"))
        return cast("KeepsOutbox", self) if kept else None

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        """See `KeepsOutbox.outbox_records`; the default raises `UnsupportedByStore`."""
        raise UnsupportedByStore(f"{type(self).__name__} keeps no webhook outbox (outbox_records)")

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        """See `KeepsOutbox.replace_outbox`; the default raises `UnsupportedByStore`."""
        raise UnsupportedByStore(f"{type(self).__name__} keeps no webhook outbox (replace_outbox)")

    # -- change feed -----------------------------------------------------------------------------

    @abc.abstractmethod
    async def publish(self, task_id: str) -> None:
        """See `TaskStore.publish`."""

    @abc.abstractmethod
    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """See `TaskStore.subscribe`."""

    # -- journal ---------------------------------------------------------------------------------

    @abc.abstractmethod
    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        """See `KeepsJournal.append_journal`."""

    @abc.abstractmethod
    async def read_journal(self, task_id: str) -> list[str]:
        """See `KeepsJournal.read_journal`."""

    # -- operator queries (`AdminStore`) ---------------------------------------------------------

    async def open_existing(self, *, migrate: bool = False) -> None:
        """See `AdminStore.open_existing`; the default is `open` (nothing to find first)."""
        await self.open()

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """See `AdminStore.list_tasks`; the default raises `UnsupportedByStore`."""
        raise UnsupportedByStore(f"{type(self).__name__} answers no operator queries (list_tasks)")

    async def stats(self) -> TaskStats:
        """See `AdminStore.stats`; the default raises `UnsupportedByStore`."""
        raise UnsupportedByStore(f"{type(self).__name__} answers no operator queries (stats)")

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """See `AdminStore.purge`; the default raises `UnsupportedByStore`."""
        raise UnsupportedByStore(f"{type(self).__name__} answers no operator queries (purge)")
