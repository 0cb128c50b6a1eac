"""`NewRecords`: the record of a new task, before it is stored."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from mcptasks._authoring.tool import TaskTool
from mcptasks.stores.base import TaskRecord


def new_task_id() -> str:
    """A fresh task id: 256 random bits from `secrets`, URL-safe (43 characters).

    Ids never start with "-", so they are safe as command-line arguments.
    """
    while True:
        task_id = secrets.token_urlsafe(32)
        if not task_id.startswith("-"):
            return task_id


class NewRecords:
    """Makes the records of new tasks (sharing equal client capabilities between them)."""

    def __init__(self) -> None:
        self._capabilities: dict[str, Any] | None = None
        """The client capabilities of the last task created (see `_shared_capabilities`)."""

    def make(
        self,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        owner: str,
        runner: str | None,
        idempotency_key: str | None,
        client_capabilities: Mapping[str, Any] | None,
        related_task_ids: Sequence[str] = (),
    ) -> TaskRecord:
        """The record of a new task of `tool` (`runner`: None while it is queued)."""
        return TaskRecord(
            task_id=new_task_id(),
            owner=owner,
            tool=tool.name,
            ttl_ms=tool.ttl_ms,
            poll_interval_ms=tool.poll_interval_ms,
            arguments=dict(arguments or {}),
            runner=runner,
            idempotency_key=idempotency_key,
            client_capabilities=self._shared_capabilities(client_capabilities),
            related_task_ids=list(related_task_ids),
        )

    def _shared_capabilities(self, declared: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """A copy of `declared` for a new record: the last task's copy when equal (clients send
        the same capabilities call after call, and records are values, so they can share it)."""
        if declared is None:
            return None
        last = self._capabilities
        if last is not None and last == declared:
            return last
        copy = self._capabilities = dict(declared)
        return copy
