"""A custom `TaskStore`: encrypt what tasks carry (arguments, results, answers) around any store."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Collection
from contextlib import AbstractAsyncContextManager
from typing import Any

from cryptography.fernet import Fernet

from mcptasks import SqliteTaskStore, TaskServer
from mcptasks.stores import TaskPage, TaskQuery, TaskRecord, TaskStats, TaskStore

SEALED_FIELDS = ("arguments", "result", "error", "input_requests", "input_responses")
"""The record fields that can hold user data; everything else the engine needs in clear."""


class EncryptedStore:
    """Wraps any `TaskStore` and encrypts `SEALED_FIELDS` before they reach it (Fernet)."""

    def __init__(self, inner: TaskStore, key: bytes) -> None:
        self.inner = inner
        self.durable = inner.durable
        self._fernet = Fernet(key)

    # -- sealing ---------------------------------------------------------------------------------

    def _seal(self, record: TaskRecord) -> TaskRecord:
        changes: dict[str, Any] = {}
        for name in SEALED_FIELDS:
            value = getattr(record, name)
            if value is not None:
                token = self._fernet.encrypt(json.dumps(value).encode()).decode()
                changes[name] = {"$sealed": token}
        return dataclasses.replace(record, **changes)

    def _open(self, record: TaskRecord | None) -> TaskRecord | None:
        if record is None:
            return None
        changes: dict[str, Any] = {}
        for name in SEALED_FIELDS:
            value = getattr(record, name)
            if isinstance(value, dict) and set(value) == {"$sealed"}:
                changes[name] = json.loads(self._fernet.decrypt(value["$sealed"].encode()))
        return dataclasses.replace(record, **changes)

    def _open_all(self, records: list[TaskRecord]) -> list[TaskRecord]:
        return [opened for opened in map(self._open, records) if opened is not None]

    # -- the TaskStore protocol ------------------------------------------------------------------

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def create(self, record: TaskRecord) -> TaskRecord:
        stored = await self.inner.create(self._seal(record))
        if stored.task_id != record.task_id:  # an idempotency key hit: the earlier task
            opened = self._open(stored)
            assert opened is not None
            return opened
        return record

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        return self._open(await self.inner.get(task_id, owner=owner))

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        sealed = self._seal(record)
        if not await self.inner.replace(sealed, expected_version=expected_version):
            return False
        record.version = sealed.version  # the contract: the caller's record gets the new version
        return True

    async def list_active(self) -> list[TaskRecord]:
        return self._open_all(await self.inner.list_active())

    async def delete_expired(self, now: float) -> int:
        return await self.inner.delete_expired(now)

    async def heartbeat(self, runner: str, ttl: float) -> None:
        await self.inner.heartbeat(runner, ttl)

    async def live_runners(self) -> set[str]:
        return await self.inner.live_runners()

    async def claim(self, runner: str, limit: int) -> list[TaskRecord]:
        return self._open_all(await self.inner.claim(runner, limit))

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        # the inner store filters on clear fields; whether a result is a tool error is sealed
        clear = dataclasses.replace(query, tool_error=None)
        page = await self.inner.list_tasks(clear, limit=limit, after=after)
        return TaskPage([r for r in self._open_all(page.records) if query.matches(r)], page.next_cursor)

    async def stats(self) -> TaskStats:  # results are sealed: tool errors are not counted
        return dataclasses.replace(await self.inner.stats(), tool_errors=None)

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        return await self.inner.purge(statuses, older_than)

    async def publish(self, task_id: str) -> None:
        await self.inner.publish(task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        return self.inner.subscribe()


def encrypted_server(path: str, key: bytes) -> TaskServer:
    """Use it like any store. `key` comes from `Fernet.generate_key()`; keep it in your secret store."""
    return TaskServer("deployer", store=EncryptedStore(SqliteTaskStore(path), key))
