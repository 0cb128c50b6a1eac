"""`StoreBase`: the defaults a store gets for every optional member, and `adopt_store`, which gives
a store that does not subclass it the same defaults."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest

from mcptasks.stores import MemoryTaskStore
from mcptasks.stores.admin import AdminStore, TaskQuery
from mcptasks.stores.base import StoreBase, TaskRecord, UnsupportedByStore, combined_replace, keeps_offers
from mcptasks.stores.foreign import ForeignStore, adopt_store

pytestmark = pytest.mark.anyio


class Plain(StoreBase):
    """The abstract members only, kept by a memory store it forwards to."""

    durable = False

    def __init__(self) -> None:
        self.memory = MemoryTaskStore()
        self.published: list[str] = []

    async def open(self) -> None:
        await self.memory.open()

    async def close(self) -> None:
        await self.memory.close()

    async def create(self, record: TaskRecord) -> TaskRecord:
        return await self.memory.create(record)

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        return await self.memory.get(task_id, owner=owner)

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        return await self.memory.replace(record, expected_version=expected_version)

    async def list_active(self) -> list[TaskRecord]:
        return await self.memory.list_active()

    async def delete_expired(self, now: float) -> int:
        return await self.memory.delete_expired(now)

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        await self.memory.heartbeat(runner, ttl)

    async def live_runners(self) -> set[str]:
        return await self.memory.live_runners()

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        return await self.memory.claim(runner, limit)

    async def publish(self, task_id: str) -> None:
        self.published.append(task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        return self.memory.subscribe()

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        return await self.memory.append_journal(task_id, position, entry)

    async def read_journal(self, task_id: str) -> list[str]:
        return await self.memory.read_journal(task_id)


async def test_the_defaults_behave_as_documented() -> None:
    store = Plain()
    await store.open_existing()  # the default is `open`
    assert store.permanent_errors == ()
    assert await store.epoch() is None and store.twin() is None
    assert store.offers() is None and keeps_offers(store) is None
    with pytest.raises(UnsupportedByStore, match="Plain keeps no tool offers"):
        await store.runner_offers()
    for call in (store.list_tasks(TaskQuery()), store.stats(), store.purge({"completed"}, 0.0)):
        with pytest.raises(UnsupportedByStore, match="Plain answers no operator queries"):
            await call
    record = await store.create(TaskRecord(task_id="t", owner="alice", tool="x"))
    await store.create(TaskRecord(task_id="u", owner="bob", tool="x"))
    assert await store.count_active("alice") == 1 and await store.count_active("carol") == 0
    # `replace_and_publish` is `replace`, then `publish` when it applied
    assert combined_replace(store) is None
    assert await store.replace_and_publish(record.evolve(), expected_version=0, message="~t")
    assert not await store.replace_and_publish(record.evolve(), expected_version=0, message="~again")
    assert store.published == ["~t"]
    # no webhook outbox: `outbox()` says so, its members refuse
    assert store.outbox() is None
    with pytest.raises(UnsupportedByStore, match="Plain keeps no webhook outbox"):
        await store.outbox_records(10)
    with pytest.raises(UnsupportedByStore, match="Plain keeps no webhook outbox"):
        await store.replace_outbox(record, expected_version=1)


def test_abstract_members_are_required() -> None:
    class Partial(StoreBase):
        durable = False

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


def test_a_subclass_changing_replace_or_claim_alone_keeps_it_in_use() -> None:
    class ChangesReplace(MemoryTaskStore):
        async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
            return False

    class ChangesClaim(MemoryTaskStore):
        async def claim(
            self, runner: str, limit: int, *, tools: Collection[str] | None = None
        ) -> list[TaskRecord]:
            return []

    assert ChangesReplace.replace_and_publish is StoreBase.replace_and_publish
    assert MemoryTaskStore().offers() is not None and ChangesClaim().offers() is None


def test_a_store_keeps_an_outbox_when_it_has_both_members() -> None:
    class HalfOutbox(Plain):
        async def outbox_records(self, limit: int) -> list[TaskRecord]:
            return []

    assert MemoryTaskStore().outbox() is not None
    assert HalfOutbox().outbox() is None  # replace_outbox is still the default


class Foreign:
    """A store written against the protocol alone: no journal, offers, epoch or count."""

    def __init__(self) -> None:
        self.memory = MemoryTaskStore()
        self.durable = False

    def __getattr__(self, name: str) -> Any:
        if name in {"append_journal", "read_journal", "runner_offers", "count_active", "epoch", "twin"}:
            raise AttributeError(name)
        return getattr(self.memory, name)


async def test_a_foreign_store_is_adopted_with_the_defaults() -> None:
    memory = MemoryTaskStore()
    assert adopt_store(memory) is memory
    foreign = Foreign()
    store = adopt_store(foreign)
    assert isinstance(store, ForeignStore) and repr(store) == repr(foreign)
    assert isinstance(store, AdminStore) and store.durable is False
    async with _opened(store):
        record = await store.create(TaskRecord(task_id="t", owner="alice", tool="x"))
        assert await store.count_active("alice") == 1
        assert await store.epoch() is None and store.twin() is None and store.offers() is None
        assert store.outbox() is None  # webhooks need a store with `KeepsOutbox`
        assert await store.append_journal("t", 0, "entry") == "entry"  # kept nowhere
        assert await store.read_journal("t") == []
        assert await store.replace_and_publish(record.evolve(), expected_version=0, message="~t")
        assert (await store.list_tasks(TaskQuery())).records[0].task_id == "t"


@asynccontextmanager
async def _opened(store: StoreBase) -> AsyncIterator[None]:
    await store.open()
    try:
        yield
    finally:
        await store.close()
