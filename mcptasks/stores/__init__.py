"""Task stores: one `TaskStore` contract, several backends, chosen by URL.

For people who build a store by hand or write one: `store_from_url` and the shipped backends (also
exported by `mcptasks`), `StoreBase` (the class a new store subclasses, with explicit defaults
for every optional member), the protocols split by who uses them (`TaskStore` for the engine,
`KeepsJournal` for durable bodies, `AdminStore` for the operator tools, `OperatorStore` for both),
the `TaskRecord` a store keeps, the admin queries' `TaskQuery`, `TaskPage`, `TaskStats` and
`RunnerLease`, and the errors a store raises. The Redis and PostgreSQL backends are imported on first use (they
need the `redis` and `postgres` extras).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcptasks.errors import SchemaVersionError, TaskExists
from mcptasks.stores.admin import AdminStore, RunnerLease, TaskPage, TaskQuery, TaskStats
from mcptasks.stores.base import (
    KeepsJournal,
    OperatorStore,
    StoreBase,
    TaskRecord,
    TaskStore,
    UnsupportedByStore,
)
from mcptasks.stores.memory import MemoryTaskStore
from mcptasks.stores.sqlite import SqliteTaskStore
from mcptasks.stores.url import store_from_url

_ON_FIRST_USE = {"RedisTaskStore": "mcptasks.stores.redis", "PostgresTaskStore": "mcptasks.stores.postgres"}

__all__ = [
    "AdminStore",
    "KeepsJournal",
    "MemoryTaskStore",
    "OperatorStore",
    "PostgresTaskStore",
    "RedisTaskStore",
    "RunnerLease",
    "SchemaVersionError",
    "SqliteTaskStore",
    "StoreBase",
    "TaskExists",
    "TaskPage",
    "TaskQuery",
    "TaskRecord",
    "TaskStats",
    "TaskStore",
    "UnsupportedByStore",
    "store_from_url",
]


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcptasks.stores' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})


if TYPE_CHECKING:
    from mcptasks.stores.postgres import PostgresTaskStore as PostgresTaskStore
    from mcptasks.stores.redis import RedisTaskStore as RedisTaskStore
