"""Serving `notifications/tasks` on a `subscriptions/listen` stream, free of any host SDK.

A host parses the listen request, calls `TaskPush.accept` for the ids the caller asked for (only
the caller's own unexpired tasks are agreed, as `tasks/get` would show them), sends the ack, then runs
`TaskPush.stream`, which sends each agreed task's current state once and then every visible
change, as the `DetailedTask` that `tasks/get` would return at that moment.

Guarantees: the newest state of every followed task reaches the listener (intermediate states of a
burst may be coalesced away); a task's terminal state is always sent before the stream stops
following it; a listener whose transport stalls for `stall_timeout` is dropped (its stream ends
and the task is never slowed down by it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import anyio

from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.feed import TaskFeed
from mcptasks._runtime.protocol import detailed_task, missing_extension_error
from mcptasks.errors import ProtocolError
from mcptasks.wire import INTERNAL_ERROR, INVALID_PARAMS, client_opted_in

TASK_NOTIFICATION = "notifications/tasks"
"""The method of a pushed task state (never the pre-2026 `notifications/tasks/status`)."""

MAX_TASK_IDS = 1000
"""The most task ids one listen request may name."""

EndReason = Literal["done", "shutdown", "slow"]
"""Why a task stream ended: every followed task ended, the server is stopping, or the listener
could not keep up."""

SendParams = Callable[[dict[str, Any]], Awaitable[None]]


def requested_task_ids(notifications: object) -> list[str] | None:
    """The `taskIds` of a listen request's `notifications` filter (None when absent).

    Raises -32602 when `taskIds` is not a list of at most `MAX_TASK_IDS` strings.
    """
    if not isinstance(notifications, Mapping) or "taskIds" not in notifications:
        return None
    task_ids = notifications["taskIds"]
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        raise ProtocolError(INVALID_PARAMS, "notifications.taskIds must be an array of task id strings")
    if len(task_ids) > MAX_TASK_IDS:
        raise ProtocolError(INVALID_PARAMS, f"notifications.taskIds names more than {MAX_TASK_IDS} tasks")
    return list(dict.fromkeys(task_ids))


def notification_params(task: Mapping[str, Any]) -> dict[str, Any]:
    """`notifications/tasks` params from a `tasks/get` result: the same `DetailedTask`."""
    return {k: v for k, v in task.items() if k != "resultType"}


class TaskPush:
    """Push for one engine: validates listen requests and serves their task part.

    - `stall_timeout`: seconds a single send may block before the listener is dropped.
    - `resync_interval`: seconds after which a quiet stream re-reads its tasks anyway (a change
      notification lost between replicas is then repaired; unchanged tasks are not re-sent).
    - `max_streams`: open task streams this process serves; `accept` refuses more with -32603.
    """

    def __init__(
        self,
        engine: TaskEngine,
        *,
        feed: TaskFeed | None = None,
        stall_timeout: float = 10.0,
        resync_interval: float = 30.0,
        max_streams: int = 1024,
    ) -> None:
        if stall_timeout <= 0 or resync_interval <= 0:
            raise ValueError("stall_timeout and resync_interval must be positive")
        if max_streams < 1:
            raise ValueError("max_streams must be a positive integer")
        self.engine = engine
        self.feed = feed if feed is not None else TaskFeed()
        self.stall_timeout = stall_timeout
        self.resync_interval = resync_interval
        self.max_streams = max_streams
        self.open_streams = 0
        """Task streams being served right now."""

    async def accept(self, task_ids: list[str], *, owner: str, meta: Mapping[str, Any] | None) -> list[str]:
        """The ids of `task_ids` the listener gets: the caller's own unexpired tasks, as `tasks/get`
        would show them (a task that already ended gets its final state once).

        Raises -32021 when the request did not declare the tasks extension in its `_meta`, and
        -32603 when `max_streams` streams are open already.
        """
        if not client_opted_in(dict(meta) if meta is not None else None):
            raise missing_extension_error("subscriptions/listen with notifications.taskIds")
        if self.open_streams >= self.max_streams:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Subscription limit reached ({self.max_streams} task listen streams); retry later",
            )
        agreed = []
        for task_id in task_ids:
            if await self.engine.store.get(task_id, owner=owner) is not None:
                agreed.append(task_id)
        return agreed

    async def stream(self, task_ids: list[str], *, owner: str, send: SendParams) -> EndReason:
        """Send the current state of each task, then every change, until they all ended.

        `send` delivers one `notifications/tasks` params dict (the host adds the subscription
        id). Returns why the stream should end.
        """
        self.open_streams += 1
        try:
            return await self._follow(task_ids, owner, send)
        finally:
            self.open_streams -= 1

    async def _follow(self, task_ids: list[str], owner: str, send: SendParams) -> EndReason:
        store = self.engine.store
        last: dict[str, dict[str, Any]] = {}  # per task, the params sent last
        with self.feed.watch(task_ids) as watch:
            while watch.ids:
                dirty = await watch.changed(self.resync_interval)
                if watch.closed:
                    return "shutdown"
                for task_id in sorted(dirty):
                    record = await store.get(task_id, owner=owner)
                    if record is None:  # expired or deleted: nothing more will come
                        watch.drop(task_id)
                        continue
                    params = notification_params(detailed_task(record, self.engine.poll_interval_ms(record)))
                    if params != last.get(task_id):
                        with anyio.move_on_after(self.stall_timeout) as scope:
                            await send(params)
                        if scope.cancelled_caught:
                            return "slow"
                        last[task_id] = params
                    if record.terminal:
                        watch.drop(task_id)
        return "done"
