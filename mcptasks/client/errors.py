"""The errors a client raises about the task it follows (all `TaskError`s, so `MCPTasksError`s).

`TaskNotFound` (-32602: unknown, expired or someone else's task) and `TaskError` itself live in
`mcptasks.errors`, shared with the server side.
"""

from __future__ import annotations

from mcp import MCPError
from mcp_types import ErrorData

from mcptasks.client.state import DetailedTask
from mcptasks.errors import TaskError
from mcptasks.wire import INTERNAL_ERROR


class TaskFailed(TaskError, MCPError):
    """The task ended `failed`: `code`, `message` and `data` are its JSON-RPC error."""

    task: DetailedTask

    def __init__(self, task: DetailedTask) -> None:
        error = task.error or {}
        raw_code = error.get("code")
        code = raw_code if isinstance(raw_code, int) and not isinstance(raw_code, bool) else INTERNAL_ERROR
        message = error.get("message")
        if not isinstance(message, str):
            message = task.status_message or "task failed"
        super().__init__(code, message, error.get("data"))
        self.task_id = task.task_id
        self.task = task


class _StateError(TaskError):
    """A `TaskError` about a known state of the task."""

    task: DetailedTask

    def __init__(self, message: str, task: DetailedTask) -> None:
        super().__init__(message)
        self.task_id = task.task_id
        self.task = task


class TaskCancelled(_StateError):
    """The task ended `cancelled` (by this client, another one, or the server)."""

    def __init__(self, task: DetailedTask) -> None:
        reason = f": {task.status_message}" if task.status_message else ""
        super().__init__(f"task {task.task_id} was cancelled{reason}", task)


class TaskUnreachable(TaskError, MCPError):
    """`tasks/*` kept failing with transient errors after every retry; the task may still run."""

    def __init__(self, task_id: str, error: MCPError, attempts: int, task: DetailedTask | None) -> None:
        super().__init__(error.code, f"{error.message} (task {task_id}, {attempts} attempts)", error.data)
        self.task_id = task_id
        self.task = task
        self.attempts = attempts


class TaskStuck(_StateError):
    """No change of status, statusMessage or input keys for `seconds` (see `TaskPolicy.stuck_after`)."""

    def __init__(self, task: DetailedTask, seconds: float, cancelled: bool) -> None:
        what = "; cancelled it" if cancelled else ""
        message = f"task {task.task_id} made no progress for {seconds:g} s (status {task.status}){what}"
        super().__init__(message, task)
        self.seconds = seconds
        self.cancelled = cancelled


class TaskInputError(_StateError):
    """An input request this client could not answer (a declined sampling or roots request, or
    a request it cannot parse); `error` says why. The task was cancelled when `cancelled`."""

    def __init__(self, task: DetailedTask, key: str, method: str, error: ErrorData, cancelled: bool) -> None:
        what = "; cancelled the task" if cancelled else ""
        message = (
            f"cannot answer input request {key!r} ({method}) of task {task.task_id}: {error.message}{what}"
        )
        super().__init__(message, task)
        self.key = key
        self.method = method
        self.error = error
        self.cancelled = cancelled
