"""A fast path for task requests over Streamable HTTP, below the SDK's request machinery.

Polling is the load that grows with every running task, and creating tasks the load that grows
with every client; neither needs much of what the SDK does per request (routing, a per-request
connection and session, the middleware chain, a task group for the SSE deferral). `TasksFastPath`
sits in front of the SDK's Streamable HTTP app and answers `tasks/get|update|cancel`, and opted-in
`tools/call` requests of task tools that create a task at once, itself. It runs the same checks in
the same order, with the SDK's own public pieces where they take plain data
(`classify_inbound_request`, `validate_client_request`, `modern_error_data`; the Accept,
Content-Type and Host/Origin checks are mirrored on the SDK's settings), and the same handlers
(`TasksExtension.answer_task_request`, `TasksExtension.call_task_tool`), so the bytes on the wire
are the same.

It answers only what it can answer exactly as the SDK would; everything else goes to the SDK
untouched (the body it read is handed on): other methods, GET/DELETE, other protocol versions,
notifications, batches, repeated headers, bodies that do not parse or validate, requests any check
rejects (the SDK then writes the rejection), servers with authentication, with server middleware
or other extensions it does not know, an active OpenTelemetry tracer provider (the SDK's server
spans), and cache hints for the method. A `tools/call` is taken only when its route creates a task
at once (`TasksProtocol.creates_task_at_once`), without `inputResponses` or `requestState`, and
when the SDK would not check `Mcp-Param` headers for the tool. When such a call ends otherwise than
with a `CreateTaskResult` (an immediate result, invalid arguments, an error), the SDK writes the
answer from the outcome the fast path left for it (`mcptasks.server.answered_calls`): the tool
runs once either way. A `tasks/get` of a task unchanged since its last poll (the same record
version and poll interval) is answered with the bytes of that poll's result
(`mcptasks.server.poll_answers`). Turn it off with `TaskServer.streamable_http_app(fast_path=False)`
or `mcptasks serve --fast-path off`.

Differences that do not reach the wire: no SDK debug log lines for these requests, and a request
whose client disconnects is answered to the end rather than cancelled. One that does: a request
slower than the SDK's SSE keepalive interval (15 s unless set) is answered with a JSON body where
the SDK would switch to an event stream carrying the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from mcp.server.lowlevel import Server
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp_types import (
    SERVER_INFO_META_KEY,
    CallToolRequestParams,
    JSONRPCError,
    JSONRPCRequest,
)
from mcp_types.methods import serialize_server_result, validate_client_request
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcptasks._runtime.task_results import detailed_task
from mcptasks.server.answered_calls import AnsweredCall, leave_on
from mcptasks.server.extension import TasksExtension, call_tool_result, current_owner
from mcptasks.server.http_hints import ProtocolVersionHint
from mcptasks.server.lean_http import (
    JSON_ENCODER,
    JsonReply,
    accepted_types,
    endpoint_of,
    known_middleware_types,
    request_headers,
    tracing_active,
    transport_allowed,
)
from mcptasks.server.listen_hub import ListenHub
from mcptasks.server.listen_path import TaskListenPath
from mcptasks.server.poll_answers import PollAnswers
from mcptasks.server.retry_after import RetryAfterHeader
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import EXTENSION_ID, PROTOCOL_VERSION

TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
TOOL_CALL = "tools/call"
_METHODS = frozenset({*TASK_METHODS, TOOL_CALL})
MAX_BODY = 64 * 1024
"""Larger bodies go to the SDK (a task request body is a few hundred bytes)."""
MAX_VERDICTS = 256
"""How many combinations of the headers the transport and Accept checks read are remembered."""
OWN_WRAPPERS = (ProtocolVersionHint, RetryAfterHeader)
"""The middleware `http_app` installs around the SDK's app, which the lean paths may sit in front of."""


def _sieved(result: dict[str, Any]) -> dict[str, Any] | None:
    """A complete result shaped as the SDK's outbound pass shapes a `CallToolResult` (validated
    and sieved by the 2026-07-28 surface); None when that fails (the SDK answers the failure)."""
    try:
        dumped = call_tool_result(result).model_dump(by_alias=True, mode="json", exclude_none=True)
        return serialize_server_result(TOOL_CALL, PROTOCOL_VERSION, dumped)
    except (ValidationError, KeyError, ValueError):
        return None


class FastPathStats:
    """How many requests the fast path answered (`tool_calls` of them `tools/call`), and how many
    task requests it handed to the SDK after reading them (`app.state.tasks_fast_path` of an app
    it is installed on)."""

    def __init__(self) -> None:
        self.answered = 0
        self.tool_calls = 0
        self.handed_on = 0


class TasksFastPath:
    """ASGI middleware answering task requests itself (see the module docstring)."""

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
        self._known = known_middleware_types()
        self._vetted: tuple[object, ...] | None = None
        self._stamp: dict[str, Any] | None = None
        self._verdicts: dict[tuple[str | None, ...], bool] = {}
        self._polls = PollAnswers()

    def _takes(self, scope: Scope) -> tuple[dict[str, str], bool] | None:
        """The request's headers and whether they are unique (`request_headers`) when the fast
        path reads this request, else None."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            return None
        if scope.get("root_path"):
            return None
        headers, unique = request_headers(scope)
        method = headers.get("mcp-method")
        length = headers.get("content-length")
        if headers.get("mcp-protocol-version") != PROTOCOL_VERSION or method not in _METHODS:
            return None
        if length is None or not (length.isascii() and length.isdigit()) or int(length) > self.max_body:
            return None
        if method == TOOL_CALL and headers.get("mcp-name") not in self.extension.task_tools:
            return None
        return (headers, unique) if self._server_is_plain(method) else None

    def _server_is_plain(self, method: str) -> bool:
        """No middleware, cache hint or tracer the fast path would skip."""
        if method in self.server.cache_hints or tracing_active():
            return False
        middleware = tuple(self.server.middleware)
        if middleware == self._vetted:
            return True
        if not all(isinstance(m, self._known) or self.extension.owns_middleware(m) for m in middleware):
            return False
        self._vetted = middleware
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a task request, or hand the request (and any body read) to the SDK's app."""
        taken = self._takes(scope)
        if taken is None:
            await self.app(scope, receive, send)
            return
        headers, unique = taken
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
        answered = unique and messages[-1]["type"] == "http.request"
        answer = await self._answer(scope, headers, body) if answered else None
        if answer is not None:
            self.stats.answered += 1
            await answer.send(send)
            return
        self.stats.handed_on += 1

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _answer(self, scope: Scope, headers: dict[str, str], body: bytes) -> JsonReply | None:
        if not self._admitted(headers):
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
        verdict = classify_inbound_request(decoded, headers=headers)
        if isinstance(verdict, InboundLadderRejection) or verdict.protocol_version != PROTOCOL_VERSION:
            return None
        if self.server.get_request_handler(req.method) is None:
            return None
        if req.method == TOOL_CALL:
            return await self._call_tool(scope, req)
        if req.method not in TASK_METHODS:
            return None
        return await self._dispatch(req, headers)

    async def _dispatch(self, req: JSONRPCRequest, headers: dict[str, str]) -> JsonReply:
        try:
            if req.method == "tasks/get":
                record, interval = await self.extension.read_task_request(req.params, headers)
                return self._task(req.id, record, interval)
            result = await self.extension.answer_task_request(req.method, req.params, headers)
        except Exception as exc:
            return JsonReply(JSONRPCError(jsonrpc="2.0", id=req.id, error=modern_error_data(exc)))
        return JsonReply.result(req.id, self._stamped(result))

    def _task(self, request_id: Any, record: TaskRecord, interval: int) -> JsonReply:
        """The `tasks/get` answer for `record`; its result's bytes are kept for the task's next
        poll (`PollAnswers`)."""

        def render() -> bytes:
            return JSON_ENCODER.encode(self._stamped(detailed_task(record, interval))).encode()

        try:
            result = self._polls.answer(record, interval, render)
        except (TypeError, ValueError):  # not JSON-native: the SDK's way, as `JsonReply.result` does
            return JsonReply.result(request_id, self._stamped(detailed_task(record, interval)))
        return JsonReply.encoded(request_id, result)

    async def _call_tool(self, scope: Scope, req: JSONRPCRequest) -> JsonReply | None:
        """Create the task (or answer its immediate result); an outcome the SDK must shape is
        left on `scope` for it to answer with."""
        params = self._task_call(req)
        if params is None:
            return None
        try:
            result = await self.extension.call_task_tool(params, meta=params.meta)
        except Exception as exc:
            leave_on(scope, AnsweredCall(params.name, error=exc))
            return None
        kind = result.get("resultType")
        shaped = result if kind == "task" else _sieved(result) if kind == "complete" else None
        if shaped is None:
            leave_on(scope, AnsweredCall(params.name, result=result))
            return None
        self.stats.tool_calls += 1
        return JsonReply.result(req.id, self._stamped(shaped))

    def _task_call(self, req: JSONRPCRequest) -> CallToolRequestParams | None:
        """The call's params when the SDK would run it through to the extension's interceptor
        and it creates a task at once (see the module docstring), else None."""
        if set(self.server.extensions) != {EXTENSION_ID}:
            return None  # another extension may intercept tools/call before this one
        try:
            validate_client_request(TOOL_CALL, PROTOCOL_VERSION, req.params)
            params = CallToolRequestParams.model_validate(
                {} if req.params is None else req.params, by_name=False
            )
        except (ValidationError, KeyError, ValueError):
            return None
        protocol = self.extension.protocol
        if (
            params.input_responses is not None
            or params.request_state is not None
            or protocol.is_fallback_tool(params.name)
            or not protocol.creates_task_at_once(params.name, params.meta)
            or not self._no_param_headers_checked(params.name)
        ):
            return None
        return params

    def _no_param_headers_checked(self, name: str) -> bool:
        """Whether the SDK skips `Mcp-Param` header validation for the tool `name` (it does when
        the server's schema lookup knows no such tool, as for task tools)."""
        lookup = self.server.get_tool_input_schema
        if lookup is None:
            return False
        try:
            return lookup(name) is None
        except Exception:
            return False

    def _admitted(self, headers: dict[str, str]) -> bool:
        """Whether the transport security and Accept checks let this request through, remembered
        per combination of the headers they read (clients send the same ones every time)."""
        key = (
            headers.get("content-type"),
            headers.get("host"),
            headers.get("origin"),
            headers.get("accept"),
        )
        verdict = self._verdicts.get(key)
        if verdict is None:
            has_json, has_sse = accepted_types(headers)
            verdict = (
                transport_allowed(self.security, headers)
                and has_json
                and (self.manager.json_response or has_sse)
            )
            if len(self._verdicts) >= MAX_VERDICTS:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def _stamped(self, result: dict[str, Any]) -> dict[str, Any]:
        """The result as the SDK shapes an extension method's: `resultType` and `serverInfo` `_meta`."""
        if self._stamp is None:
            # Fixed at the server's construction; the SDK hands out a fresh copy per access so
            # callers can mutate it, and this one is only ever serialised.
            self._stamp = self.server.server_info_stamp
        result = dict(result)
        if result.get("resultType") is None:
            result["resultType"] = "complete"
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._stamp}
        return result


def add_listen_path(
    app: Starlette,
    hub: ListenHub,
    *,
    owner: Callable[[], str],
    owns_middleware: Callable[[object], bool],
    path: str = "/mcp",
) -> bool:
    """Install `TaskListenPath` on `app` (the SDK's Streamable HTTP app at `path`) for `hub`.

    Installs nothing and returns False when the endpoint is not the SDK's plain Streamable HTTP
    app (authentication wraps it, for one) or other middleware than the protocol-version hint and
    the tasks fast path is installed: those listen streams keep the SDK path."""
    endpoint = endpoint_of(app, path)
    if not isinstance(endpoint, StreamableHTTPASGIApp):
        return False
    allowed = (*OWN_WRAPPERS, TasksFastPath)
    if any(cast(Any, middleware.cls) not in allowed for middleware in app.user_middleware):
        return False
    app.add_middleware(
        TaskListenPath,
        hub=hub,
        owner=owner,
        owns_middleware=owns_middleware,
        manager=endpoint.session_manager,
        path=path,
    )
    return True


def add_fast_path(app: Starlette, mcp: Any, extension: TasksExtension, *, path: str = "/mcp") -> bool:
    """Install `TasksFastPath` on `app` (the SDK's Streamable HTTP app of `mcp` at `path`), and in
    front of it the lean path of task-only listen streams (`mcptasks.server.listen_path`) when
    the extension serves push.

    Its `FastPathStats` are `app.state.tasks_fast_path`. Installs nothing and returns False when the endpoint is not the SDK's plain Streamable HTTP
    app (authentication wraps it, for one): those requests keep the SDK path."""
    endpoint = endpoint_of(app, path)
    if not isinstance(endpoint, StreamableHTTPASGIApp):
        return False
    if any(cast(Any, middleware.cls) not in OWN_WRAPPERS for middleware in app.user_middleware):
        return False
    stats = FastPathStats()
    app.add_middleware(
        TasksFastPath, extension=extension, manager=endpoint.session_manager, path=path, stats=stats
    )
    app.state.tasks_fast_path = stats
    if extension.listen_hub is not None:
        add_listen_path(
            app,
            extension.listen_hub,
            owner=current_owner,
            owns_middleware=extension.owns_middleware,
            path=path,
        )
    return True
