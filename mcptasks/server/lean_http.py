"""What the lean HTTP paths (`mcptasks.server.fast_path`, `mcptasks.server.listen_path`) share.

Both sit in front of the SDK's Streamable HTTP app and take a request only when the SDK would
handle it exactly as they do. These are the checks they mirror on plain data (the transport
security and Accept checks, unique request headers, the middleware and tracer the SDK would run)
and the JSON-RPC reply they write as the SDK writes it (`JsonReply`), with `endpoint_of` to find
the SDK's app. Neither path imports the other's module for them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import JSONRPCError, JSONRPCResponse
from opentelemetry import trace
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Scope, Send

from mcptasks.server.listen import TaskListenMiddleware
from mcptasks.server.retry_after import retry_after_header, retry_after_seconds

JSON_ENCODER = json.JSONEncoder(separators=(",", ":"))
"""`json.dumps(..., separators=(",", ":"))`, as the SDK writes a reply, without building an encoder per call."""


def known_middleware_types() -> tuple[type, ...]:
    """The SDK middleware types a lean path may run in front of (what a plain server installs)."""
    # What a plain MCPServer installs (the SDK's OpenTelemetry middleware, found on a fresh server
    # rather than imported from a private module), the request-state boundary, and the listen one;
    # the extension's own middleware is recognised by `TasksExtension.owns_middleware`.
    defaults = {type(middleware) for middleware in Server("probe").middleware}
    return (*defaults, RequestStateBoundary, TaskListenMiddleware)


def tracing_active() -> bool:
    """Whether an OpenTelemetry tracer provider is set (the SDK would record a span per request)."""
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


def accepted_types(headers: Mapping[str, str]) -> tuple[bool, bool]:
    """(JSON, SSE) acceptable, as the SDK's `check_accept_headers` reads the Accept header
    (`*/*`, `application/*` and `text/*` count). A copy, because that function takes a Starlette
    `Request`, whose header parsing costs ~6 µs of a ~75 µs `tasks/get`; the on/off comparison in
    `tests/host/test_fast_path.py` sends every Accept variant it depends on to both."""
    types = {media.strip().split(";")[0].strip().lower() for media in headers.get("accept", "").split(",")}
    wildcard = "*/*" in types
    return (
        wildcard or "application/json" in types or "application/*" in types,
        wildcard or "text/event-stream" in types or "text/*" in types,
    )


def _first_headers(scope: Scope) -> dict[str, str]:
    """The request headers as Starlette decodes them, the first of a repeated name counting."""
    headers: dict[str, str] = {}
    for key, value in scope["headers"]:
        headers.setdefault(key.decode("latin-1"), value.decode("latin-1"))
    return headers


def request_headers(scope: Scope) -> tuple[dict[str, str], bool]:
    """The request headers as Starlette decodes them, and whether every name is unique (when a
    name repeats, the first counts here and the SDK decides which counts)."""
    raw = scope["headers"]
    headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in raw}
    if len(headers) == len(raw):
        return headers, True
    return _first_headers(scope), False


class JsonReply:
    """A JSON-RPC reply written as the SDK's `_write` writes it (the same status, headers and
    bytes), with `Retry-After` for an error with `retryAfterMs` (`mcptasks.server.retry_after`)."""

    def __init__(self, message: JSONRPCResponse | JSONRPCError | None = None, *, body: bytes = b"") -> None:
        self.status = 200
        self.body = body
        self.retry_after: int | None = None
        if message is not None:
            if isinstance(message, JSONRPCError):
                self.status = ERROR_CODE_HTTP_STATUS.get(message.error.code, 200)
                self.retry_after = retry_after_seconds(message.error.data)
            dumped = message.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.body = JSON_ENCODER.encode(dumped).encode()

    @classmethod
    def result(cls, request_id: Any, result: dict[str, Any]) -> JsonReply:
        """A success: plain `json.dumps` of JSON-native data gives the bytes the SDK's model dump
        gives (`exclude_none` does not reach into `result`); anything else goes the SDK's way."""
        try:
            encoded = JSON_ENCODER.encode(result).encode()
        except (TypeError, ValueError):
            return cls(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result))
        return cls.encoded(request_id, encoded)

    @classmethod
    def encoded(cls, request_id: Any, result: bytes) -> JsonReply:
        """A success whose result is already encoded: the bytes `JSON_ENCODER` gives the whole reply."""
        identifier = JSON_ENCODER.encode(request_id).encode()
        return cls(body=b'{"jsonrpc":"2.0","id":' + identifier + b',"result":' + result + b"}")

    async def send(self, send: Send) -> None:
        # What starlette's `Response(content, status_code, media_type="application/json")` sends.
        headers = [(b"content-length", str(len(self.body)).encode()), (b"content-type", b"application/json")]
        if self.retry_after is not None:
            headers.append(retry_after_header(self.retry_after))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


def endpoint_of(app: Starlette, path: str) -> Any:
    """The endpoint of the route at `path` in `app` (None when there is none)."""
    for route in app.routes:
        if isinstance(route, Route) and route.path == path:
            return route.endpoint
    return None
