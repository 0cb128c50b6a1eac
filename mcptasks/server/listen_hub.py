"""`ListenHub`: the lean task listen streams of one `TaskPush` and their shared fan-out.

`mcptasks.server.listen_path.TaskListenPath` accepts a task-only listen request and hands the
stream to `ListenHub.serve`: per stream one small `_Stream` and the request task the ASGI server
runs anyway; one `_Fan` per followed task reads each change once (one feed `Watch` per task, not
per stream), renders its `notifications/tasks` event once (split around the subscription id) and
writes it to every stream of that task. The bytes are the SDK's: its SSE response headers, the
ack and task states serialised as its session serialises a notification, `: ping` comments after
a quiet `sse_keepalive()`, and the closing response (`closing_result`) or error as the last event.

A send that waits (a client that does not read) never holds up the others: the rest of the
fan-out moves on to another task, and a send blocked for `TaskPush.stall_timeout` ends that
stream as `slow`, as on the SDK path.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import anyio
import anyio.abc
from mcp.server.runner import modern_error_data
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
)
from pydantic import BaseModel
from starlette.types import Receive, Send

from mcptasks._runtime.push import EndReason, ListenSlot, TaskPush, notification_params
from mcptasks._runtime.task_results import detailed_task
from mcptasks.server.listen import TaskNotification, closing_result, sse_keepalive
from mcptasks.stores.base import TaskRecord

logger = logging.getLogger(__name__)

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
"""The headers the SDK commits an event-stream response with."""
PING = b": ping\r\n\r\n"
_SENTINEL = "\x00mcptasks-subscription-id\x00"
_SENTINEL_JSON = json.dumps(_SENTINEL).encode()


def sse_event(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> bytes:
    """One `event: message` frame, serialised as the SDK serialises it."""
    body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    data = json.dumps(body, separators=(",", ":"))
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


def notification_event(notification: BaseModel) -> bytes:
    """The frame of a server notification as the SDK's session sends it on a request's stream."""
    data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
    params = data.get("params")
    body = dict(params) if params is not None else None
    return sse_event(JSONRPCNotification(jsonrpc="2.0", method=data["method"], params=body))


def _task_event(params: dict[str, Any], subscription_id: Any) -> bytes:
    """The `notifications/tasks` frame of `params` on the stream of `subscription_id`."""
    meta = {SUBSCRIPTION_ID_META_KEY: subscription_id}
    return notification_event(TaskNotification(params={**params, "_meta": meta}))


class _Frame:
    """One state of a task, rendered once for every stream that follows it.

    `head + <subscription id> + tail` is the frame of a stream; `params` is kept only when the
    split was impossible (each stream then renders its own). `gone`: the task expired or was
    deleted (streams stop following it, sending nothing). `kind` "ping" is a keep-alive comment,
    "close" a stream's last event (`_Stream.closing`).
    """

    __slots__ = ("gone", "head", "kind", "owner", "params", "tail", "task_id", "terminal", "version")

    def __init__(
        self, task_id: str, record: TaskRecord | None, poll_ms: int = 0, *, kind: str = "task"
    ) -> None:
        self.task_id = task_id
        self.kind = kind
        self.gone = record is None and kind == "task"
        self.owner = record.owner if record is not None else None
        self.terminal = record is not None and record.terminal
        self.version = record.version if record is not None else -1
        self.head = self.tail = b""
        self.params: dict[str, Any] | None = None
        if record is not None:
            params = notification_params(detailed_task(record, poll_ms))
            parts = _task_event(params, _SENTINEL).split(_SENTINEL_JSON)
            if len(parts) == 2:
                self.head, self.tail = parts
            else:  # the sentinel also occurs in the task's own data
                self.params = params

    def same(self, other: _Frame) -> bool:
        """Whether both render the same state (an unchanged task is not sent again)."""
        return (self.head, self.tail, self.params) == (other.head, other.tail, other.params)

    def message(self, stream: _Stream) -> dict[str, Any]:
        """The ASGI message writing this frame on `stream`."""
        if self.kind == "ping":
            return {"type": "http.response.body", "body": PING, "more_body": True}
        if self.kind == "close":
            return {"type": "http.response.body", "body": stream.closing(), "more_body": False}
        body = _task_event(self.params, stream.request_id) if self.params is not None else None
        return {
            "type": "http.response.body",
            "body": body or self.head + stream.ident + self.tail,
            "more_body": True,
        }


_PING = _Frame("", None, kind="ping")
_CLOSE = _Frame("", None, kind="close")


class _Stream:
    """One open lean listen stream: its request, owner, slot, followed tasks and writing state.

    `busy`: a task is writing to it (frames for it meanwhile wait in `pending`, the newest per
    task; ending it meanwhile leaves the closing event to that writer). `reason` once it should
    end; `closed` once its last event is written or its client went away.
    """

    __slots__ = (
        "busy",
        "closed",
        "error",
        "ident",
        "last_write",
        "owner",
        "pending",
        "reason",
        "request_id",
        "send",
        "slot",
        "tasks",
    )

    def __init__(self, request_id: Any, slot: ListenSlot, send: Send, now: float) -> None:
        self.request_id = request_id
        self.ident = json.dumps(request_id).encode()
        self.owner = slot.owner
        self.slot = slot
        self.send = send
        self.tasks: list[str] = []
        self.pending: dict[str, _Frame] | None = None
        self.busy = False
        self.closed = False
        self.reason: EndReason | None = None
        self.error: Exception | None = None
        self.last_write = now

    def queue(self, frame: _Frame) -> None:
        """Keep `frame` for the task writing to this stream (replacing an older state of its task)."""
        if self.pending is None:
            self.pending = {}
        self.pending.pop(frame.task_id, None)
        self.pending[frame.task_id] = frame

    def closing(self) -> bytes:
        """The last event: the closing response, or the error that ended the stream."""
        if self.error is not None:
            error = modern_error_data(self.error)
            return sse_event(JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error))
        assert self.reason is not None
        result = closing_result(self.request_id, self.reason)
        return sse_event(JSONRPCResponse(jsonrpc="2.0", id=self.request_id, result=result))


class _Fan:
    """The streams of one task, and the state broadcast to them (`frame`; `next` waits for the
    broadcast in flight to finish, so a stream never gets an older state after a newer one)."""

    __slots__ = ("frame", "next", "ready", "scope", "sending", "streams", "task_id", "waiting")

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.streams: set[_Stream] = set()
        self.frame: _Frame | None = None
        self.next: _Frame | None = None
        self.sending = False
        self.scope: anyio.CancelScope | None = None
        self.ready = anyio.Event()
        """Set once `frame` is the first state read (or the fan ended without one)."""
        self.waiting: set[_Stream] = set()
        """Streams that joined before the first state: they send it themselves, in task id order."""


class _HandOn:
    """The callback `ListenHub._deliver` schedules before its sends: it runs only if a send waits
    (the loop runs callbacks only when the task yields), and then starts a new task for the
    streams after `index` and gives the waiting send `stall_timeout` (a last event: no limit)."""

    __slots__ = ("done", "fan", "frame", "hub", "index", "scope", "streams")

    def __init__(
        self,
        hub: ListenHub,
        frame: _Frame,
        streams: list[_Stream],
        index: int,
        fan: _Fan | None,
        scope: anyio.CancelScope,
    ) -> None:
        self.hub = hub
        self.frame = frame
        self.streams = streams
        self.index = index
        self.fan = fan
        self.scope = scope
        self.done = False

    def __call__(self) -> None:
        self.done = True
        if self.frame.kind != "close":  # a last event waits for the client, as on the SDK path
            self.scope.deadline = asyncio.get_running_loop().time() + self.hub.push.stall_timeout
        group = self.hub._group
        if group is not None:
            group.start_soon(self.hub._deliver, self.frame, self.streams, self.index, self.fan)


class ListenHub:
    """The lean listen streams of one `TaskPush` and their shared fan-out (see the module docstring).

    Run it for the server's lifetime (`await group.start(hub.run)`); `TasksExtension` does.
    """

    def __init__(self, push: TaskPush) -> None:
        self.push = push
        self._fans: dict[str, _Fan] = {}
        self._streams: set[_Stream] = set()
        self._group: anyio.abc.TaskGroup | None = None
        self._to_close: list[_Stream] = []
        self._closing_soon = False

    @property
    def running(self) -> bool:
        """Whether streams can be served (the hub runs and the feed accepts watches)."""
        return self._group is not None and self.push.feed.running

    @property
    def open_streams(self) -> int:
        """Lean streams open right now."""
        return len(self._streams)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve fan-outs, keep-alives and closings until cancelled; then end every stream
        (`shutdown`), writing the closing events it can within a second."""
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                self._to_close, self._closing_soon = [], False
                group.start_soon(self._keepalive)
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._group = None
            streams = [stream for stream in self._streams if not stream.closed]
            for stream in streams:
                self._end(stream, "shutdown")
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                for stream in streams:
                    if not stream.closed and not stream.busy:
                        await stream.send(_CLOSE.message(stream))
                        self._closed(stream)

    # -- one stream, in its request's task --------------------------------------------------------

    async def serve(self, request_id: Any, slot: ListenSlot, send: Send, receive: Receive) -> None:
        """Serve an accepted listen stream to its end (the slot is released when it ends).

        This task writes the ack and the current states, then only waits for the request's
        disconnect (which uvicorn also reports once the last event is written): every later
        write comes from the hub's fan-out, keep-alive and closing tasks."""
        loop = asyncio.get_running_loop()
        stream = _Stream(request_id, slot, send, loop.time())
        try:
            ack = SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(
                    notifications=SubscriptionFilter.model_validate({"taskIds": slot.task_ids}),
                    _meta={SUBSCRIPTION_ID_META_KEY: request_id},
                )
            )
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await send({"type": "http.response.body", "body": notification_event(ack), "more_body": True})
            del ack
            stream.busy = True  # changes meanwhile wait in `pending`
            self._streams.add(stream)
            fans = [self._join(stream, task_id) for task_id in sorted(slot.task_ids)]
            if not stream.tasks:
                self._end(stream, "done")
            await self._send_current(stream, fans)
            del fans
            await self._flush(stream)
            self._release(stream)
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            self._gone(stream)

    def _join(self, stream: _Stream, task_id: str) -> _Fan:
        """Follow `task_id` on `stream` (through the task's fan, started here when it is the first)."""
        fan = self._fans.get(task_id)
        if fan is None:
            fan = self._fans[task_id] = _Fan(task_id)
            assert self._group is not None
            self._group.start_soon(self._follow, fan)
        if fan.frame is None:
            fan.waiting.add(stream)
        fan.streams.add(stream)
        stream.tasks.append(task_id)
        return fan

    async def _send_current(self, stream: _Stream, fans: list[_Fan]) -> None:
        """Send the current state of each task (in task id order, as the SDK path does): its fan's
        latest state, or a newer one broadcast while the stream waited for the first read."""
        for fan in fans:
            if fan.frame is None:
                await fan.ready.wait()
        for fan in fans:
            frame = fan.frame
            waiting = stream.pending.pop(fan.task_id, None) if stream.pending else None
            if frame is None or (waiting is not None and waiting.version > frame.version):
                frame = waiting
            if frame is None or stream.reason is not None:
                continue
            if frame.gone or frame.owner != stream.owner:
                self._drop(stream, frame.task_id)
            elif not await self._write(stream, frame):
                return

    def _gone(self, stream: _Stream) -> None:
        """The request ended (its client went away, or the last event was written)."""
        if stream.reason is None:
            stream.reason = "done"
        stream.closed = True
        stream.pending = None
        self._leave(stream)
        stream.slot.release()

    def _leave(self, stream: _Stream) -> None:
        self._streams.discard(stream)
        for task_id in tuple(stream.tasks):
            self._unfollow(stream, task_id)

    def _unfollow(self, stream: _Stream, task_id: str) -> None:
        if task_id in stream.tasks:
            stream.tasks.remove(task_id)
        fan = self._fans.get(task_id)
        if fan is not None:
            fan.streams.discard(stream)
            fan.waiting.discard(stream)
            if not fan.streams:
                del self._fans[task_id]
                if fan.scope is not None:
                    fan.scope.cancel()

    def _end(self, stream: _Stream, reason: EndReason, error: Exception | None = None) -> None:
        """Let `stream` end (once): its slot is released, and its writer (or the hub's closing
        task) writes the closing event."""
        if stream.reason is not None:
            return
        stream.reason = reason
        stream.error = error
        stream.pending = None
        for task_id in tuple(stream.tasks):
            self._unfollow(stream, task_id)
        stream.slot.release()  # as on the SDK path: before the closing event is written
        if not stream.busy:
            self._close_soon(stream)

    def _close_soon(self, stream: _Stream) -> None:
        """Have the hub's closing task write the last event of `stream` (batched with others)."""
        self._to_close.append(stream)
        if not self._closing_soon and self._group is not None:
            self._closing_soon = True
            self._group.start_soon(self._close_all)

    async def _close_all(self) -> None:
        streams, self._to_close, self._closing_soon = self._to_close, [], False
        await self._deliver(_CLOSE, streams, 0, None)

    def _closed(self, stream: _Stream) -> None:
        """The last event of `stream` is written: it holds nothing any more."""
        stream.closed = True
        self._leave(stream)
        stream.slot.release()

    def _release(self, stream: _Stream) -> None:
        """A writer is done with `stream`: close it when it ended meanwhile."""
        stream.busy = False
        if stream.reason is not None and not stream.closed:
            self._close_soon(stream)

    # -- writing -----------------------------------------------------------------------------------

    def _deliver_one(self, stream: _Stream, frame: _Frame) -> bool:
        """Apply `frame` to `stream` short of writing it: False when there is nothing to write now
        (the stream ended or stops following the task, or a writer holds it and queued the frame)."""
        if stream.closed:
            return False
        if frame.kind == "close":
            return not stream.busy
        if stream.reason is not None:
            return False
        if frame.kind == "ping":
            return not stream.busy
        if frame.gone or frame.owner != stream.owner:
            self._drop(stream, frame.task_id)
            return False
        if stream.busy:
            stream.queue(frame)
            return False
        return True

    def _wrote(self, stream: _Stream, frame: _Frame, now: float) -> None:
        stream.last_write = now
        if frame.kind == "close":
            self._closed(stream)
        elif frame.terminal:
            self._drop(stream, frame.task_id)

    def _drop(self, stream: _Stream, task_id: str) -> None:
        self._unfollow(stream, task_id)
        if not stream.tasks:
            self._end(stream, "done")

    async def _write(self, stream: _Stream, frame: _Frame) -> bool:
        """Write one frame from the stream's writer; False when the stream ended (slow or gone)."""
        with anyio.move_on_after(self.push.stall_timeout) as scope:
            try:
                await stream.send(frame.message(stream))
            except Exception as exc:  # the transport failed: the request task sees the disconnect
                logger.debug("listen stream %r: write failed: %r", stream.request_id, exc)
                return False
        if scope.cancelled_caught:
            self._end(stream, "slow")
            return False
        self._wrote(stream, frame, asyncio.get_running_loop().time())
        return True

    async def _flush(self, stream: _Stream) -> None:
        """Write what waits for `stream` (its writer holds `busy`)."""
        while stream.pending and stream.reason is None:
            task_id = next(iter(stream.pending))
            frame = stream.pending.pop(task_id)
            if not await self._write(stream, frame):
                break
        stream.pending = None

    def _broadcast(self, frame: _Frame, streams: list[_Stream], fan: _Fan | None) -> None:
        assert self._group is not None
        self._group.start_soon(self._deliver, frame, streams, 0, fan)

    async def _deliver(self, frame: _Frame, streams: list[_Stream], start: int, fan: _Fan | None) -> None:
        """Write `frame` to `streams[start:]` from this task. uvicorn's send never waits on a
        client that reads; when one does wait, a callback the loop runs meanwhile (`_HandOn`)
        hands the rest of the list to a new task, and this one stays that stream's writer until
        it caught up (or `stall_timeout` ended it). The last task of a fan's broadcast starts its
        next one."""
        loop = asyncio.get_running_loop()
        current: _Stream | None = None
        with anyio.CancelScope() as scope:
            hand_on = _HandOn(self, frame, streams, start, fan, scope)
            tripwire = loop.call_soon(hand_on)
            try:
                now = loop.time()
                # the common case, checked inline: a task's new state for a stream nobody writes to
                plain = (
                    frame.kind == "task" and frame.params is None and not frame.gone and not frame.terminal
                )
                head, tail, owner = frame.head, frame.tail, frame.owner
                while hand_on.index < len(streams):
                    current = streams[hand_on.index]
                    hand_on.index += 1
                    if plain and not current.busy and current.reason is None and current.owner == owner:
                        body = head + current.ident + tail
                        message = {"type": "http.response.body", "body": body, "more_body": True}
                    elif self._deliver_one(current, frame):
                        message = frame.message(current)
                    else:
                        continue
                    current.busy = True
                    try:
                        await current.send(message)
                    except Exception as exc:
                        logger.debug("listen stream %r: write failed: %r", current.request_id, exc)
                        current.busy = False
                        current = None
                    if hand_on.done:
                        break
                    if current is not None:
                        current.busy = False
                        self._wrote(current, frame, now)
            finally:
                tripwire.cancel()
        if not hand_on.done:
            self._finished(fan)
        elif current is not None:
            await self._catch_up(current, frame, stalled=scope.cancelled_caught)

    async def _catch_up(self, stream: _Stream, frame: _Frame, *, stalled: bool) -> None:
        """After a send to `stream` waited: note it (or end the stream when it stalled), write
        what queued up meanwhile, and give the stream back."""
        if stalled:
            self._end(stream, "slow")
        else:
            self._wrote(stream, frame, asyncio.get_running_loop().time())
            await self._flush(stream)
        self._release(stream)

    def _finished(self, fan: _Fan | None) -> None:
        """A fan's broadcast reached its last stream: start the next one, if a newer state waits."""
        if fan is None:
            return
        fan.sending = False
        if fan.next is not None:
            frame, fan.next = fan.next, None
            self._send_state(fan, frame)

    def _send_state(self, fan: _Fan, frame: _Frame) -> None:
        if fan.sending:
            fan.next = frame
            return
        fan.frame = frame
        fan.ready.set()
        fan.sending = True
        if fan.waiting:
            streams = [stream for stream in fan.streams if stream not in fan.waiting]
            fan.waiting = set()
        else:
            streams = list(fan.streams)
        self._broadcast(frame, streams, fan)

    # -- following a task --------------------------------------------------------------------------

    async def _follow(self, fan: _Fan) -> None:
        """Read the task at each change (once, for every stream of it) and broadcast new states."""
        push = self.push
        try:
            with anyio.CancelScope() as fan.scope, push.feed.watch([fan.task_id]) as watch:
                last: _Frame | None = None
                while fan.streams:
                    await watch.changed(push.resync_interval)
                    if watch.closed:
                        for stream in tuple(fan.streams):
                            self._end(stream, "shutdown")
                        return
                    record = await push.engine.store.get(fan.task_id)
                    frame = _Frame(fan.task_id, record, push.engine.poll_interval_ms(record) if record else 0)
                    if last is not None and not frame.gone and frame.same(last):
                        continue
                    last = frame
                    self._send_state(fan, frame)
                    if frame.gone or frame.terminal:
                        return
        except Exception as exc:
            logger.exception("following task %s for its listeners failed", fan.task_id)
            for stream in tuple(fan.streams):
                self._end(stream, "done", exc)
        finally:
            fan.ready.set()
            if self._fans.get(fan.task_id) is fan:
                del self._fans[fan.task_id]

    async def _keepalive(self) -> None:
        """Send `: ping` on every stream quiet for `sse_keepalive()` seconds."""
        loop = asyncio.get_running_loop()
        while True:
            interval = sse_keepalive()
            await anyio.sleep(min(1.0, interval / 4))
            now = loop.time()
            due = [
                s for s in self._streams if not s.busy and s.reason is None and now - s.last_write >= interval
            ]
            if due:
                self._broadcast(_PING, due, None)
