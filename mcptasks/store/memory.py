"""`MemoryTaskStore`: records in a dict, for development and tests. Nothing survives a restart."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

from mcptasks.store.base import TaskExists, TaskRecord
from mcptasks.store.broadcast import LocalBroadcast
from mcptasks.wire import ACTIVE_STATUSES


class MemoryTaskStore:
    """A `TaskStore` kept in this process's memory (`memory://`)."""

    durable = False

    def __init__(self) -> None:
        self._records: dict[str, TaskRecord] = {}
        self._broadcast = LocalBroadcast()

    async def open(self) -> None:
        """Nothing to acquire."""

    async def close(self) -> None:
        """Nothing to release; records stay until the object is dropped."""

    async def create(self, record: TaskRecord) -> None:
        """Store a copy of `record`."""
        if record.task_id in self._records:
            raise TaskExists(record.task_id)
        self._records[record.task_id] = dataclasses.replace(record)

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """A copy of the record, unless unknown, expired or foreign."""
        record = self._records.get(task_id)
        if record is None or record.expired(time.time()):
            return None
        if owner is not None and record.owner != owner:
            return None
        return dataclasses.replace(record)

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version`; terminal records are final."""
        stored = self._records.get(record.task_id)
        if stored is None or stored.version != expected_version or stored.terminal:
            return False
        record.version = expected_version + 1
        self._records[record.task_id] = dataclasses.replace(record)
        return True

    async def list_active(self) -> list[TaskRecord]:
        """Copies of every unexpired working / input_required record."""
        now = time.time()
        return [
            dataclasses.replace(r)
            for r in self._records.values()
            if r.status in ACTIVE_STATUSES and not r.expired(now)
        ]

    async def delete_expired(self, now: float) -> int:
        """Drop every record whose TTL has elapsed."""
        doomed = [task_id for task_id, r in self._records.items() if r.expired(now)]
        for task_id in doomed:
            del self._records[task_id]
        return len(doomed)

    async def publish(self, task_id: str) -> None:
        """Wake the subscribers of this process."""
        self._broadcast.publish(task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Receive the ids published in this process."""
        return self._broadcast.subscribe()

    def __len__(self) -> int:
        return len(self._records)
