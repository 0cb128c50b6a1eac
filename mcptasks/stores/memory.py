"""`MemoryTaskStore`: records in a dict, for development and tests. Nothing survives a restart."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Collection
from contextlib import AbstractAsyncContextManager

from mcptasks.stores._broadcast import LocalBroadcast
from mcptasks.stores.admin import (
    TaskPage,
    TaskQuery,
    TaskStats,
    check_journal_append,
    check_purge,
    journal_gap,
    page_of,
    stats_of,
)
from mcptasks.stores.base import RunnerOffer, StoreBase, TaskExists, TaskRecord, fair_order
from mcptasks.wire import ACTIVE_STATUSES


class MemoryTaskStore(StoreBase):
    """A `TaskStore` kept in this process's memory (`memory://`)."""

    durable = False

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._idempotency: dict[tuple[str, str], str] = {}
        self._journals: dict[str, list[str]] = {}
        self._heartbeats: dict[str, float] = {}
        self._offers: dict[str, frozenset[str] | None] = {}
        self._broadcast = LocalBroadcast()

    async def open(self) -> None:
        """Nothing to acquire."""

    async def close(self) -> None:
        """Nothing to release; records stay until the object is dropped."""

    async def create(self, record: TaskRecord) -> TaskRecord:
        """Store a copy of `record` (or return the live record holding its idempotency key)."""
        if record.task_id in self._records:
            raise TaskExists(record.task_id)
        if record.idempotency_key is not None:
            key = (record.owner, record.idempotency_key)
            existing = self._records.get(self._idempotency.get(key, ""))
            if existing is not None and not existing.expired(time.time()):
                return existing.copy()
            self._idempotency[key] = record.task_id
        self._records[record.task_id] = record.copy()
        return record

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """A copy of the record, unless unknown, expired or foreign."""
        record = self._records.get(task_id)
        if record is None or record.expired(time.time()):
            return None
        if owner is not None and record.owner != owner:
            return None
        return record.copy()

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version`; terminal records are final."""
        stored = self._records.get(record.task_id)
        if stored is None or stored.version != expected_version or stored.terminal:
            return False
        record.version = expected_version + 1
        self._records[record.task_id] = record.copy()
        return True

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version` that a terminal record also takes (`KeepsOutbox`)."""
        stored = self._records.get(record.task_id)
        if stored is None or stored.version != expected_version or stored.expired(time.time()):
            return False
        record.version = expected_version + 1
        self._records[record.task_id] = record.copy()
        return True

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        """Unexpired records with undelivered webhook events, least recently updated first."""
        pending = [r for r in self._unexpired() if r.outbox]
        pending.sort(key=lambda r: (r.updated_at, r.task_id))
        return [r.copy() for r in pending[: max(limit, 0)]]

    async def list_active(self) -> list[TaskRecord]:
        """Copies of every unexpired working / input_required record."""
        now = time.time()
        return [
            r.copy() for r in self._records.values() if r.status in ACTIVE_STATUSES and not r.expired(now)
        ]

    async def delete_expired(self, now: float) -> int:
        """Drop every record whose TTL has elapsed."""
        doomed = [task_id for task_id, r in self._records.items() if r.expired(now)]
        for task_id in doomed:
            record = self._records.pop(task_id)
            self._journals.pop(task_id, None)
            if record.idempotency_key is not None:
                self._idempotency.pop((record.owner, record.idempotency_key), None)
        return len(doomed)

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        """Remember `runner` as alive until now + `ttl`, running `tools` (None: not said)."""
        self._heartbeats[runner] = time.time() + ttl
        if tools is not None:
            self._offers[runner] = frozenset(tools)

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        """Every runner's latest heartbeat (kept for the life of the store)."""
        return {
            runner: RunnerOffer(until, self._offers.get(runner)) for runner, until in self._heartbeats.items()
        }

    async def count_active(self, owner: str) -> int:
        """How many unexpired active records `owner` has (`CountsActive`)."""
        now = time.time()
        return sum(
            1
            for r in self._records.values()
            if r.owner == owner and r.status in ACTIVE_STATUSES and not r.expired(now)
        )

    async def live_runners(self) -> set[str]:
        """Runners with an unexpired heartbeat."""
        now = time.time()
        return {runner for runner, until in self._heartbeats.items() if until > now}

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        """Assign queued records (of `tools`, when given) to `runner`, fairly across owners."""
        now = time.time()
        wanted = None if tools is None else frozenset(tools)
        active = [r for r in self._records.values() if r.status in ACTIVE_STATUSES and not r.expired(now)]
        held = Counter(r.owner for r in active if r.runner is not None)
        queued = fair_order(
            (r for r in active if r.runner is None and (wanted is None or r.tool in wanted)), held
        )[: max(limit, 0)]
        claimed = []
        for record in queued:
            record.runner = runner
            record.version += 1
            claimed.append(record.copy())
        return claimed

    def _unexpired(self) -> list[TaskRecord]:
        now = time.time()
        return [r for r in self._records.values() if not r.expired(now)]

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """Matching unexpired records, newest first, one page."""
        return page_of(self._unexpired(), query, limit, after)

    async def stats(self) -> TaskStats:
        """Counts, oldest active record, queue depth and live runners."""
        now = time.time()
        leases = {runner: until for runner, until in self._heartbeats.items() if until > now}
        return stats_of(self._unexpired(), leases)

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """Drop terminal records in `statuses` last updated before `older_than`."""
        chosen = check_purge(statuses)
        doomed = [r for r in self._records.values() if r.status in chosen and r.updated_at < older_than]
        for record in doomed:
            del self._records[record.task_id]
            self._journals.pop(record.task_id, None)
            key = (record.owner, record.idempotency_key or "")
            if record.idempotency_key is not None and self._idempotency.get(key) == record.task_id:
                del self._idempotency[key]
        return len(doomed)

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        """Store `entry` at `position` (or return the entry already there); None when the task
        is unknown, expired or terminal; `ValueError` for a gap."""
        check_journal_append(position, entry)
        record = self._records.get(task_id)
        if record is None or record.terminal or record.expired(time.time()):
            return None
        journal = self._journals.setdefault(task_id, [])
        if position < len(journal):
            return journal[position]
        if position > len(journal):
            raise ValueError(journal_gap(task_id, position, len(journal)))
        journal.append(entry)
        return entry

    async def read_journal(self, task_id: str) -> list[str]:
        """The task's entries in position order (empty when unknown or expired)."""
        record = self._records.get(task_id)
        if record is None or record.expired(time.time()):
            return []
        return list(self._journals.get(task_id, ()))

    async def publish(self, task_id: str) -> None:
        """Wake the subscribers of this process."""
        self._broadcast.publish(task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Receive the ids published in this process."""
        return self._broadcast.subscribe()

    def __len__(self) -> int:
        return len(self._records)
