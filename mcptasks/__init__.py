"""mcptasks: long-running MCP tools with the Tasks extension (`io.modelcontextprotocol/tasks`).

Everything public is re-exported here; nothing else is promised. The SDK hosts (`TaskServer`,
`TasksExtension`) and the Redis / PostgreSQL stores are loaded on first use, so the engine imports
without the `mcp` SDK or the optional database drivers.
"""

from typing import TYPE_CHECKING, Any

from mcptasks._authoring.capabilities import InputCapability
from mcptasks._authoring.context import MAX_CHECKPOINT_BYTES, BodyChannel, TaskContext
from mcptasks._authoring.threaded import CancelRequested
from mcptasks._authoring.tool import FallbackMode, InvalidArguments, TaskTool, TaskToolOptions, task_tool
from mcptasks._authoring.values import InvalidValue
from mcptasks._authoring.yields import (
    Accepted,
    Answer,
    Cancelled,
    Declined,
    Delegate,
    Elicit,
    Elicitation,
    InputRequest,
    Inputs,
    InvalidAnswer,
    ListRoots,
    Result,
    Root,
    Roots,
    RootsAnswer,
    Sample,
    SampleAnswer,
    Sampled,
    Status,
    Unsupported,
    Yields,
)
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.feed import TaskFeed
from mcptasks._runtime.limits import Limits, TooManyTasks
from mcptasks._runtime.outages import StoreRetry
from mcptasks._runtime.protocol import ANONYMOUS_OWNER, TasksProtocol
from mcptasks._runtime.push import TaskPush
from mcptasks.errors import PollTooFast, ProtocolError, TaskNotFound, ToolError
from mcptasks.stores import (
    MemoryTaskStore,
    SqliteTaskStore,
    TaskExists,
    TaskRecord,
    TaskStore,
    store_from_url,
)
from mcptasks.stores.admin import RunnerLease, TaskPage, TaskQuery, TaskStats
from mcptasks.stores.url import MissingExtra
from mcptasks.wire import EXTENSION_ID, TaskStatus, TaskSupport

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
    from mcptasks.server.app import TaskServer
    from mcptasks.server.extension import TasksExtension
    from mcptasks.stores.postgres import PostgresTaskStore
    from mcptasks.stores.redis import RedisTaskStore

__version__ = "0.1.0"

_HOSTS = {
    "TaskServer": "mcptasks.server.app",
    "TasksExtension": "mcptasks.server.extension",
    "RedisTaskStore": "mcptasks.stores.redis",
    "PostgresTaskStore": "mcptasks.stores.postgres",
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
    "Accepted",
    "Answer",
    "BodyChannel",
    "CancelRequested",
    "Cancelled",
    "Declined",
    "Delegate",
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
    "Roots",
    "RootsAnswer",
    "RunnerLease",
    "Sample",
    "SampleAnswer",
    "Sampled",
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
    "Yields",
    "__version__",
    "start_tool_call",
    "store_from_url",
    "task_tool",
]
