"""Task stores: one `TaskStore` contract, several backends, chosen by URL."""

from __future__ import annotations

from mcptasks.store.base import TaskExists, TaskRecord, TaskStore
from mcptasks.store.memory import MemoryTaskStore
from mcptasks.store.sqlite import SqliteTaskStore
from mcptasks.store.url import store_from_url

__all__ = ["MemoryTaskStore", "SqliteTaskStore", "TaskExists", "TaskRecord", "TaskStore", "store_from_url"]
