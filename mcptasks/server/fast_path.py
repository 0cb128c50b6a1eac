"""A fast path for `tasks/get|update|cancel` over Streamable HTTP, below the SDK's request machinery.

Polling is the load that grows with every running task, and a `tasks/*` request needs little of
what the SDK does per request (routing, a per-request connection and session, the middleware
chain, a task group for the SSE deferral). `TasksFastPath` sits in front of the SDK's Streamable
HTTP app and answers those requests itself, running the same checks in the same order with the
SDK's own public pieces (`check_accept_headers`,
`find_duplicated_routing_header`, `classify_inbound_request`, `modern_error_data`; the Host/Origin
checks of `TransportSecurityMiddleware` are mirrored on its settings) and the same
handler (`TasksExtension.answer_task_request`), so the bytes on the wire are the same.

It answers only what it can answer exactly as the SDK would; everything else goes to the SDK
untouched (the body it read is handed on): other methods, GET/DELETE, other protocol versions,
notifications, batches, bodies that do not parse or validate, requests any check rejects (the SDK
then writes the rejection), servers with authentication or with server middleware it does not
know, an active OpenTelemetry tracer provider (the SDK's server spans), and cache hints for the
method. Turn it off with `TaskServer.streamable_http_app(fast_path=False)` or
`mcptasks serve --fast-path off`.

Differences that do not reach the wire: no SDK debug log lines for these requests, and a request
whose client disconnects is answered to the end rather than cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, cast

from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import SERVER_INFO_META_KEY, JSONRPCError, JSONRPCRequest, JSONRPCResponse
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from mcptasks.server.extension import TasksExtension
from mcptasks.server.http_hints import ProtocolVersionHint
from mcptasks.server.listen import TaskListenMiddleware
from mcptasks.wire import PROTOCOL_VERSION

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
_METHOD_HEADERS = frozenset(method.encode() for method in TASK_METHODS)
_VERSION = PROTOCOL_VERSION.encode()
MAX_BODY = 64 * 1024
"""Larger bodies go to the SDK (a `tasks/*` body is a few hundred bytes)."""


def _known_middleware_types() -> tuple[type, ...]:
    # What a plain MCPServer installs (the SDK's OpenTelemetry middleware, found on a fresh server
    # rather than imported from a private module), the request-state boundary, and the listen one;
    # the extension's own middleware is recognised by `TasksExtension.owns_middleware`.
    defaults = {type(middleware) for middleware in Server("probe").middleware}
    return (*defaults, RequestStateBoundary, TaskListenMiddleware)


def _tracing_active() -> bool:
    """Whether an OpenTelemetry tracer provider is set (the SDK would record a span per request)."""
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - the SDK depends on it
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _matches(value: str, allowed: list[str]) -> bool:
    return value in allowed or any(a.endswith(":*") and value.startswith(a[:-2] + ":") for a in allowed)


def transport_allowed(settings: TransportSecuritySettings, headers: Mapping[str, str]) -> bool:
    """Whether the SDK's `TransportSecurityMiddleware` would let this POST through (its checks,
    mirrored without its warning log: a refused request goes on to the SDK, which logs and answers)."""
    content_type = headers.get("content-type")
    if content_type is None or not content_type.lower().startswith("application/json"):
        return False
    if not settings.enable_dns_rebinding_protection:
        return True
    host = headers.get("host")
    if not host or not _matches(host, settings.allowed_hosts):
        return False
    origin = headers.get("origin")
    return not origin or _matches(origin, settings.allowed_origins)


def _routing_headers(scope: Scope) -> tuple[bytes | None, bytes | None, int | None]:
    """(MCP-Protocol-Version, Mcp-Method, Content-Length) as sent, first of each."""
    version = method = length = None
    for key, value in scope["headers"]:
        if key == b"mcp-protocol-version" and version is None:
            version = value
        elif key == b"mcp-method" and method is None:
            method = value
        elif key == b"content-length" and length is None:
            length = int(value) if value.isdigit() else -1
    return version, method, length


class _Answer:
    """A JSON-RPC reply written as the SDK's `_write` writes it (the same status, headers and bytes)."""

    def __init__(self, message: JSONRPCResponse | JSONRPCError | None = None, *, body: bytes = b"") -> None:
        self.status = 200
        self.body = body
        if message is not None:
            if isinstance(message, JSONRPCError):
                self.status = ERROR_CODE_HTTP_STATUS.get(message.error.code, 200)
            dumped = message.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.body = json.dumps(dumped, separators=(",", ":")).encode()

    @classmethod
    def result(cls, request_id: Any, result: dict[str, Any]) -> _Answer:
        """A success: plain `json.dumps` of JSON-native data gives the bytes the SDK's model dump
        gives (`exclude_none` does not reach into `result`); anything else goes the SDK's way."""
        try:
            body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, separators=(",", ":"))
        except (TypeError, ValueError):
            return cls(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))
        return cls(body=body.encode())

    async def send(self, send: Send) -> None:
        # What starlette's `Response(content, status_code, media_type="application/json")` sends.
        headers = [(b"content-length", str(len(self.body)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


class FastPathStats:
    """How many requests the fast path answered, and how many `tasks/*` POSTs it handed to the SDK
    after reading them (`app.state.tasks_fast_path` of an app it is installed on)."""

    def __init__(self) -> None:
        self.answered = 0
        self.handed_on = 0


class TasksFastPath:
    """ASGI middleware answering `tasks/get|update|cancel` POSTs itself (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        extension: TasksExtension,
        manager: StreamableHTTPSessionManager,
        path: str,
        stats: FastPathStats,
    ) -> None:
        self.app = app
        self.stats = stats
        self.extension = extension
        self.manager = manager
        self.server: Server[Any] = manager.app
        self.path = path
        self.security = manager.security_settings or TransportSecuritySettings(
            enable_dns_rebinding_protection=False
        )
        self.max_body = min(MAX_BODY, manager.max_request_body_size)
        self._known = _known_middleware_types()

    def _takes(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            return False
        if scope.get("root_path"):
            return False
        version, method, length = _routing_headers(scope)
        if version != _VERSION or method not in _METHOD_HEADERS or length is None:
            return False
        return 0 <= length <= self.max_body and self._server_is_plain(method.decode())

    def _server_is_plain(self, method: str) -> bool:
        """No middleware, cache hint or tracer the fast path would skip."""
        if method in self.server.cache_hints or _tracing_active():
            return False
        return all(
            isinstance(middleware, self._known) or self.extension.owns_middleware(middleware)
            for middleware in self.server.middleware
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a `tasks/*` POST, or hand the request (and any body read) to the SDK's app."""
        if not self._takes(scope):
            await self.app(scope, receive, send)
            return
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
        answer = await self._answer(scope, body) if messages[-1]["type"] == "http.request" else None
        if answer is not None:
            self.stats.answered += 1
            await answer.send(send)
            return
        self.stats.handed_on += 1

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _answer(self, scope: Scope, body: bytes) -> _Answer | None:
        request = Request(scope)
        if not transport_allowed(self.security, request.headers):
            return None
        has_json, has_sse = check_accept_headers(request)
        if not has_json or (not self.manager.json_response and not has_sse):
            return None
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
        if (
            req.method not in TASK_METHODS
            or find_duplicated_routing_header(request.headers.items()) is not None
        ):
            return None
        headers = dict(request.headers)
        verdict = classify_inbound_request(decoded, headers=headers)
        if isinstance(verdict, InboundLadderRejection) or verdict.protocol_version != PROTOCOL_VERSION:
            return None
        if self.server.get_request_handler(req.method) is None:
            return None
        return await self._dispatch(req, headers)

    async def _dispatch(self, req: JSONRPCRequest, headers: dict[str, str]) -> _Answer:
        try:
            result = await self.extension.answer_task_request(req.method, req.params, headers)
        except Exception as exc:
            return _Answer(JSONRPCError(jsonrpc="2.0", id=req.id, error=modern_error_data(exc)))
        return _Answer.result(req.id, self._stamped(result))

    def _stamped(self, result: dict[str, Any]) -> dict[str, Any]:
        """The result as the SDK shapes an extension method's: `resultType` and `serverInfo` `_meta`."""
        result = dict(result)
        if result.get("resultType") is None:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self.server.server_info_stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self.server.server_info_stamp}
        return result


def _endpoint(app: Starlette, path: str) -> Any:
    for route in app.routes:
        if isinstance(route, Route) and route.path == path:
            return route.endpoint
    return None


def add_fast_path(app: Starlette, mcp: Any, extension: TasksExtension, *, path: str = "/mcp") -> bool:
    """Install `TasksFastPath` on `app` (the SDK's Streamable HTTP app of `mcp` at `path`).

    Its `FastPathStats` are `app.state.tasks_fast_path`. Installs nothing and returns False when the endpoint is not the SDK's plain Streamable HTTP
    app (authentication wraps it, for one): those requests keep the SDK path."""
    endpoint = _endpoint(app, path)
    if not isinstance(endpoint, StreamableHTTPASGIApp):
        return False
    if any(cast(Any, middleware.cls) is not ProtocolVersionHint for middleware in app.user_middleware):
        return False
    stats = FastPathStats()
    app.add_middleware(
        TasksFastPath, extension=extension, manager=endpoint.session_manager, path=path, stats=stats
    )
    app.state.tasks_fast_path = stats
    return True
