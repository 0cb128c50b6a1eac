"""Run the shared store contract against the backends that ship with mcptasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcptasks.stores.base import TaskStore
from mcptasks.stores.memory import MemoryTaskStore
from mcptasks.stores.sqlite import SqliteTaskStore
from mcptasks.testing import StoreContract


class TestMemoryStore(StoreContract):
    durable = False

    @pytest.fixture
    async def store(self) -> AsyncIterator[TaskStore]:
        store = MemoryTaskStore()
        await store.open()
        yield store
        await store.close()


class TestSqliteStore(StoreContract):
    durable = True
    checks_open = True

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[TaskStore]:
        store = SqliteTaskStore(tmp_path / "tasks.db")
        await store.open()
        yield store
        await store.close()

    async def reopen(self, store: TaskStore) -> TaskStore:
        other = self.unopened(store)
        await other.open()
        return other

    def unopened(self, store: TaskStore) -> TaskStore:
        assert isinstance(store, SqliteTaskStore)
        return SqliteTaskStore(store.path)


class TestSqliteStoreOnTrio(TestSqliteStore):
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "trio"


class TestSqliteMemoryStore(StoreContract):
    durable = False
    checks_open = True

    def unopened(self, store: TaskStore) -> TaskStore:
        return SqliteTaskStore(":memory:")

    @pytest.fixture
    async def store(self) -> AsyncIterator[TaskStore]:
        store = SqliteTaskStore(":memory:")
        await store.open()
        yield store
        await store.close()
