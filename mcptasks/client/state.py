"""The task states a client sees: the `CreateTaskResult` of a `tools/call` and `tasks/get`'s answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Literal

from mcp_types import CallToolResult, Result
from pydantic import ConfigDict, Field

from mcptasks.wire import TERMINAL_STATUSES


class CreateTaskResult(Result):
    """The flat `CreateTaskResult` a `tools/call` answers with (`resultType: "task"`)."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class DetailedTask(Result):
    """A `tasks/get` result: the task plus `result` (completed), `error` (failed) or the
    outstanding `inputRequests` (input_required). Unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None)

    @classmethod
    def from_created(cls, created: CreateTaskResult) -> DetailedTask:
        """The task state a `CreateTaskResult` describes."""
        data = created.model_dump(by_alias=True, mode="json", exclude_none=True)
        data["resultType"] = "complete"
        return cls.model_validate(data, by_name=False)

    @property
    def terminal(self) -> bool:
        """Completed, failed or cancelled: the status never changes again."""
        return self.status in TERMINAL_STATUSES

    def created_at_epoch(self) -> float | None:
        """`createdAt` as epoch seconds, when it parses as ISO 8601."""
        return epoch(self.created_at)

    def call_tool_result(self) -> CallToolResult:
        """The inlined `CallToolResult` of a completed task (`ValueError` for any other state)."""
        if self.status != "completed":
            raise ValueError(f"task {self.task_id} is {self.status}, not completed")
        return CallToolResult.model_validate(self.result or {"content": []}, by_name=False)

    def to_wire(self) -> dict[str, Any]:
        """The task as the JSON object the wire carried (without the SDK's `_meta` stamp)."""
        data = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        data.pop("_meta", None)
        return data


Signature = tuple[str, str | None, frozenset[str]]


def signature(task: DetailedTask) -> Signature:
    """What makes a state new to a watcher: status, statusMessage and the open input keys."""
    return task.status, task.status_message, frozenset(task.input_requests or ())


def epoch(value: str | None) -> float | None:
    """An ISO 8601 timestamp as epoch seconds (None when absent or unparsable)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


StatusCallback = Callable[[DetailedTask], Awaitable[None] | None]
"""Called with each new task state a transparent `call_tool` observes (sync or async)."""
