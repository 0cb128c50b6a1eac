"""Every exception mcptasks raises that user code can meet, in one tree under `MCPTasksError`.

    MCPTasksError                 the root: `except MCPTasksError` catches everything below
    ├── ToolError                 raised by a body: the task completes with isError: true
    │   └── InvalidArguments      arguments the tool's input schema rejects; no task is created
    ├── ProtocolError             a JSON-RPC error (code, message, data); raised by a body: the task fails
    │   ├── TaskNotFound          -32602: an unknown, expired or foreign task id (also a TaskError)
    │   ├── PollTooFast           -32000: tasks/get sooner than pollIntervalMs allows (reject mode)
    │   ├── TooManyTasks          -32000: the owner's or the server's running tasks are at their limit
    │   ├── JournalDiverged       -32603 journal_diverged: a replayed durable body left its journal
    │   ├── JournalFull           -32603 journal_full: a durable body's journal reached its bound
    │   └── StepBeforeTask        -32603 step_before_task: a durable body's step before its task exists
    ├── TaskError                 about one task a client follows: task_id, task (last known state)
    │   ├── TaskNotFound
    │   ├── TaskFailed            (mcptasks.client) the task ended failed; also the SDK's MCPError
    │   ├── TaskUnreachable       (mcptasks.client) tasks/* kept failing; also the SDK's MCPError
    │   ├── TaskCancelled         (mcptasks.client) the task ended cancelled
    │   ├── TaskStuck             (mcptasks.client) no change for TaskPolicy.stuck_after seconds
    │   └── TaskInputError        (mcptasks.client) an input request the client could not answer
    ├── StepFailed                a step's function raised (ctx.step, yield Step): .step, .type, .message
    ├── CancelRequested           raised in a body by TaskContext.check_cancelled()
    ├── InvalidAnswer             a client's answer does not fit the request; it is asked again
    ├── InvalidValue              a yielded value is not JSON (also a TypeError)
    ├── UnsupportedYield          thrown into a body that yielded what no driver understands (also a TypeError)
    ├── TaskExists                TaskStore.create with an id already stored
    ├── SchemaVersionError        a database of an unknown schema version (also a RuntimeError)
    ├── StoreNotFound             open_existing found no task store at the URL (also a LookupError)
    ├── DatabaseNotFound          the PostgreSQL server has no such database (also a ConnectionError)
    ├── MissingExtra              an optional part's library is not installed (also an ImportError)
    ├── HeldElsewhere             ExecutorHost.run_task: another live runner holds the task
    ├── NotServedHere             ExecutorHost.run_task: this worker lacks the task's tool
    └── HandedOver                ExecutorHost.run_task: the body stopped here; the task runs again elsewhere

`ToolError` and any ordinary exception end a task `completed` with `isError: true` (a tool error is
not a task failure). `ProtocolError` ends it `failed` with a JSON-RPC error object, and is also what
the protocol layer raises for a bad request. `TaskError` is the base of the errors about one task a
client follows. The client's errors marked above live in `mcptasks.client`, because they are also
the `mcp` SDK's `MCPError` and this module imports no SDK; `mcptasks` exports `TaskFailed` and
`TaskCancelled` too.
"""

from __future__ import annotations

from typing import Any

from mcptasks.wire import INTERNAL_ERROR, INVALID_PARAMS

_TOO_MANY_TASKS = -32000

__all__ = [
    "MCPTasksError",
    "ToolError",
    "InvalidArguments",
    "ProtocolError",
    "TaskError",
    "TaskNotFound",
    "PollTooFast",
    "TooManyTasks",
    "JournalDiverged",
    "JournalFull",
    "StepBeforeTask",
    "StepFailed",
    "CancelRequested",
    "InvalidAnswer",
    "InvalidValue",
    "UnsupportedYield",
    "TaskExists",
    "SchemaVersionError",
    "StoreNotFound",
    "DatabaseNotFound",
    "MissingExtra",
    "HeldElsewhere",
    "NotServedHere",
    "HandedOver",
]


class MCPTasksError(Exception):
    """The root of every exception mcptasks raises (`except MCPTasksError` catches them all)."""


class ToolError(MCPTasksError):
    """A tool-level failure: the task completes with `isError: true` and this message as text."""


class InvalidArguments(ToolError):
    """The tool was called with arguments its input schema rejects; no task is created."""


class ProtocolError(MCPTasksError):
    """A JSON-RPC error: raised by a body, the task ends `failed` with this error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC error object (`code`, `message`, `data` when set)."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, data={self.data!r})"


class TaskError(MCPTasksError):
    """An error about one task: `task_id` names it, `task` is its last known state (a client's
    `DetailedTask`) or None when none is known."""

    task_id: str
    task: Any = None


class TaskNotFound(ProtocolError, TaskError):
    """An unknown, expired or foreign task id; on the wire it is -32602.

    A server raises it for a `tasks/*` request naming such a task; a client raises it when the
    server answered one of its `tasks/*` requests with -32602 (`message` and `data` are then the
    server's).
    """

    def __init__(self, task_id: str, message: str = "Unknown task", data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data if data is not None else {"taskId": task_id})
        self.task_id = task_id
        self.task = None


class PollTooFast(ProtocolError):
    """A client polled `tasks/get` faster than the task's `pollIntervalMs` allows (reject mode)."""

    def __init__(self, task_id: str, retry_after_ms: int) -> None:
        super().__init__(
            -32000,
            f"Polling too fast: wait {retry_after_ms} ms before the next tasks/get for this task",
            {"taskId": task_id, "retryAfterMs": retry_after_ms},
        )
        self.retry_after_ms = retry_after_ms


class TooManyTasks(ProtocolError):
    """A create refused because the owner or the server has too many running tasks."""

    def __init__(self, scope: str, limit: int, retry_after_ms: int) -> None:
        # worded as `mcptasks._runtime.limits.reached` words every refusal of a limit
        who = "you have reached the per-owner" if scope == "owner" else "this server has reached the server"
        super().__init__(
            _TOO_MANY_TASKS,
            f"Too many active tasks: {who} limit of {limit} running tasks; retry in {retry_after_ms} ms "
            "or after some finish",
            {"reason": "too_many_tasks", "retryAfterMs": retry_after_ms, "limit": limit, "scope": scope},
        )
        self.retry_after_ms = retry_after_ms


class JournalDiverged(ProtocolError):
    """A replayed durable body asked for a different step or question than its journal holds at
    that position (its code changed while the task was in flight, or it decided on time or
    randomness outside a step): the task fails with this, naming the position."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(INTERNAL_ERROR, message, {"reason": "journal_diverged", "position": position})
        self.position = position


class JournalFull(ProtocolError):
    """A durable body's journal reached one of its bounds (`Limits.max_journal_entries`,
    `Limits.max_journal_bytes`): the task fails with this, naming the bound."""

    def __init__(self, message: str) -> None:
        super().__init__(INTERNAL_ERROR, message, {"reason": "journal_full"})


class StepBeforeTask(ProtocolError):
    """A durable tool's body reached a step while it ran before its task existed (its
    `input_before_task` rounds): the call fails with this before the step runs. Those rounds run
    the body again on every round and every re-sent call, with nowhere to journal a step that a
    client could not replay, so a step there would run any number of times."""

    def __init__(self, tool: str, step: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"Task tool {tool!r} reached step {step!r} before its task exists (in its input_before_task "
            "rounds, which run the body again on every round and every re-sent call, so the step "
            "would not run once); a durable tool's steps run in its task: start the task before the "
            "first step by yielding a status (or `yield Step(...)`) after the last before_task question",
            {"reason": "step_before_task", "step": step},
        )


class StepFailed(MCPTasksError):
    """A step's function raised: what `ctx.step` raises, on the run that called the function
    (with the original exception as `__cause__`) and on every replay of the body (from the
    journal), so a durable body sees the same exception either way. (A `ToolError` or a
    `ProtocolError` is raised as itself: it says how the task ends.)

    `type` is the original exception's class name, `message` its text, `step` the step's name.
    """

    def __init__(self, step: str, type: str, message: str) -> None:
        super().__init__(
            f"step {step!r} raised {type}: {message}" if message else f"step {step!r} raised {type}"
        )
        self.step = step
        self.type = type
        self.message = message


class CancelRequested(MCPTasksError):
    """The task was cancelled (or the server is shutting down): raised in a body by
    `TaskContext.check_cancelled()`, and at the `yield` of a `def` generator being stopped."""

    def __init__(self, message: str = "the task was cancelled") -> None:
        super().__init__(message)


class InvalidAnswer(MCPTasksError):
    """A client's answer did not fit the request; the request is issued again with this reason."""


class InvalidValue(MCPTasksError, TypeError):
    """A yielded value cannot be stored or sent as JSON (the message says where and why)."""


class UnsupportedYield(MCPTasksError, TypeError):
    """Thrown into a generator that yielded a value the driver does not understand."""


class TaskExists(MCPTasksError):
    """`create` was given a task id that is already stored."""


class SchemaVersionError(MCPTasksError, RuntimeError):
    """The database (an SQLite file, a PostgreSQL schema) holds a schema this version of mcptasks
    cannot use: written by a newer mcptasks, or a foreign `tasks` table."""


class StoreNotFound(MCPTasksError, LookupError):
    """`open_existing` found no task store where the URL points (no such file, no such schema,
    or one mcptasks never wrote to)."""


class DatabaseNotFound(MCPTasksError, ConnectionError):
    """The PostgreSQL server has no database of the name the store's URL gives."""

    store_hint = "mcptasks creates its schema and tables in an existing database, not the database"
    """What the CLI adds after the message (`mcptasks.stores.url.store_error_hint`)."""


class MissingExtra(MCPTasksError, ImportError):
    """A store backend's (or another optional part's) library is not installed; the message names
    the pip command. `what` names the part when it is no store (`the metrics endpoint`)."""

    def __init__(self, backend: str, package: str, extra: str, *, what: str | None = None) -> None:
        super().__init__(
            f"{what or f'the {backend} store'} needs the {package!r} package, which is not installed: "
            f"pip install 'mcptasks[{extra}]'",
            name=package,
        )
        self.extra = extra


class HeldElsewhere(MCPTasksError):
    """`run_task` found the task held by another live runner: try again later."""

    def __init__(self, task_id: str, runner: str) -> None:
        super().__init__(f"task {task_id} is running on {runner}, which is still alive; try again later")
        self.runner = runner


class NotServedHere(MCPTasksError):
    """`run_task` was asked to run a task whose tool this worker does not know, while the store
    keeps tool offers (a rolling deploy): the executor must run it on another worker. The task
    fails (`no_worker_for_tool`) once no live worker has offered its tool for `no_worker_timeout`."""

    def __init__(self, task_id: str, tool: str) -> None:
        super().__init__(f"task {task_id} needs the task tool {tool!r}, which this worker does not run")
        self.tool = tool


class HandedOver(MCPTasksError):
    """`run_task` stopped the body without ending the task (this worker is shutting down, or the
    store could not be reached): the task is back in the queue and must run again elsewhere."""

    def __init__(self, task_id: str, why: str) -> None:
        super().__init__(f"task {task_id} did not end here ({why}); it must run again")
