"""`subscriptions/listen` with `notifications.taskIds` on the official SDK's `MCPServer`.

The SDK's own listen handler serves the four core kinds and drops unknown filter keys from its
ack, so `TaskListenMiddleware` (installed on `MCPServer.middleware` by `TasksExtension.install`)
takes the listen requests that name `taskIds`:

- only task ids: it serves the stream itself (ack, task states, closing response);
- task ids and core kinds: it hands the core part to the SDK's handler (with `taskIds` removed),
  adds the agreed `taskIds` to the ack that handler sends, and pushes task states on the same
  stream once the ack is out.

Every other request passes through untouched.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal, cast

import anyio
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    Notification,
    ServerNotification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
)

from mcptasks._runtime.push import EndReason, ListenSlot, TaskPush, requested_task_ids
from mcptasks.errors import ProtocolError
from mcptasks.wire import CLOSE_REASON_META, PROTOCOL_VERSION

logger = logging.getLogger(__name__)


def set_sse_keepalive(seconds: float) -> None:
    """Send an SSE comment (`: ping`) on quiet Streamable HTTP streams every `seconds` (SDK default 15).

    The SDK has no public setting for this: the value is its module-level interval, so it applies
    to every server in the process (and is also how long an ordinary request may stay silent
    before its response switches to SSE). Raises `RuntimeError` on an SDK without it.
    """
    global _keepalive
    if not seconds > 0:
        raise ValueError("the keep-alive interval must be positive")
    from mcp.server import _streamable_http_modern as modern

    if not isinstance(getattr(modern, "_SSE_PING_INTERVAL", None), (int, float)):
        raise RuntimeError("this version of the mcp SDK has no SSE keep-alive interval to set")
    modern._SSE_PING_INTERVAL = float(seconds)
    _keepalive = float(seconds)


SDK_SSE_KEEPALIVE = 15.0
"""The SDK's keep-alive interval until `set_sse_keepalive` changes it."""

_keepalive = SDK_SSE_KEEPALIVE


def sse_keepalive() -> float:
    """The keep-alive interval of listen streams: the last `set_sse_keepalive`, else the SDK's 15 s
    (what the lean listen path, `mcptasks.server.listen_path`, pings at)."""
    return _keepalive


class TaskNotification(Notification[dict[str, Any], Literal["notifications/tasks"]]):
    """`notifications/tasks`: params are the task's `DetailedTask` plus `_meta`."""

    method: Literal["notifications/tasks"] = "notifications/tasks"


def closing_result(subscription_id: Any, reason: EndReason) -> dict[str, Any]:
    """The result that ends a task listen stream: `complete`, with the subscription id and why."""
    if reason == "slow":
        logger.warning("listen stream %r dropped: the client did not keep up", subscription_id)
    return {
        "resultType": "complete",
        "_meta": {SUBSCRIPTION_ID_META_KEY: subscription_id, CLOSE_REASON_META: reason},
    }


def _as_mcp_error(exc: ProtocolError) -> MCPError:
    return MCPError(code=exc.code, message=exc.message, data=exc.data)


class _AckMergingSession:
    """The request's session, adding `taskIds` to the ack the SDK's listen handler sends."""

    def __init__(self, session: Any, task_ids: list[str]) -> None:
        self._session = session
        self._task_ids = task_ids
        self.acked = anyio.Event()

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        if isinstance(notification, SubscriptionsAcknowledgedNotification) and not self.acked.is_set():
            merged = {**notification.params.notifications.model_dump(by_alias=True, exclude_none=True)}
            merged["taskIds"] = self._task_ids
            notification = SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(
                    notifications=SubscriptionFilter.model_validate(merged), _meta=notification.params.meta
                )
            )
            await self._session.send_notification(notification, related_request_id=related_request_id)
            self.acked.set()
            return
        await self._session.send_notification(notification, related_request_id=related_request_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class TaskListenMiddleware:
    """Serves the `taskIds` part of `subscriptions/listen` (see the module docstring)."""

    def __init__(self, push: TaskPush, owner: Callable[[], str]) -> None:
        """`owner()` names the caller of the current request (tasks are scoped to it)."""
        self.push = push
        self._owner = owner

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if (
            ctx.method != "subscriptions/listen"
            or ctx.request_id is None
            or ctx.protocol_version != PROTOCOL_VERSION
            or not isinstance(ctx.params, Mapping)
        ):
            return await call_next(ctx)
        notifications = ctx.params.get("notifications")
        try:
            task_ids = requested_task_ids(notifications)
        except ProtocolError as exc:
            raise _as_mcp_error(exc) from None
        if task_ids is None:
            return await call_next(ctx)  # no task ids: the SDK's own listen
        try:
            slot = await self.push.accept(task_ids, owner=self._owner(), meta=ctx.meta)
        except ProtocolError as exc:
            raise _as_mcp_error(exc) from None
        assert isinstance(notifications, Mapping)
        with slot:  # released when the stream ends, or if it never starts
            return await self._serve(ctx, call_next, notifications, slot)

    async def _serve(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        notifications: Mapping[str, Any],
        slot: ListenSlot,
    ) -> HandlerResult:
        agreed = slot.task_ids
        core = {k: v for k, v in notifications.items() if k != "taskIds"}
        subscription_id = ctx.request_id
        meta = {SUBSCRIPTION_ID_META_KEY: subscription_id}

        async def send(params: dict[str, Any]) -> None:
            notification = TaskNotification(params={**params, "_meta": meta})
            await ctx.session.send_notification(
                cast(ServerNotification, notification), related_request_id=subscription_id
            )

        if not any(value for value in core.values()):
            ack = SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(
                    notifications=SubscriptionFilter.model_validate({"taskIds": agreed}), _meta=meta
                )
            )
            await ctx.session.send_notification(ack, related_request_id=subscription_id)
            reason = await self.push.stream(slot, send=send)
            return closing_result(subscription_id, reason)
        return await self._with_core_kinds(ctx, call_next, core, slot, send)

    async def _with_core_kinds(
        self,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        core: dict[str, Any],
        slot: ListenSlot,
        send: Any,
    ) -> HandlerResult:
        assert isinstance(ctx.params, Mapping)
        session = _AckMergingSession(ctx.session, slot.task_ids)
        inner = dataclasses.replace(
            ctx, params={**ctx.params, "notifications": core}, session=cast(Any, session)
        )
        outcome: list[HandlerResult] = []
        failure: list[Exception] = []
        ended: list[EndReason] = []

        async with anyio.create_task_group() as group:

            async def core_part() -> None:
                try:
                    outcome.append(await call_next(inner))
                except Exception as exc:
                    failure.append(exc)
                group.cancel_scope.cancel()

            async def task_part() -> None:
                await session.acked.wait()
                reason = await self.push.stream(slot, send=send)
                if reason != "done":  # the core kinds keep the stream open otherwise
                    ended.append(reason)
                    group.cancel_scope.cancel()

            group.start_soon(core_part)
            group.start_soon(task_part)
        if failure:
            raise failure[0]
        if outcome:
            return outcome[0]
        return closing_result(ctx.request_id, ended[0] if ended else "shutdown")
