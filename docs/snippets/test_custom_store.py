"""Run the store contract against `EncryptedStore` (docs/snippets/howto_custom_store.py).

pytest docs/snippets/test_custom_store.py
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from howto_custom_store import EncryptedStore

from mcptasks import SqliteTaskStore
from mcptasks.stores import TaskRecord, TaskStore
from mcptasks.testing import StoreContract

KEY = Fernet.generate_key()


class TestEncryptedSqliteStore(StoreContract):
    durable = True  # SQLite survives restarts: run the persistence tests too
    counts_tool_errors = False  # results are sealed: stats() leaves tool_errors None

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[EncryptedStore]:
        store = EncryptedStore(SqliteTaskStore(tmp_path / "tasks.db"), KEY)
        await store.open()
        yield store
        await store.close()

    async def reopen(self, store: TaskStore) -> TaskStore:
        """A second store over the same file: another process, or the same one after a restart."""
        assert isinstance(store, EncryptedStore) and isinstance(store.inner, SqliteTaskStore)
        other = EncryptedStore(SqliteTaskStore(store.inner.path), KEY)
        await other.open()
        return other


@pytest.mark.anyio
async def test_arguments_are_unreadable_at_rest(tmp_path: Path) -> None:
    store = EncryptedStore(SqliteTaskStore(tmp_path / "tasks.db"), KEY)
    await store.open()
    try:
        record = TaskRecord(task_id="t-1", owner="alice", tool="deploy", arguments={"token": "hunter2"})
        await store.create(record)
        assert (await store.get("t-1")) == record
    finally:
        await store.close()
    raw = sqlite3.connect(tmp_path / "tasks.db").execute("SELECT body FROM tasks").fetchone()[0]
    assert "hunter2" not in raw


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
