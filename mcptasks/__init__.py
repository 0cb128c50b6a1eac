"""mcptasks: long-running MCP tools with the Tasks extension (`io.modelcontextprotocol/tasks`).

This package offers what a tool author and a client user write: the decorator and the server, what a
body yields and the answers it gets back, the context, the stores, the client's entry points and
the errors to catch. The rest lives in lower faces, each for its own audience:

- `mcptasks.authoring`: the rest of what a body and its tool can name (the answer types of sampling
  and roots, raw input requests, the tool object and its options);
- `mcptasks.errors`: every exception, drawn as one tree;
- `mcptasks.stores`: the store contract and its records, for people who write or query a store;
- `mcptasks.executors`: the executor seam and the shipped executors;
- `mcptasks.client`: the whole client (policies, watches, the ledger of started tasks);
- `mcptasks.lowlevel`: the engine, the protocol layer and push, for embedding in another host;
- `mcptasks.testing`: the test kits; `mcptasks.wire`: the protocol's constants and types.

`_PUBLIC` below is the one table of the names offered here: it drives `__all__` and the lazy
loading, so `import mcptasks` is cheap and the SDK hosts, the client and the Redis / PostgreSQL
drivers are imported only when first used. `_MOVED` lists the names this package offered before
0.4.0: they still resolve, with a `DeprecationWarning` naming their new place, until 0.5.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from mcptasks._version import __version__

_PUBLIC: dict[str, str] = {
    # -- writing task tools ------------------------------------------------------------------------
    "task_tool": "mcptasks._authoring.tool",
    "TaskContext": "mcptasks._authoring.context",
    "Yields": "mcptasks._authoring.yields",
    "Result": "mcptasks._authoring.yields",
    "Elicit": "mcptasks._authoring.yields",
    "Sample": "mcptasks._authoring.yields",
    "ListRoots": "mcptasks._authoring.yields",
    "Inputs": "mcptasks._authoring.yields",
    "Delegate": "mcptasks._authoring.yields",
    "Step": "mcptasks._authoring.steps",
    "Answer": "mcptasks._authoring.yields",
    "Accepted": "mcptasks._authoring.yields",
    "Declined": "mcptasks._authoring.yields",
    "Cancelled": "mcptasks._authoring.yields",
    "Unsupported": "mcptasks._authoring.yields",
    # -- serving them ------------------------------------------------------------------------------
    "TaskServer": "mcptasks.server.app",
    "TasksExtension": "mcptasks.server.extension",
    "EngineConfig": "mcptasks._runtime.config",
    "Limits": "mcptasks._runtime.limits",
    # -- stores, by URL or built by hand -----------------------------------------------------------
    "store_from_url": "mcptasks.stores.url",
    "MemoryTaskStore": "mcptasks.stores.memory",
    "SqliteTaskStore": "mcptasks.stores.sqlite",
    "RedisTaskStore": "mcptasks.stores.redis",
    "PostgresTaskStore": "mcptasks.stores.postgres",
    # -- calling task tools ------------------------------------------------------------------------
    "TasksClient": "mcptasks.client.extension",
    "start_tool_call": "mcptasks.client.extension",
    "TaskHandle": "mcptasks.client.handle",
    # -- the errors people catch (the whole tree is in mcptasks.errors) ----------------------------
    "MCPTasksError": "mcptasks.errors",
    "ToolError": "mcptasks.errors",
    "ProtocolError": "mcptasks.errors",
    "StepFailed": "mcptasks.errors",
    "TaskNotFound": "mcptasks.errors",
    "TaskFailed": "mcptasks.client.errors",
    "TaskCancelled": "mcptasks.client.errors",
}
"""Every name offered here and the module defining it, the most used first."""

_MOVED: dict[str, str] = {
    "Status": "mcptasks.authoring",
    "TaskTool": "mcptasks.authoring",
    "TaskToolOptions": "mcptasks.authoring",
    "FallbackMode": "mcptasks.authoring",
    "Elicitation": "mcptasks.authoring",
    "Sampled": "mcptasks.authoring",
    "SampleAnswer": "mcptasks.authoring",
    "Roots": "mcptasks.authoring",
    "RootsAnswer": "mcptasks.authoring",
    "Root": "mcptasks.authoring",
    "InputRequest": "mcptasks.authoring",
    "InputCapability": "mcptasks.authoring",
    "MAX_CHECKPOINT_BYTES": "mcptasks.authoring",
    "TaskEngine": "mcptasks.lowlevel",
    "TasksProtocol": "mcptasks.lowlevel",
    "ANONYMOUS_OWNER": "mcptasks.lowlevel",
    "TaskPush": "mcptasks.lowlevel",
    "ListenSlot": "mcptasks.lowlevel",
    "TaskFeed": "mcptasks.lowlevel",
    "Outcome": "mcptasks.lowlevel",
    "BodyChannel": "mcptasks.lowlevel",
    "StoreRetry": "mcptasks.lowlevel",
    "TaskStore": "mcptasks.stores",
    "TaskRecord": "mcptasks.stores",
    "KeepsJournal": "mcptasks.stores",
    "TaskQuery": "mcptasks.stores",
    "TaskPage": "mcptasks.stores",
    "TaskStats": "mcptasks.stores",
    "RunnerLease": "mcptasks.stores",
    "Executor": "mcptasks.executors",
    "ExecutorHost": "mcptasks.executors",
    "TemporalExecutor": "mcptasks.executors",
    "DBOSExecutor": "mcptasks.executors",
    "TaskWatch": "mcptasks.client",
    "TaskPolicy": "mcptasks.client",
    "DetailedTask": "mcptasks.client",
    "TaskLedger": "mcptasks.client",
    "LedgerEntry": "mcptasks.client",
    "TaskStuck": "mcptasks.client",
    "TaskInputError": "mcptasks.client",
    "TaskUnreachable": "mcptasks.client",
    "TaskError": "mcptasks.errors",
    "InvalidArguments": "mcptasks.errors",
    "InvalidAnswer": "mcptasks.errors",
    "InvalidValue": "mcptasks.errors",
    "CancelRequested": "mcptasks.errors",
    "JournalDiverged": "mcptasks.errors",
    "JournalFull": "mcptasks.errors",
    "TooManyTasks": "mcptasks.errors",
    "PollTooFast": "mcptasks.errors",
    "TaskExists": "mcptasks.errors",
    "SchemaVersionError": "mcptasks.errors",
    "MissingExtra": "mcptasks.errors",
    "HeldElsewhere": "mcptasks.errors",
    "HandedOver": "mcptasks.errors",
    "NotServedHere": "mcptasks.errors",
    "EXTENSION_ID": "mcptasks.wire",
    "TaskState": "mcptasks.wire",
    "TaskSupport": "mcptasks.wire",
}
"""Names offered here before 0.4.0, and the public module that offers each now."""

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    face = _MOVED.get(name)
    if face is not None:  # not cached, so every use warns
        warnings.warn(
            f"mcptasks.{name} moved to {face}.{name}; the old name goes in 0.5",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(face), name)
    raise AttributeError(f"module 'mcptasks' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:  # the same names for type checkers and doc tools (a test keeps them equal)
    from mcptasks._authoring.context import TaskContext as TaskContext
    from mcptasks._authoring.steps import Step as Step
    from mcptasks._authoring.tool import task_tool as task_tool
    from mcptasks._authoring.yields import Accepted as Accepted
    from mcptasks._authoring.yields import Answer as Answer
    from mcptasks._authoring.yields import Cancelled as Cancelled
    from mcptasks._authoring.yields import Declined as Declined
    from mcptasks._authoring.yields import Delegate as Delegate
    from mcptasks._authoring.yields import Elicit as Elicit
    from mcptasks._authoring.yields import Inputs as Inputs
    from mcptasks._authoring.yields import ListRoots as ListRoots
    from mcptasks._authoring.yields import Result as Result
    from mcptasks._authoring.yields import Sample as Sample
    from mcptasks._authoring.yields import Unsupported as Unsupported
    from mcptasks._authoring.yields import Yields as Yields
    from mcptasks._runtime.config import EngineConfig as EngineConfig
    from mcptasks._runtime.limits import Limits as Limits
    from mcptasks.client.errors import TaskCancelled as TaskCancelled
    from mcptasks.client.errors import TaskFailed as TaskFailed
    from mcptasks.client.extension import TasksClient as TasksClient
    from mcptasks.client.extension import start_tool_call as start_tool_call
    from mcptasks.client.handle import TaskHandle as TaskHandle
    from mcptasks.errors import MCPTasksError as MCPTasksError
    from mcptasks.errors import ProtocolError as ProtocolError
    from mcptasks.errors import StepFailed as StepFailed
    from mcptasks.errors import TaskNotFound as TaskNotFound
    from mcptasks.errors import ToolError as ToolError
    from mcptasks.server.app import TaskServer as TaskServer
    from mcptasks.server.extension import TasksExtension as TasksExtension
    from mcptasks.stores.memory import MemoryTaskStore as MemoryTaskStore
    from mcptasks.stores.postgres import PostgresTaskStore as PostgresTaskStore
    from mcptasks.stores.redis import RedisTaskStore as RedisTaskStore
    from mcptasks.stores.sqlite import SqliteTaskStore as SqliteTaskStore
    from mcptasks.stores.url import store_from_url as store_from_url

if TYPE_CHECKING:  # the moved names, so code that type-checks today still does until 0.5
    from mcptasks.authoring import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
    from mcptasks.authoring import Elicitation as Elicitation
    from mcptasks.authoring import FallbackMode as FallbackMode
    from mcptasks.authoring import InputCapability as InputCapability
    from mcptasks.authoring import InputRequest as InputRequest
    from mcptasks.authoring import Root as Root
    from mcptasks.authoring import Roots as Roots
    from mcptasks.authoring import RootsAnswer as RootsAnswer
    from mcptasks.authoring import SampleAnswer as SampleAnswer
    from mcptasks.authoring import Sampled as Sampled
    from mcptasks.authoring import Status as Status
    from mcptasks.authoring import TaskTool as TaskTool
    from mcptasks.authoring import TaskToolOptions as TaskToolOptions
    from mcptasks.client import DetailedTask as DetailedTask
    from mcptasks.client import LedgerEntry as LedgerEntry
    from mcptasks.client import TaskInputError as TaskInputError
    from mcptasks.client import TaskLedger as TaskLedger
    from mcptasks.client import TaskPolicy as TaskPolicy
    from mcptasks.client import TaskStuck as TaskStuck
    from mcptasks.client import TaskUnreachable as TaskUnreachable
    from mcptasks.client import TaskWatch as TaskWatch
    from mcptasks.errors import CancelRequested as CancelRequested
    from mcptasks.errors import HandedOver as HandedOver
    from mcptasks.errors import HeldElsewhere as HeldElsewhere
    from mcptasks.errors import InvalidAnswer as InvalidAnswer
    from mcptasks.errors import InvalidArguments as InvalidArguments
    from mcptasks.errors import InvalidValue as InvalidValue
    from mcptasks.errors import JournalDiverged as JournalDiverged
    from mcptasks.errors import JournalFull as JournalFull
    from mcptasks.errors import MissingExtra as MissingExtra
    from mcptasks.errors import NotServedHere as NotServedHere
    from mcptasks.errors import PollTooFast as PollTooFast
    from mcptasks.errors import SchemaVersionError as SchemaVersionError
    from mcptasks.errors import TaskError as TaskError
    from mcptasks.errors import TaskExists as TaskExists
    from mcptasks.errors import TooManyTasks as TooManyTasks
    from mcptasks.executors import DBOSExecutor as DBOSExecutor
    from mcptasks.executors import Executor as Executor
    from mcptasks.executors import ExecutorHost as ExecutorHost
    from mcptasks.executors import TemporalExecutor as TemporalExecutor
    from mcptasks.lowlevel import ANONYMOUS_OWNER as ANONYMOUS_OWNER
    from mcptasks.lowlevel import BodyChannel as BodyChannel
    from mcptasks.lowlevel import ListenSlot as ListenSlot
    from mcptasks.lowlevel import Outcome as Outcome
    from mcptasks.lowlevel import StoreRetry as StoreRetry
    from mcptasks.lowlevel import TaskEngine as TaskEngine
    from mcptasks.lowlevel import TaskFeed as TaskFeed
    from mcptasks.lowlevel import TaskPush as TaskPush
    from mcptasks.lowlevel import TasksProtocol as TasksProtocol
    from mcptasks.stores import KeepsJournal as KeepsJournal
    from mcptasks.stores import RunnerLease as RunnerLease
    from mcptasks.stores import TaskPage as TaskPage
    from mcptasks.stores import TaskQuery as TaskQuery
    from mcptasks.stores import TaskRecord as TaskRecord
    from mcptasks.stores import TaskStats as TaskStats
    from mcptasks.stores import TaskStore as TaskStore
    from mcptasks.wire import EXTENSION_ID as EXTENSION_ID
    from mcptasks.wire import TaskState as TaskState
    from mcptasks.wire import TaskSupport as TaskSupport
