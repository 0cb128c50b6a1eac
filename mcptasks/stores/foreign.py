"""A store that does not subclass `StoreBase`, given `StoreBase`'s defaults.

`adopt_store` is the one place that asks a store which optional members it has (`getattr`): a
store written against the `TaskStore` protocol alone keeps working, and everything past this
module calls methods. It runs once, when the engine takes its store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection
from contextlib import AbstractAsyncContextManager
from typing import cast

from mcptasks.stores.admin import AdminStore, TaskPage, TaskQuery, TaskStats
from mcptasks.stores.base import (
    CountsActive,
    KeepsJournal,
    KeepsOffers,
    OpensExisting,
    RunnerOffer,
    StoreBase,
    TaskRecord,
    TaskStore,
    combined_replace,
    keeps_offers,
)

__all__ = ["ForeignStore", "adopt_store"]

logger = logging.getLogger("mcptasks.engine")


def adopt_store(store: TaskStore | StoreBase) -> StoreBase:
    """`store` itself when it subclasses `StoreBase`, else a `ForeignStore` around it."""
    return store if isinstance(store, StoreBase) else ForeignStore(store)


class ForeignStore(StoreBase):
    """A `TaskStore` that does not subclass `StoreBase`, with `StoreBase`'s defaults for what it
    lacks. Its optional members are looked up once, here; a store without a journal gets one that
    keeps nothing (durable bodies then re-run from the top when their run is lost, as the engine
    warns)."""

    def __init__(self, store: TaskStore) -> None:
        self.inner = store
        self.durable = store.durable
        self.permanent_errors = tuple(getattr(store, "permanent_errors", None) or ())
        self._combined = combined_replace(store)
        self._offers = keeps_offers(store)
        self._journal = store if isinstance(store, KeepsJournal) else None
        self._counts = store if isinstance(store, CountsActive) else None
        self._opens = store if isinstance(store, OpensExisting) else None
        self._epoch = getattr(store, "epoch", None)
        self._twin = getattr(store, "twin", None)
        queries = all(callable(getattr(store, name, None)) for name in ("list_tasks", "stats", "purge"))
        self._queries = cast(AdminStore, store) if queries else None
        self._warned = False

    def __repr__(self) -> str:
        return repr(self.inner)

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def create(self, record: TaskRecord) -> TaskRecord:
        return await self.inner.create(record)

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        return await self.inner.get(task_id, owner=owner)

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        return await self.inner.replace(record, expected_version=expected_version)

    async def replace_and_publish(self, record: TaskRecord, *, expected_version: int, message: str) -> bool:
        if self._combined is None:
            return await super().replace_and_publish(
                record, expected_version=expected_version, message=message
            )
        return bool(await self._combined(record, expected_version=expected_version, message=message))

    async def list_active(self) -> list[TaskRecord]:
        return await self.inner.list_active()

    async def delete_expired(self, now: float) -> int:
        return await self.inner.delete_expired(now)

    async def count_active(self, owner: str) -> int:
        if self._counts is None:
            return await super().count_active(owner)
        return await self._counts.count_active(owner)

    async def epoch(self) -> str | None:
        return None if self._epoch is None else str(await self._epoch())

    def twin(self) -> StoreBase | None:
        made = None if self._twin is None else self._twin()
        return None if made is None else adopt_store(made)

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        if tools is None or self._offers is None:
            await self.inner.heartbeat(runner, ttl)
        else:
            await self._offers.heartbeat(runner, ttl, tools=tools)

    async def live_runners(self) -> set[str]:
        return await self.inner.live_runners()

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        if tools is None or self._offers is None:
            return await self.inner.claim(runner, limit)
        return await self._offers.claim(runner, limit, tools=tools)

    def offers(self) -> KeepsOffers | None:
        return None if self._offers is None else cast(KeepsOffers, self)

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        if self._offers is None:
            return await super().runner_offers()
        return await self._offers.runner_offers()

    async def publish(self, task_id: str) -> None:
        await self.inner.publish(task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        return self.inner.subscribe()

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        if self._journal is not None:
            return await self._journal.append_journal(task_id, position, entry)
        if not self._warned:
            self._warned = True
            logger.warning(
                "the task store %r keeps no journal (append_journal/read_journal): durable bodies "
                "re-run from the top when their run is lost",
                self.inner,
            )
        return entry

    async def read_journal(self, task_id: str) -> list[str]:
        return [] if self._journal is None else await self._journal.read_journal(task_id)

    async def open_existing(self, *, migrate: bool = False) -> None:
        if self._opens is None:
            await self.open()
        else:
            await self._opens.open_existing(migrate=migrate)

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        if self._queries is None:
            return await super().list_tasks(query, limit=limit, after=after)
        return await self._queries.list_tasks(query, limit=limit, after=after)

    async def stats(self) -> TaskStats:
        if self._queries is None:
            return await super().stats()
        return await self._queries.stats()

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        if self._queries is None:
            return await super().purge(statuses, older_than)
        return await self._queries.purge(statuses, older_than)
