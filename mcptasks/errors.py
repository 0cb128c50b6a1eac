"""Exceptions mcptasks raises, all under one root: `MCPTasksError`.

`ToolError` and any ordinary exception end a task `completed` with `isError: true` (a tool error is
not a task failure). `ProtocolError` ends it `failed` with a JSON-RPC error object, and is also what
the protocol layer raises for a bad request. `TaskError` is the base of the errors about one task a
client follows (`TaskNotFound` and the client's `TaskFailed`, `TaskCancelled`, ...).
"""

from __future__ import annotations

from typing import Any

from mcptasks.wire import INVALID_PARAMS


class MCPTasksError(Exception):
    """The root of every exception mcptasks raises (`except MCPTasksError` catches them all)."""


class ToolError(MCPTasksError):
    """A tool-level failure: the task completes with `isError: true` and this message as text."""


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
