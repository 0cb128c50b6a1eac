"""A lean path for task listen streams over Streamable HTTP, below the SDK's request machinery.

An idle `subscriptions/listen` stream served by the SDK holds its per-request machinery for as
long as it is open (two memory object streams, a task group with the handler and a disconnect
watcher, the handler's connection and session, the middleware chain's frames): some 55 KB of
server memory each. And each change of a task is sent to every listener through that machinery,
task switches and a memory stream per listener. `TaskListenPath` sits in front of the SDK's
Streamable HTTP app and serves a listen request that names only `taskIds` itself, handing the
stream to `mcptasks.server.listen_hub.ListenHub`: per stream one small object and the request
task the ASGI server runs anyway (some 12 KB in all, of which uvicorn's connection is 10); one
fan per followed task reads each change once, renders its `notifications/tasks` event once and
writes it to every stream of that task.

It takes a request only when the SDK would hand it, unchanged, to `TaskListenMiddleware`'s
task-only branch, after the same checks in the same order (the SDK's own public pieces where they
take plain data, as in `mcptasks.server.fast_path`): a POST to the endpoint with unique headers,
`MCP-Protocol-Version` 2026-07-28, `Mcp-Method: subscriptions/listen`, a `Content-Length` within
the body limit, Content-Type, Host and Origin allowed, Accept naming JSON and the event stream, a
JSON-RPC request the SDK's inbound ladder (`classify_inbound_request`) routes to 2026-07-28,
params whose `notifications` name valid `taskIds` and no core kind, a `_meta` declaring the tasks
extension, and a server with no middleware or tracer the SDK would run around the handler.
Everything else goes to the SDK untouched (the body read is handed on), so every rejection on the
wire is the SDK's own. The owner is `current_owner()`, as on the SDK path. The limits are
`TaskPush.accept`'s (its refusal is answered as the SDK answers an `MCPError`). It is installed
with the tasks fast path (`fast_path=False` turns both off) and, like it, not when the endpoint
is wrapped (the SDK's authentication does that): those listens keep the SDK path.

The bytes are the SDK's: the same response headers, the ack and the task states as the SDK
serialises a notification, `: ping` comments after a quiet `sse_keepalive()`, the closing
response (`closing_result`) or error as its last event. A send that waits (a client that does not
read) never holds up the others: the rest of the fan-out moves on to another task, and a send
blocked for `TaskPush.stall_timeout` ends that stream as `slow`, as on the SDK path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp_types import JSONRPCError, JSONRPCRequest, RequestParams, RequestParamsMeta
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcptasks._runtime.push import ListenSlot, requested_task_ids
from mcptasks.errors import ProtocolError
from mcptasks.server.lean_http import (
    JsonReply,
    accepted_types,
    known_middleware_types,
    request_headers,
    tracing_active,
    transport_allowed,
)
from mcptasks.server.listen_hub import ListenHub
from mcptasks.wire import PROTOCOL_VERSION, client_opted_in

LISTEN = "subscriptions/listen"
MAX_BODY = 64 * 1024
"""Larger listen bodies go to the SDK (1,000 task ids are some 40 KB)."""


def _meta_of(params: dict[str, Any]) -> RequestParamsMeta | None:
    """The request's `_meta` as the SDK lifts it for the handler context (None when malformed)."""
    if not params or "_meta" not in params:
        return None
    try:
        return RequestParams.model_validate(params, by_name=False).meta
    except ValidationError:
        return None


def _known_server(server: Server[Any], owns: Callable[[object], bool]) -> bool:
    if tracing_active():
        return False
    known = known_middleware_types()
    return all(isinstance(m, known) or owns(m) for m in server.middleware)


class TaskListenPath:
    """ASGI middleware serving task-only listen streams itself (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hub: ListenHub,
        owner: Callable[[], str],
        owns_middleware: Callable[[object], bool],
        manager: StreamableHTTPSessionManager,
        path: str,
    ) -> None:
        self.app = app
        self.hub = hub
        self.owner = owner
        self.owns_middleware = owns_middleware
        self.manager = manager
        self.server: Server[Any] = manager.app
        self.path = path
        self.security = manager.security_settings or TransportSecuritySettings(
            enable_dns_rebinding_protection=False
        )
        self.max_body = min(MAX_BODY, manager.max_request_body_size)

    def _takes(self, scope: Scope) -> dict[str, str] | None:
        """The request's (unique) headers when this path reads the request, else None."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            return None
        if scope.get("root_path") or not self.hub.running:
            return None
        headers, unique = request_headers(scope)
        length = headers.get("content-length")
        if not unique or headers.get("mcp-protocol-version") != PROTOCOL_VERSION:
            return None
        if headers.get("mcp-method") != LISTEN:
            return None
        if length is None or not (length.isascii() and length.isdigit()) or int(length) > self.max_body:
            return None
        return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a task-only listen stream, or hand the request (and any body read) to the SDK's app."""
        headers = self._takes(scope)
        if headers is None:
            await self.app(scope, receive, send)
            return
        accepted = await self._accept(scope, headers, receive, send)
        del headers  # nothing of the request stays referenced while the stream is open
        if accepted is not None:
            request_id, slot = accepted
            del accepted
            await self.hub.serve(request_id, slot, send, receive)

    async def _accept(
        self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send
    ) -> tuple[Any, ListenSlot] | None:
        """Read the body; the request id and the slot of a listen this path serves, else None
        once the request was answered (refused at the limits, or by the SDK's app)."""
        messages: list[Message] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        taken = self._listen(headers, body) if messages[-1]["type"] == "http.request" else None
        if taken is not None:
            request_id, task_ids, meta = taken
            try:
                return request_id, await self.hub.push.accept(task_ids, owner=self.owner(), meta=meta)
            except ProtocolError as exc:
                error = modern_error_data(MCPError(code=exc.code, message=exc.message, data=exc.data))
                await _refuse(JSONRPCError(jsonrpc="2.0", id=request_id, error=error), send)
                return None

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)
        return None

    def _listen(self, headers: dict[str, str], body: bytes) -> tuple[Any, list[str], dict[str, Any]] | None:
        """(request id, task ids, `_meta`) of a listen this path serves, else None."""
        has_json, has_sse = accepted_types(headers)
        if not (has_json and has_sse and transport_allowed(self.security, headers)):
            return None
        req = _listen_request(headers, body)
        if req is None:
            return None
        assert isinstance(req.params, dict)
        notifications = req.params.get("notifications")
        try:
            task_ids = requested_task_ids(notifications)
        except ProtocolError:
            return None  # the SDK path answers it
        if task_ids is None or not isinstance(notifications, dict):
            return None
        if any(value for key, value in notifications.items() if key != "taskIds"):
            return None  # core kinds too: the SDK's handler serves them
        meta = _meta_of(req.params)
        meta_dict = dict(meta) if meta is not None else None
        if not client_opted_in(meta_dict) or not _known_server(self.server, self.owns_middleware):
            return None
        return req.id, task_ids, meta_dict or {}


def _listen_request(headers: dict[str, str], body: bytes) -> JSONRPCRequest | None:
    """The body as a `subscriptions/listen` request with params that the SDK's inbound ladder
    routes to 2026-07-28, else None (the SDK answers whatever is wrong with it)."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(decoded, dict) or "id" not in decoded:
        return None
    try:
        req = JSONRPCRequest.model_validate(decoded)
    except ValidationError:
        return None
    if req.method != LISTEN or not isinstance(req.params, dict):
        return None
    verdict = classify_inbound_request(decoded, headers=headers)
    if isinstance(verdict, InboundLadderRejection) or verdict.protocol_version != PROTOCOL_VERSION:
        return None
    return req


async def _refuse(message: JSONRPCError, send: Send) -> None:
    """A JSON-RPC error answered as the SDK answers one raised before a stream starts."""
    await JsonReply(message).send(send)
