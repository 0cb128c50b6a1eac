"""Related tasks (`_meta["io.modelcontextprotocol/relatedTaskIds"]`, the ext-tasks draft): which
ids of a call a server keeps, and how a body reads them.

Opt-in (`EngineConfig.related_tasks`). Each id is checked exactly as `tasks/get` would check it
for the caller; an unknown, expired or foreign id is dropped without a word, so a caller learns
nothing about tasks it may not see. Naming ids never creates a task. A malformed value (not a list
of strings, or more than `MAX_RELATED` ids) is refused with -32602 before anything is created.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any

from mcptasks._authoring.related import RelatedTask
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import TaskRecord, TaskStore
from mcptasks.wire import INVALID_PARAMS, RELATED_TASK_IDS_META

__all__ = ["MAX_RELATED", "StoreRelatedTasks", "kept_related_ids", "related_ids_named", "related_of"]

MAX_RELATED = 32
"""The most related task ids one call may name."""

Reader = Callable[[str], Awaitable[TaskRecord | None]]
"""Reads one task as its caller may see it (None: unknown, expired or foreign)."""


def related_ids_named(meta: Mapping[str, Any] | None) -> list[str]:
    """The ids a request's `_meta` names, in order, without repeats; -32602 for a malformed value."""
    value = None if meta is None else meta.get(RELATED_TASK_IDS_META)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ProtocolError(
            INVALID_PARAMS, f"_meta[{RELATED_TASK_IDS_META!r}] must be a list of task ids (strings)"
        )
    named = list(dict.fromkeys(value))
    if len(named) > MAX_RELATED:
        raise ProtocolError(
            INVALID_PARAMS,
            f"_meta[{RELATED_TASK_IDS_META!r}] names {len(named)} tasks; at most {MAX_RELATED}",
        )
    return named


async def kept_related_ids(meta: Mapping[str, Any] | None, read: Reader) -> list[str]:
    """The named ids `read` shows the caller (the others are dropped, revealing nothing)."""
    return [task_id for task_id in related_ids_named(meta) if await read(task_id) is not None]


class StoreRelatedTasks:
    """A task's related tasks read with `read` (the store, scoped to the task's owner)."""

    def __init__(self, ids: Sequence[str], read: Reader) -> None:
        self._ids = tuple(ids)
        self._read = read

    @property
    def ids(self) -> tuple[str, ...]:
        """The related task ids, in the order the call named them."""
        return self._ids

    async def read(self) -> list[RelatedTask]:
        """Each related task as it stands now; one that has since expired is left out."""
        tasks: list[RelatedTask] = []
        for task_id in self._ids:
            record = await self._read(task_id)
            if record is not None:
                tasks.append(
                    RelatedTask(
                        task_id=record.task_id,
                        tool=record.tool,
                        status=record.status,
                        status_message=record.status_message,
                        result=record.result,
                        error=record.error,
                    )
                )
        return tasks


def related_of(record: TaskRecord | None, store: TaskStore) -> StoreRelatedTasks | None:
    """How the body of `record` reads its related tasks (None: it names none): from `store`,
    scoped to the task's owner, as `tasks/get` would for the caller."""
    if record is None or not record.related_task_ids:
        return None
    return StoreRelatedTasks(record.related_task_ids, partial(store.get, owner=record.owner))
