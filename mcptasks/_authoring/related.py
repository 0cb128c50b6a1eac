"""The tasks a call named as related to it, as its body reads them (`TaskContext.related_tasks`).

A client may name earlier tasks of its own in `_meta["io.modelcontextprotocol/relatedTaskIds"]`
(the ext-tasks draft) when it calls a task tool; a server with `EngineConfig.related_tasks` keeps
the ids it may show that caller, and the body reads those tasks' state and results here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mcptasks.wire import TERMINAL_STATUSES, TaskState

__all__ = ["RelatedTask", "RelatedTasks"]


@dataclass(frozen=True, slots=True)
class RelatedTask:
    """One related task as it stands when the body reads it."""

    task_id: str
    tool: str
    status: TaskState
    status_message: str | None = None
    result: dict[str, Any] | None = None
    """Its `CallToolResult` once completed."""
    error: dict[str, Any] | None = None
    """Its JSON-RPC error once failed."""

    @property
    def terminal(self) -> bool:
        """Whether it reached `completed`, `failed` or `cancelled`."""
        return self.status in TERMINAL_STATUSES


class RelatedTasks(Protocol):
    """What a `TaskContext` reads its related tasks through (the engine gives it one)."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The related task ids kept for this task, in the order the call named them."""
        ...

    async def read(self) -> list[RelatedTask]:
        """Each related task as it stands now; one that has since expired is left out."""
        ...
