"""`TasksExtension`: the Tasks extension for the official MCP SDK's `MCPServer`.

    ext = TasksExtension(store="sqlite:///tasks.db")

    @ext.task_tool(poll_interval=2)
    async def build(target: str):
        yield f"building {target}"
        yield Result("ok")

    server = MCPServer("ci", extensions=[ext], lifespan=ext.lifespan())
    ext.attach(server)        # lists the task tools in tools/list, serves task listen streams

The extension advertises `io.modelcontextprotocol/tasks` in `server/discover`, serves
`tasks/get|update|cancel` on 2026-07-28 connections, and intercepts `tools/call` for its task
tools. Task bodies run on the engine's task group, which `lifespan()` starts and stops.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, overload

import anyio
from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolRequestParams, CallToolResult, RequestParams, ToolAnnotations
from pydantic import BaseModel, ConfigDict
from typing_extensions import Unpack

from mcptasks._authoring.tool import FallbackMode, TaskTool, TaskToolOptions, task_tool
from mcptasks._runtime.engine import PollLimit, TaskEngine
from mcptasks._runtime.limits import Limits
from mcptasks._runtime.protocol import ANONYMOUS_OWNER, TasksProtocol
from mcptasks._runtime.push import TaskPush
from mcptasks._runtime.request_state import RequestStateCodec
from mcptasks.errors import ProtocolError
from mcptasks.server.listen import TaskListenMiddleware, set_sse_keepalive
from mcptasks.stores.base import TaskStore
from mcptasks.stores.url import store_from_url
from mcptasks.wire import EXTENSION_ID, PROTOCOL_VERSION

_EXTENSIONS_BY_SERVER: weakref.WeakKeyDictionary[MCPServer[Any], TasksExtension] = weakref.WeakKeyDictionary()

Lifespan = Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]]


class _AnyParams(RequestParams):
    """Accept any params so the protocol layer can name the offending field itself."""

    model_config = ConfigDict(extra="allow")


async def _never_called(**kwargs: Any) -> Any:
    raise RuntimeError("task tool calls are answered by TasksExtension.intercept_tool_call")


# Unstructured on purpose: without it, Python 3.10 resolves the postponed `Any` return annotation
# differently and the SDK publishes an output schema that no task tool's result matches.
_UNUSED_METADATA = func_metadata(_never_called, structured_output=False)


def current_owner() -> str:
    """The task owner for this request: the authenticated principal, or the anonymous scope."""
    token = get_access_token()
    if token is None:
        return ANONYMOUS_OWNER
    client_id, issuer, subject = principal_components(token)
    return json.dumps([issuer, subject or client_id], separators=(",", ":"))


def _raw(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


def _call_tool_result(result: Mapping[str, Any]) -> CallToolResult:
    # The SDK stamps resultType itself and checks the result against the tool's output schema.
    return CallToolResult.model_validate({k: v for k, v in result.items() if k != "resultType"})


def _mcp_error(exc: ProtocolError) -> MCPError:
    return MCPError(code=exc.code, message=exc.message, data=exc.data)


class TasksExtension(Extension):
    """Serve task tools over the official SDK's `MCPServer` (`io.modelcontextprotocol/tasks`).

    `store` is a `TaskStore` or URL; engine options (`poll_limit`, `adaptive_poll_max`, `limits`)
    are passed to `TaskEngine`. `fallback` chooses what task tools do for requests without the
    extension: `"inline"` (default), `"tools"` (start the task, list `task_status` /
    `task_answer` / `task_cancel`; see `mcptasks._runtime.fallback`) or `"reject"` (-32021).
    `immediate_results`: a task whose body finishes without suspending is answered with its result
    at once instead of a task handle (the extension allows either). `secret` signs MRTR `requestState` (set it, or `MCPTASKS_SECRET`, when
    several replicas serve one URL). `push` (default True) serves `subscriptions/listen` with
    `notifications.taskIds` (`notifications/tasks` pushes, across replicas through the store);
    `keepalive` sets the seconds between SSE keep-alive comments (process-wide, see
    `mcptasks.server.listen.set_sse_keepalive`).
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        store: TaskStore | str = "memory://",
        *,
        tools: Sequence[TaskTool] = (),
        secret: str | bytes | None = None,
        poll_limit: PollLimit = "off",
        adaptive_poll_max: float | None = None,
        fallback: FallbackMode = "inline",
        immediate_results: bool = True,
        engine: TaskEngine | None = None,
        limits: Limits | None = None,
        push: bool = True,
        keepalive: float | None = None,
    ) -> None:
        self.engine = (
            engine
            if engine is not None
            else TaskEngine(store, poll_limit=poll_limit, adaptive_poll_max=adaptive_poll_max, limits=limits)
        )
        self.engine.announce_changes = push
        self.push: TaskPush | None = TaskPush(self.engine) if push else None
        """Serves `notifications/tasks` on `subscriptions/listen` (None when `push=False`)."""
        if keepalive is not None:
            set_sse_keepalive(keepalive)
        self.protocol = TasksProtocol(
            self.engine,
            codec=RequestStateCodec(secret),
            fallback=fallback,
            immediate_results=immediate_results,
        )
        self._servers: weakref.WeakSet[MCPServer[Any]] = weakref.WeakSet()
        self._lifespan_guests = 0
        self._guests_left = anyio.Event()
        for tool in tools:
            self.add_tool(tool)

    # -- registering tools ---------------------------------------------------------------------

    @property
    def task_tools(self) -> dict[str, TaskTool]:
        """The task tools by name."""
        return self.protocol.tools

    def add_tool(self, tool: TaskTool) -> TaskTool:
        """Register a decorated task tool (and list it on every attached server)."""
        self.protocol.add_tool(tool)
        for server in self._servers:
            self._list_tools(server)
        return tool

    def _list_tools(self, server: MCPServer[Any]) -> None:
        for tool in self.protocol.tools.values():
            _register(server, tool.definition())
        for definition in self.protocol.fallback_tool_definitions():
            _register(server, definition)

    @overload
    def task_tool(self, fn: Callable[..., Any]) -> TaskTool: ...

    @overload
    def task_tool(self, **options: Unpack[TaskToolOptions]) -> Callable[[Callable[..., Any]], TaskTool]: ...

    def task_tool(
        self, fn: Callable[..., Any] | None = None, **options: Unpack[TaskToolOptions]
    ) -> TaskTool | Callable[[Callable[..., Any]], TaskTool]:
        """Decorator: `@ext.task_tool` or `@ext.task_tool(...)` with the options of `mcptasks.task_tool`."""

        def decorate(function: Callable[..., Any]) -> TaskTool:
            return self.add_tool(
                function if isinstance(function, TaskTool) else task_tool(**options)(function)
            )

        return decorate(fn) if fn is not None else decorate

    def attach(self, server: MCPServer[Any]) -> None:
        """List this extension's task tools on `server` (now and when added later), and serve
        `subscriptions/listen` for task ids there (a middleware on `server.middleware`)."""
        if server not in self._servers:
            self._servers.add(server)
            _EXTENSIONS_BY_SERVER[server] = self
            if self.push is not None:
                server.middleware.append(TaskListenMiddleware(self.push, current_owner))
        self._list_tools(server)

    def use_store(self, store: TaskStore | str) -> None:
        """Replace the store before the server starts (what `mcptasks serve --store` does)."""
        if self.engine.running:
            raise RuntimeError("cannot change the store of a running server")
        self.engine.store = store_from_url(store) if isinstance(store, str) else store

    def lifespan(self, user: Lifespan | None = None) -> Lifespan:
        """A lifespan for `MCPServer(lifespan=...)` that runs the engine around `user`'s lifespan.

        The SDK may enter a server's lifespan more than once at a time (one per in-process
        client): the first entry starts the engine, later ones share it, and the first one's exit
        waits until the others have left before stopping it.
        """

        @asynccontextmanager
        async def with_user(server: MCPServer[Any]) -> AsyncIterator[Any]:
            if user is None:
                yield {}
            else:
                async with user(server) as state:
                    yield state

        @asynccontextmanager
        async def lifespan(server: MCPServer[Any]) -> AsyncIterator[Any]:
            if self.engine.running:
                self._lifespan_guests += 1
                try:
                    async with with_user(server) as state:
                        yield state
                finally:
                    self._lifespan_guests -= 1
                    if self._lifespan_guests == 0:
                        self._guests_left.set()
                return
            async with self.engine, self._feed():
                try:
                    async with with_user(server) as state:
                        yield state
                finally:
                    if self._lifespan_guests:
                        self._guests_left = anyio.Event()
                        with anyio.CancelScope(shield=True):
                            await self._guests_left.wait()

        return lifespan

    @asynccontextmanager
    async def _feed(self) -> AsyncIterator[None]:
        if self.push is None:
            yield
            return
        async with anyio.create_task_group() as group:
            await group.start(self.push.feed.run, self.engine.store)
            try:
                yield
            finally:
                self.push.feed.close()
                group.cancel_scope.cancel()

    def close_listen_streams(self) -> None:
        """End every task listen stream with its closing response (call when the server stops)."""
        if self.push is not None:
            self.push.feed.close()

    # -- the SDK's extension hooks -------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """No settings: an empty object advertises support."""
        return {}

    def methods(self) -> Sequence[MethodBinding]:
        """`tasks/get`, `tasks/update`, `tasks/cancel`, on 2026-07-28 only."""
        versions = frozenset({PROTOCOL_VERSION})
        return [
            MethodBinding(method, _AnyParams, self._method_handler(method), protocol_versions=versions)
            for method in ("tasks/get", "tasks/update", "tasks/cancel")
        ]

    def _method_handler(self, method: str) -> Callable[[ServerRequestContext[Any, Any], Any], Any]:
        async def handle(ctx: ServerRequestContext[Any, Any], params: _AnyParams) -> dict[str, Any]:
            headers = dict(ctx.request.headers) if ctx.request is not None else None
            return await self._answer(method, params, headers, ctx.meta)

        return handle

    async def answer_task_request(
        self, method: str, params: Mapping[str, Any] | None, headers: Mapping[str, str] | None
    ) -> dict[str, Any]:
        """Answer `tasks/get|update|cancel` as the SDK-registered handler does, params validated
        as the SDK validates them (raises pydantic's `ValidationError` or `MCPError` like it)."""
        typed = _AnyParams.model_validate({} if params is None else params, by_name=False)
        return await self._answer(method, typed, headers, typed.meta)

    async def _answer(
        self, method: str, params: _AnyParams, headers: Mapping[str, str] | None, meta: Any
    ) -> dict[str, Any]:
        raw = params.model_dump(by_alias=True, exclude_unset=True)
        try:
            return await self.protocol.handle(
                method, raw, owner=current_owner(), headers=headers, meta=meta or raw.get("_meta")
            )
        except ProtocolError as exc:
            raise _mcp_error(exc) from None

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """Answer `tools/call` for task tools and the fallback tools; pass every other call through."""
        if self.protocol.is_fallback_tool(params.name):
            result = await self.protocol.call_fallback_tool(
                params.name, params.arguments, owner=current_owner()
            )
            return _call_tool_result(result)
        if params.name not in self.protocol.tools:
            return await call_next(ctx)
        modern = ctx.protocol_version == PROTOCOL_VERSION
        responses = params.input_responses
        try:
            result = await self.protocol.call_tool(
                params.name,
                params.arguments,
                meta=ctx.meta if modern else None,
                owner=current_owner(),
                tasks_allowed=modern,
                input_responses={k: _raw(v) for k, v in responses.items()} if responses is not None else None,
                request_state=params.request_state,
            )
        except ProtocolError as exc:
            raise _mcp_error(exc) from None
        if result.get("resultType") == "complete":
            return _call_tool_result(result)
        return result


def _register(server: MCPServer[Any], definition: Mapping[str, Any]) -> None:
    """Put a tool into the server's tool listing with its exact schema, annotations and `_meta`."""
    annotations = definition.get("annotations")
    sdk_tool = Tool(
        fn=_never_called,
        name=definition["name"],
        title=definition.get("title"),
        description=definition.get("description", ""),
        parameters=definition["inputSchema"],
        fn_metadata=_UNUSED_METADATA,
        context_kwarg=None,
        is_async=True,
        annotations=ToolAnnotations.model_validate(annotations) if annotations else None,
        meta=definition.get("_meta"),
    )
    manager = getattr(server, "_tool_manager", None)
    tools = getattr(manager, "_tools", None)
    if not isinstance(tools, dict):
        raise RuntimeError(
            "this version of the mcp SDK is not supported by mcptasks (tool manager not found)"
        )
    tools[sdk_tool.name] = sdk_tool


def extension_of(server: MCPServer[Any]) -> TasksExtension | None:
    """The `TasksExtension` attached to `server`, if any."""
    return _EXTENSIONS_BY_SERVER.get(server)
