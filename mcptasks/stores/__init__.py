"""Task stores: one `TaskStore` contract, several backends, chosen by URL."""

from __future__ import annotations

from mcptasks.stores.base import SchemaVersionError, TaskExists, TaskRecord, TaskStore
from mcptasks.stores.memory import MemoryTaskStore
from mcptasks.stores.sqlite import SqliteTaskStore
from mcptasks.stores.url import store_from_url

__all__ = [
    "MemoryTaskStore",
    "SchemaVersionError",
    "SqliteTaskStore",
    "TaskExists",
    "TaskRecord",
    "TaskStore",
    "store_from_url",
]
