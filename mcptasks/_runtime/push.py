"""Serving `notifications/tasks` on a `subscriptions/listen` stream, free of any host SDK.

A host parses the listen request, calls `TaskPush.accept` for the ids the caller asked for (it takes
a `ListenSlot` under the process bound and the caller's per-owner share, and agrees only the
caller's own unexpired tasks, as `tasks/get` would show them), sends the ack, then runs
`TaskPush.stream` with the slot, which sends each agreed task's current state once and then every
visible change, as the `DetailedTask` that `tasks/get` would return at that moment. The slot is
released when the stream ends, or by the host when it never starts.

Guarantees: the newest state of every followed task reaches the listener (intermediate states of a
burst may be coalesced away); a task's terminal state is always sent before the stream stops
following it; a listener whose transport stalls for `stall_timeout` is dropped (its stream ends
and the task is never slowed down by it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

import anyio

from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.feed import TaskFeed
from mcptasks._runtime.limits import default_share
from mcptasks._runtime.request_params import missing_extension_error
from mcptasks._runtime.task_results import detailed_task
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import TaskRecord
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


class ListenSlot:
    """One listen stream's place under `TaskPush`'s limits, taken by `TaskPush.accept`.

    `task_ids` are the ids the listener was agreed. The slot counts against the process bound
    and its owner's share until it is released: by `TaskPush.stream` when the stream ends, or by
    `release()` (or leaving `with slot:`) when the stream never starts. Releasing twice is a no-op.
    """

    __slots__ = ("_push", "owner", "released", "task_ids")

    def __init__(self, push: TaskPush, owner: str) -> None:
        self._push = push
        self.owner = owner
        self.task_ids: list[str] = []
        self.released = False

    def release(self) -> None:
        """Give the slot back (once)."""
        if not self.released:
            self.released = True
            self._push._give_back(self.owner)

    def __enter__(self) -> ListenSlot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class _SharedRead:
    """One store read of a task, awaited by every stream that joined it."""

    __slots__ = ("changes", "done", "error", "record")

    def __init__(self, changes: int) -> None:
        self.changes = changes
        """`TaskFeed.changes` of the task when the read began."""
        self.done = anyio.Event()
        self.record: TaskRecord | None = None
        self.error: BaseException | None = None


class TaskPush:
    """Push for one engine: validates listen requests and serves their task part.

    - `stall_timeout`: seconds a single send may block before the listener is dropped.
    - `resync_interval`: seconds after which a quiet stream re-reads its tasks anyway (a change
      notification lost between replicas is then repaired; unchanged tasks are not re-sent).
    - `max_streams` / `max_streams_per_owner`: open task streams this process serves, and one
      owner may hold; `accept` refuses more with -32603 naming the bound. None (the default):
      `Limits.max_listen_streams` / `max_listen_streams_per_owner` of the engine's config.
    """

    def __init__(
        self,
        engine: TaskEngine,
        *,
        feed: TaskFeed | None = None,
        stall_timeout: float = 10.0,
        resync_interval: float = 30.0,
        max_streams: int | None = None,
        max_streams_per_owner: int | None = None,
    ) -> None:
        if stall_timeout <= 0 or resync_interval <= 0:
            raise ValueError("stall_timeout and resync_interval must be positive")
        for name, value in (("max_streams", max_streams), ("max_streams_per_owner", max_streams_per_owner)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        self.engine = engine
        self.feed = feed if feed is not None else TaskFeed()
        self.stall_timeout = stall_timeout
        self.resync_interval = resync_interval
        self._max_streams = max_streams
        self._max_per_owner = max_streams_per_owner
        self.open_streams = 0
        """Listen slots held right now (accepted streams, whether or not they started yet)."""
        self._per_owner: dict[str, int] = {}
        self._rendered: dict[str, tuple[tuple[int, float, str, int], dict[str, Any], bytes]] = {}
        self._reads: dict[str, _SharedRead] = {}
        """The store read of each task in flight, shared by the streams that want it."""

    @property
    def max_streams(self) -> int:
        """The most task streams this process serves at once."""
        if self._max_streams is not None:
            return self._max_streams
        return self.engine.config.limits.max_listen_streams

    @property
    def max_streams_per_owner(self) -> int:
        """The most task streams one owner may hold at once (never above `max_streams`)."""
        if self._max_per_owner is not None:
            return min(self._max_per_owner, self.max_streams)
        if self._max_streams is not None:
            return default_share("max_listen_streams_per_owner", self._max_streams)
        return self.engine.config.limits.listen_share

    def streams_of(self, owner: str) -> int:
        """Listen slots `owner` holds right now."""
        return self._per_owner.get(owner, 0)

    def _take(self, owner: str) -> ListenSlot:
        """Take a slot for `owner`, or raise -32603 naming the bound that is full (no await
        between the check and the count: concurrent accepts never exceed either bound)."""
        per_owner, limit = self.max_streams_per_owner, self.max_streams
        # a share equal to the process bound is full only when the process is: name the server
        if self._per_owner.get(owner, 0) >= per_owner and per_owner < limit:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Subscription limit reached: per-owner limit of {per_owner} task listen streams "
                "reached; close one or retry later",
                {"reason": "too_many_listen_streams", "scope": "owner", "limit": per_owner},
            )
        if self.open_streams >= limit:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Subscription limit reached: server limit of {limit} task listen streams reached; "
                "retry later",
                {"reason": "too_many_listen_streams", "scope": "server", "limit": limit},
            )
        self.open_streams += 1
        self._per_owner[owner] = self._per_owner.get(owner, 0) + 1
        return ListenSlot(self, owner)

    def _give_back(self, owner: str) -> None:
        self.open_streams -= 1
        left = self._per_owner.get(owner, 0) - 1
        if left > 0:
            self._per_owner[owner] = left
        else:
            self._per_owner.pop(owner, None)

    async def accept(self, task_ids: list[str], *, owner: str, meta: Mapping[str, Any] | None) -> ListenSlot:
        """Take a listen slot for `owner` and agree the ids of `task_ids` the listener gets: the
        caller's own unexpired tasks, as `tasks/get` would show them (a task that already ended
        gets its final state once); they are the slot's `task_ids`.

        Raises -32021 when the request did not declare the tasks extension in its `_meta`, and
        -32603 when `owner` holds `max_streams_per_owner` streams or the process `max_streams`
        (the message names which). The caller passes the slot to `stream`, or releases it.
        """
        if not client_opted_in(dict(meta) if meta is not None else None):
            raise missing_extension_error("subscriptions/listen with notifications.taskIds")
        slot = self._take(owner)
        try:
            for task_id in task_ids:
                if await self.engine.store.get(task_id, owner=owner) is not None:
                    slot.task_ids.append(task_id)
        except BaseException:
            slot.release()
            raise
        return slot

    async def stream(self, slot: ListenSlot, *, send: SendParams) -> EndReason:
        """Send the current state of each of the slot's tasks, then every change, until they all
        ended; the slot is released when this returns.

        `send` delivers one `notifications/tasks` params dict (the host adds the subscription
        id). Returns why the stream should end.
        """
        try:
            return await self._follow(slot.task_ids, slot.owner, send)
        finally:
            slot.release()

    def _render(self, record: TaskRecord) -> tuple[dict[str, Any], bytes]:
        """The notification params of `record` and their digest, computed once per state for all
        the streams that follow the task (a fan-out to many listeners renders it once)."""
        poll_ms = self.engine.poll_interval_ms(record)
        key = (record.version, record.updated_at, record.status, poll_ms)
        cached = self._rendered.get(record.task_id)
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        params = notification_params(detailed_task(record, poll_ms))
        text = json.dumps(params, sort_keys=True, separators=(",", ":"), default=repr)
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        self._rendered[record.task_id] = (key, params, digest)
        return params, digest

    async def _read(self, task_id: str, owner: str) -> TaskRecord | None:
        """The task's record as `owner` may see it, read once for every stream of this process
        that wants it at the same time: a stream joins a read in flight that began after the
        newest change it was told of, and reads anew otherwise (a fan-out to 10,000 listeners
        costs one store read per change, not 10,000)."""
        seen = self.feed.changes(task_id)
        shared = self._reads.get(task_id)
        if shared is None or shared.changes < seen:
            shared = self._reads[task_id] = _SharedRead(seen)
            try:
                shared.record = await self.engine.store.get(task_id)
            except BaseException as exc:
                shared.error = exc
                raise
            finally:
                if self._reads.get(task_id) is shared:
                    del self._reads[task_id]
                shared.done.set()
        else:
            await shared.done.wait()
            if shared.error is not None:
                raise RuntimeError(f"reading task {task_id} for its listeners failed") from shared.error
        record = shared.record
        return record if record is not None and record.owner == owner else None

    def _forget(self, task_ids: Iterable[str]) -> None:
        """Drop the rendered states of `task_ids` that no stream of this process follows."""
        for task_id in task_ids:
            if not self.feed.watching(task_id):  # its change count starts again from 0
                self._rendered.pop(task_id, None)
                self._reads.pop(task_id, None)

    async def _follow(self, task_ids: list[str], owner: str, send: SendParams) -> EndReason:
        # per task, the digest of the state sent last: an idle stream keeps no copy of its own
        last: dict[str, bytes] = {}
        try:
            with self.feed.watch(task_ids) as watch:
                while watch.ids:
                    dirty = await watch.changed(self.resync_interval)
                    if watch.closed:
                        return "shutdown"
                    for task_id in sorted(dirty):
                        record = await self._read(task_id, owner)
                        if record is None:  # expired or deleted: nothing more will come
                            watch.drop(task_id)
                            continue
                        params, digest = self._render(record)
                        if digest != last.get(task_id):
                            with anyio.move_on_after(self.stall_timeout) as scope:
                                await send(params)
                            if scope.cancelled_caught:
                                return "slow"
                            last[task_id] = digest
                        if record.terminal:
                            watch.drop(task_id)
                        del record, params
            return "done"
        finally:
            self._forget(task_ids)
