"""mcptasks: long-running MCP tools with the Tasks extension (`io.modelcontextprotocol/tasks`).

Everything public is re-exported here; nothing else is promised. The SDK hosts (`TaskServer`,
`TasksExtension`) and the Redis / PostgreSQL stores are loaded on first use, so the engine imports
without the `mcp` SDK or the optional database drivers.
"""

from typing import TYPE_CHECKING, Any

from mcptasks.capabilities import InputCapability
from mcptasks.context import MAX_CHECKPOINT_BYTES, BodyChannel, TaskContext
from mcptasks.driver import Outcome
from mcptasks.engine import TaskEngine
from mcptasks.errors import PollTooFast, ProtocolError, TaskNotFound, ToolError
from mcptasks.feed import TaskFeed
from mcptasks.limits import Limits, TooManyTasks
from mcptasks.outages import StoreRetry
from mcptasks.protocol import ANONYMOUS_OWNER, TasksProtocol
from mcptasks.push import TaskPush
from mcptasks.store import MemoryTaskStore, SqliteTaskStore, TaskExists, TaskRecord, TaskStore, store_from_url
from mcptasks.store.admin import RunnerLease, TaskPage, TaskQuery, TaskStats
from mcptasks.store.url import MissingExtra
from mcptasks.threaded import CancelRequested
from mcptasks.tool import FallbackMode, InvalidArguments, TaskTool, TaskToolOptions, task_tool
from mcptasks.values import InvalidValue
from mcptasks.wire import EXTENSION_ID, TaskStatus, TaskSupport
from mcptasks.yields import (
    Elicit,
    Elicitation,
    InputRequest,
    Inputs,
    InvalidAnswer,
    ListRoots,
    Result,
    Root,
    Sample,
    SampleResult,
    Status,
    Unsupported,
)

if TYPE_CHECKING:
    from mcptasks.client import (
        DetailedTask,
        LedgerEntry,
        TaskCancelled,
        TaskError,
        TaskFailed,
        TaskHandle,
        TaskInputError,
        TaskLedger,
        TaskPolicy,
        TasksClient,
        TaskStuck,
        TaskUnreachable,
        UnknownTask,
        start_tool_call,
    )
    from mcptasks.ext import TasksExtension
    from mcptasks.server import TaskServer
    from mcptasks.store.postgres import PostgresTaskStore
    from mcptasks.store.redis import RedisTaskStore

__version__ = "0.1.0"

_HOSTS = {
    "TaskServer": "mcptasks.server",
    "TasksExtension": "mcptasks.ext",
    "RedisTaskStore": "mcptasks.store.redis",
    "PostgresTaskStore": "mcptasks.store.postgres",
    "TasksClient": "mcptasks.client",
    "TaskHandle": "mcptasks.client",
    "TaskLedger": "mcptasks.client",
    "LedgerEntry": "mcptasks.client",
    "TaskPolicy": "mcptasks.client",
    "DetailedTask": "mcptasks.client",
    "start_tool_call": "mcptasks.client",
    "TaskError": "mcptasks.client",
    "TaskFailed": "mcptasks.client",
    "TaskCancelled": "mcptasks.client",
    "TaskStuck": "mcptasks.client",
    "TaskInputError": "mcptasks.client",
    "TaskUnreachable": "mcptasks.client",
    "UnknownTask": "mcptasks.client",
}


def __getattr__(name: str) -> Any:
    if name in _HOSTS:
        import importlib

        return getattr(importlib.import_module(_HOSTS[name]), name)
    raise AttributeError(f"module 'mcptasks' has no attribute {name!r}")


__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "ANONYMOUS_OWNER",
    "BodyChannel",
    "CancelRequested",
    "DetailedTask",
    "EXTENSION_ID",
    "Elicit",
    "Elicitation",
    "FallbackMode",
    "InputCapability",
    "InputRequest",
    "Inputs",
    "InvalidAnswer",
    "InvalidArguments",
    "InvalidValue",
    "LedgerEntry",
    "Limits",
    "ListRoots",
    "MemoryTaskStore",
    "MissingExtra",
    "Outcome",
    "PollTooFast",
    "PostgresTaskStore",
    "ProtocolError",
    "StoreRetry",
    "RedisTaskStore",
    "Result",
    "Root",
    "RunnerLease",
    "Sample",
    "SampleResult",
    "SqliteTaskStore",
    "Status",
    "TaskCancelled",
    "TaskContext",
    "TaskEngine",
    "TaskError",
    "TaskExists",
    "TaskFeed",
    "TaskFailed",
    "TaskHandle",
    "TaskInputError",
    "TaskLedger",
    "TaskNotFound",
    "TaskPage",
    "TaskPush",
    "TaskPolicy",
    "TaskQuery",
    "TaskRecord",
    "TaskServer",
    "TaskStats",
    "TaskStatus",
    "TaskStore",
    "TaskStuck",
    "TaskSupport",
    "TaskTool",
    "TaskToolOptions",
    "TaskUnreachable",
    "TasksClient",
    "TasksExtension",
    "TasksProtocol",
    "TooManyTasks",
    "ToolError",
    "UnknownTask",
    "Unsupported",
    "__version__",
    "start_tool_call",
    "store_from_url",
    "task_tool",
]
