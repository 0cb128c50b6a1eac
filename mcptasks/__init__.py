"""mcptasks: long-running MCP tools with the Tasks extension (`io.modelcontextprotocol/tasks`).

Everything public is re-exported here; nothing else is promised. `_PUBLIC` below is the one table
of the public names: it drives `__all__` and the lazy loading, so `import mcptasks` is cheap and
the SDK hosts, the client and the Redis / PostgreSQL drivers are imported only when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

_PUBLIC: dict[str, str] = {
    # -- what most users need ----------------------------------------------------------------
    "task_tool": "mcptasks._authoring.tool",
    "TaskContext": "mcptasks._authoring.context",
    "Status": "mcptasks._authoring.yields",
    "Result": "mcptasks._authoring.yields",
    "Elicit": "mcptasks._authoring.yields",
    "Sample": "mcptasks._authoring.yields",
    "ListRoots": "mcptasks._authoring.yields",
    "Unsupported": "mcptasks._authoring.yields",
    "Accepted": "mcptasks._authoring.yields",
    "Declined": "mcptasks._authoring.yields",
    "Cancelled": "mcptasks._authoring.yields",
    "Answer": "mcptasks._authoring.yields",
    "Yields": "mcptasks._authoring.yields",
    "Delegate": "mcptasks._authoring.yields",
    "Step": "mcptasks._authoring.steps",
    "StepFailed": "mcptasks._authoring.steps",
    "ToolError": "mcptasks.errors",
    "ProtocolError": "mcptasks.errors",
    "MCPTasksError": "mcptasks.errors",
    "TaskServer": "mcptasks.server.app",
    "TasksExtension": "mcptasks.server.extension",
    "store_from_url": "mcptasks.stores.url",
    "MemoryTaskStore": "mcptasks.stores.memory",
    "SqliteTaskStore": "mcptasks.stores.sqlite",
    "TasksClient": "mcptasks.client.extension",
    "start_tool_call": "mcptasks.client.extension",
    "TaskHandle": "mcptasks.client.handle",
    "TaskFailed": "mcptasks.client.errors",
    "TaskCancelled": "mcptasks.client.errors",
    "TaskNotFound": "mcptasks.errors",
    # -- authoring, advanced -----------------------------------------------------------------
    "TaskTool": "mcptasks._authoring.tool",
    "TaskToolOptions": "mcptasks._authoring.tool",
    "FallbackMode": "mcptasks._authoring.tool",
    "InvalidArguments": "mcptasks._authoring.tool",
    "Elicitation": "mcptasks._authoring.yields",
    "Sampled": "mcptasks._authoring.yields",
    "SampleAnswer": "mcptasks._authoring.yields",
    "Roots": "mcptasks._authoring.yields",
    "RootsAnswer": "mcptasks._authoring.yields",
    "Root": "mcptasks._authoring.yields",
    "Inputs": "mcptasks._authoring.yields",
    "InputRequest": "mcptasks._authoring.yields",
    "InvalidAnswer": "mcptasks._authoring.yields",
    "InputCapability": "mcptasks._authoring.capabilities",
    "InvalidValue": "mcptasks._authoring.values",
    "CancelRequested": "mcptasks._authoring.threaded",
    "JournalDiverged": "mcptasks._authoring.steps",
    "JournalFull": "mcptasks._authoring.steps",
    "BodyChannel": "mcptasks._authoring.context",
    "MAX_CHECKPOINT_BYTES": "mcptasks._authoring.context",
    # -- running, advanced -------------------------------------------------------------------
    "EngineConfig": "mcptasks._runtime.config",
    "Limits": "mcptasks._runtime.limits",
    "TooManyTasks": "mcptasks._runtime.limits",
    "PollTooFast": "mcptasks.errors",
    "StoreRetry": "mcptasks._runtime.outages",
    "TaskEngine": "mcptasks._runtime.engine",
    "TasksProtocol": "mcptasks._runtime.protocol",
    "ANONYMOUS_OWNER": "mcptasks._runtime.protocol",
    "TaskPush": "mcptasks._runtime.push",
    "ListenSlot": "mcptasks._runtime.push",
    "TaskFeed": "mcptasks._runtime.feed",
    "Outcome": "mcptasks._runtime.driver",
    "Executor": "mcptasks._runtime.executor",
    "ExecutorHost": "mcptasks._runtime.executor",
    "HeldElsewhere": "mcptasks._runtime.executor",
    "HandedOver": "mcptasks._runtime.executor",
    "NotServedHere": "mcptasks._runtime.executor",
    "TemporalExecutor": "mcptasks.executors.temporal",
    "DBOSExecutor": "mcptasks.executors.dbos",
    # -- stores, advanced --------------------------------------------------------------------
    "TaskStore": "mcptasks.stores.base",
    "TaskRecord": "mcptasks.stores.base",
    "TaskExists": "mcptasks.stores.base",
    "KeepsJournal": "mcptasks.stores.base",
    "TaskQuery": "mcptasks.stores.admin",
    "TaskPage": "mcptasks.stores.admin",
    "TaskStats": "mcptasks.stores.admin",
    "RunnerLease": "mcptasks.stores.admin",
    "MissingExtra": "mcptasks.stores.extras",
    "SchemaVersionError": "mcptasks.stores.base",
    "RedisTaskStore": "mcptasks.stores.redis",
    "PostgresTaskStore": "mcptasks.stores.postgres",
    # -- client, advanced --------------------------------------------------------------------
    "TaskWatch": "mcptasks.client.watch",
    "TaskPolicy": "mcptasks.client.policy",
    "DetailedTask": "mcptasks.client.state",
    "TaskLedger": "mcptasks.client.ledger",
    "LedgerEntry": "mcptasks.client.ledger",
    "TaskError": "mcptasks.errors",
    "TaskStuck": "mcptasks.client.errors",
    "TaskInputError": "mcptasks.client.errors",
    "TaskUnreachable": "mcptasks.client.errors",
    # -- wire constants and types ------------------------------------------------------------
    "EXTENSION_ID": "mcptasks.wire",
    "TaskState": "mcptasks.wire",
    "TaskSupport": "mcptasks.wire",
}
"""Every public name and the module defining it, the user-facing ones first."""

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mcptasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})


if TYPE_CHECKING:  # the same names for type checkers and doc tools (a test keeps them equal)
    from mcptasks._authoring.capabilities import InputCapability as InputCapability
    from mcptasks._authoring.context import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
    from mcptasks._authoring.context import BodyChannel as BodyChannel
    from mcptasks._authoring.context import TaskContext as TaskContext
    from mcptasks._authoring.steps import JournalDiverged as JournalDiverged
    from mcptasks._authoring.steps import JournalFull as JournalFull
    from mcptasks._authoring.steps import Step as Step
    from mcptasks._authoring.steps import StepFailed as StepFailed
    from mcptasks._authoring.threaded import CancelRequested as CancelRequested
    from mcptasks._authoring.tool import FallbackMode as FallbackMode
    from mcptasks._authoring.tool import InvalidArguments as InvalidArguments
    from mcptasks._authoring.tool import TaskTool as TaskTool
    from mcptasks._authoring.tool import TaskToolOptions as TaskToolOptions
    from mcptasks._authoring.tool import task_tool as task_tool
    from mcptasks._authoring.values import InvalidValue as InvalidValue
    from mcptasks._authoring.yields import Accepted as Accepted
    from mcptasks._authoring.yields import Answer as Answer
    from mcptasks._authoring.yields import Cancelled as Cancelled
    from mcptasks._authoring.yields import Declined as Declined
    from mcptasks._authoring.yields import Delegate as Delegate
    from mcptasks._authoring.yields import Elicit as Elicit
    from mcptasks._authoring.yields import Elicitation as Elicitation
    from mcptasks._authoring.yields import InputRequest as InputRequest
    from mcptasks._authoring.yields import Inputs as Inputs
    from mcptasks._authoring.yields import InvalidAnswer as InvalidAnswer
    from mcptasks._authoring.yields import ListRoots as ListRoots
    from mcptasks._authoring.yields import Result as Result
    from mcptasks._authoring.yields import Root as Root
    from mcptasks._authoring.yields import Roots as Roots
    from mcptasks._authoring.yields import RootsAnswer as RootsAnswer
    from mcptasks._authoring.yields import Sample as Sample
    from mcptasks._authoring.yields import SampleAnswer as SampleAnswer
    from mcptasks._authoring.yields import Sampled as Sampled
    from mcptasks._authoring.yields import Status as Status
    from mcptasks._authoring.yields import Unsupported as Unsupported
    from mcptasks._authoring.yields import Yields as Yields
    from mcptasks._runtime.config import EngineConfig as EngineConfig
    from mcptasks._runtime.driver import Outcome as Outcome
    from mcptasks._runtime.engine import TaskEngine as TaskEngine
    from mcptasks._runtime.executor import Executor as Executor
    from mcptasks._runtime.executor import ExecutorHost as ExecutorHost
    from mcptasks._runtime.executor import HandedOver as HandedOver
    from mcptasks._runtime.executor import HeldElsewhere as HeldElsewhere
    from mcptasks._runtime.executor import NotServedHere as NotServedHere
    from mcptasks._runtime.feed import TaskFeed as TaskFeed
    from mcptasks._runtime.limits import Limits as Limits
    from mcptasks._runtime.limits import TooManyTasks as TooManyTasks
    from mcptasks._runtime.outages import StoreRetry as StoreRetry
    from mcptasks._runtime.protocol import ANONYMOUS_OWNER as ANONYMOUS_OWNER
    from mcptasks._runtime.protocol import TasksProtocol as TasksProtocol
    from mcptasks._runtime.push import ListenSlot as ListenSlot
    from mcptasks._runtime.push import TaskPush as TaskPush
    from mcptasks.client.errors import TaskCancelled as TaskCancelled
    from mcptasks.client.errors import TaskFailed as TaskFailed
    from mcptasks.client.errors import TaskInputError as TaskInputError
    from mcptasks.client.errors import TaskStuck as TaskStuck
    from mcptasks.client.errors import TaskUnreachable as TaskUnreachable
    from mcptasks.client.extension import TasksClient as TasksClient
    from mcptasks.client.extension import start_tool_call as start_tool_call
    from mcptasks.client.handle import TaskHandle as TaskHandle
    from mcptasks.client.ledger import LedgerEntry as LedgerEntry
    from mcptasks.client.ledger import TaskLedger as TaskLedger
    from mcptasks.client.policy import TaskPolicy as TaskPolicy
    from mcptasks.client.state import DetailedTask as DetailedTask
    from mcptasks.client.watch import TaskWatch as TaskWatch
    from mcptasks.errors import MCPTasksError as MCPTasksError
    from mcptasks.errors import PollTooFast as PollTooFast
    from mcptasks.errors import ProtocolError as ProtocolError
    from mcptasks.errors import TaskError as TaskError
    from mcptasks.errors import TaskNotFound as TaskNotFound
    from mcptasks.errors import ToolError as ToolError
    from mcptasks.executors.dbos import DBOSExecutor as DBOSExecutor
    from mcptasks.executors.temporal import TemporalExecutor as TemporalExecutor
    from mcptasks.server.app import TaskServer as TaskServer
    from mcptasks.server.extension import TasksExtension as TasksExtension
    from mcptasks.stores.admin import RunnerLease as RunnerLease
    from mcptasks.stores.admin import TaskPage as TaskPage
    from mcptasks.stores.admin import TaskQuery as TaskQuery
    from mcptasks.stores.admin import TaskStats as TaskStats
    from mcptasks.stores.base import KeepsJournal as KeepsJournal
    from mcptasks.stores.base import SchemaVersionError as SchemaVersionError
    from mcptasks.stores.base import TaskExists as TaskExists
    from mcptasks.stores.base import TaskRecord as TaskRecord
    from mcptasks.stores.base import TaskStore as TaskStore
    from mcptasks.stores.extras import MissingExtra as MissingExtra
    from mcptasks.stores.memory import MemoryTaskStore as MemoryTaskStore
    from mcptasks.stores.postgres import PostgresTaskStore as PostgresTaskStore
    from mcptasks.stores.redis import RedisTaskStore as RedisTaskStore
    from mcptasks.stores.sqlite import SqliteTaskStore as SqliteTaskStore
    from mcptasks.stores.url import store_from_url as store_from_url
    from mcptasks.wire import EXTENSION_ID as EXTENSION_ID
    from mcptasks.wire import TaskState as TaskState
    from mcptasks.wire import TaskSupport as TaskSupport
