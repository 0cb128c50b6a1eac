"""The engine under `TaskServer`, for people who embed mcptasks in a host other than the official
SDK, or who tune the engine past `EngineConfig`'s everyday fields. A tool author needs none of it.

`TaskEngine` runs bodies and applies transitions over a store; `TasksProtocol` answers `tools/call`
and `tasks/*` as plain functions over JSON-able dicts; `TaskPush` serves the task part of
`subscriptions/listen` (each stream holding a `ListenSlot` under the listen limits) over a
`TaskFeed` (one subscription to the store's change feed per process). `Outcome` is how a body ended,
`BodyChannel` what a `TaskContext` talks to, `ANONYMOUS_OWNER` the owner of calls without an
authenticated principal, and `StoreRetry` (`EngineConfig.store_retry`) how a running task's store
calls ride out an outage.
"""

from __future__ import annotations

from mcptasks._authoring.context import BodyChannel
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.feed import TaskFeed
from mcptasks._runtime.outages import StoreRetry
from mcptasks._runtime.protocol import ANONYMOUS_OWNER, TasksProtocol
from mcptasks._runtime.push import ListenSlot, TaskPush

__all__ = [
    "ANONYMOUS_OWNER",
    "BodyChannel",
    "ListenSlot",
    "Outcome",
    "StoreRetry",
    "TaskEngine",
    "TaskFeed",
    "TaskPush",
    "TasksProtocol",
]
