"""`TasksExtension`: the Tasks extension for the official MCP SDK's `MCPServer`.

    ext = TasksExtension(store="sqlite:///tasks.db")

    @ext.task_tool(poll_interval=2)
    async def build(target: str):
        yield f"building {target}"
        yield Result("ok")

    server = MCPServer("ci", extensions=[ext], lifespan=ext.lifespan())

The extension advertises `io.modelcontextprotocol/tasks` in `server/discover`, serves
`tasks/get|update|cancel` on 2026-07-28 connections, and intercepts `tools/call` for its task
tools. `lifespan()` lists the task tools in `tools/list` and serves task listen streams (see
`install`), and runs the engine's task group, on which task bodies run.
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
from mcp_types import CallToolRequestParams, CallToolResult, RequestParams
from pydantic import BaseModel, ConfigDict
from typing_extensions import ParamSpec, TypeVar, Unpack

from mcptasks._authoring.tool import TaskTool, TaskToolDecorator, TaskToolOptions, registering
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.protocol import ANONYMOUS_OWNER, TasksProtocol
from mcptasks._runtime.push import TaskPush
from mcptasks.errors import ProtocolError
from mcptasks.server.answered_calls import take_from
from mcptasks.server.listen import TaskListenMiddleware, set_sse_keepalive
from mcptasks.server.listen_hub import ListenHub
from mcptasks.server.listing import TaskToolListing
from mcptasks.server.session_peer import SessionPeer
from mcptasks.stores.base import TaskRecord, TaskStore
from mcptasks.stores.url import store_from_url
from mcptasks.wire import EXTENSION_ID, PROTOCOL_VERSION

P = ParamSpec("P")
R = TypeVar("R")
P2 = ParamSpec("P2")
R2 = TypeVar("R2")


_EXTENSIONS_BY_SERVER: weakref.WeakKeyDictionary[MCPServer[Any], TasksExtension] = weakref.WeakKeyDictionary()

Lifespan = Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]]


class _AnyParams(RequestParams):
    """Accept any params so the protocol layer can name the offending field itself."""

    model_config = ConfigDict(extra="allow")


def _validated_as_is(params: Mapping[str, Any]) -> bool:
    """Whether `_AnyParams` would accept `params` and dump them unchanged: a dict whose `_meta`,
    if any, is a dict without the one key the SDK types (`progressToken`). Such params skip the
    validation round trip."""
    if type(params) is not dict:
        return False
    meta = params.get("_meta")
    return meta is None or (type(meta) is dict and "progressToken" not in meta)


def _as_validated(params: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], Any]:
    """`params` and their `_meta` as the SDK hands them to a handler: validated as `_AnyParams`
    (pydantic's `ValidationError` when they are not) and dumped, or as they are when that changes
    nothing (`_validated_as_is`)."""
    if params is None:
        params = {}
    if _validated_as_is(params):
        return params, params.get("_meta")
    typed = _AnyParams.model_validate(params, by_name=False)
    return _dumped(typed, typed.meta)


def _dumped(params: _AnyParams, meta: Any) -> tuple[dict[str, Any], Any]:
    """Validated params as the protocol layer takes them, and their `_meta` (`meta`, else theirs)."""
    raw = params.model_dump(by_alias=True, exclude_unset=True)
    return raw, meta or raw.get("_meta")


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


def call_tool_result(result: Mapping[str, Any]) -> CallToolResult:
    """A complete `tools/call` result dict as the SDK's model (the SDK stamps `resultType` itself)."""
    return CallToolResult.model_validate({k: v for k, v in result.items() if k != "resultType"})


def _mcp_error(exc: ProtocolError) -> MCPError:
    return MCPError(code=exc.code, message=exc.message, data=exc.data)


class TasksExtension(Extension):
    """Serve task tools over the official SDK's `MCPServer` (`io.modelcontextprotocol/tasks`).

    `store` is a `TaskStore` or URL; `config` an `EngineConfig` (default: `EngineConfig.from_env()`,
    the defaults with the `MCPTASKS_*` environment variables applied). It covers the engine
    (leases, intervals, `Limits`, ...), the fallback mode for requests without the extension,
    `immediate_results`, the `secret` that signs MRTR `requestState`, `push` (serve
    `subscriptions/listen` with `notifications.taskIds`) and `keepalive` (process-wide, see
    `mcptasks.server.listen.set_sse_keepalive`).
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        store: TaskStore | str = "memory://",
        *,
        config: EngineConfig | None = None,
        tools: Sequence[TaskTool] = (),
    ) -> None:
        config = config if config is not None else EngineConfig.from_env()
        self.engine = TaskEngine(store, config=config)
        self.protocol = TasksProtocol(self.engine)
        self.push: TaskPush | None = None
        """Serves `notifications/tasks` on `subscriptions/listen` (None when `push=False`)."""
        self._listen: TaskListenMiddleware | None = None
        self.listen_hub: ListenHub | None = None
        """Serves task-only listen streams below the SDK over HTTP (`mcptasks.server.listen_path`)."""
        self._apply(config)
        self._servers: weakref.WeakSet[MCPServer[Any]] = weakref.WeakSet()
        self._lifespan_guests = 0
        self._guests_left = anyio.Event()
        for tool in tools:
            self.add_tool(tool)

    @property
    def config(self) -> EngineConfig:
        """The configuration in force."""
        return self.engine.config

    def configure(self, config: EngineConfig) -> None:
        """Replace the configuration before the server starts (what `mcptasks serve` does with
        its environment and flags)."""
        self.protocol.configure(config)
        self._apply(config)

    def _apply(self, config: EngineConfig) -> None:
        if config.push and self.push is None:
            self.push = TaskPush(self.engine)
            self._listen = TaskListenMiddleware(self.push, current_owner)
            self.listen_hub = ListenHub(self.push)
        elif not config.push:
            self.push = self._listen = self.listen_hub = None
        if config.keepalive is not None:
            set_sse_keepalive(config.keepalive)

    # -- registering tools ---------------------------------------------------------------------

    @property
    def task_tools(self) -> dict[str, TaskTool]:
        """The task tools by name."""
        return self.protocol.tools

    def add_tool(self, tool: TaskTool) -> TaskTool:
        """Register a decorated task tool (listed at once on every server it is installed on)."""
        self.protocol.add_tool(tool)
        return tool

    def tool_definitions(self) -> list[dict[str, Any]]:
        """What `tools/list` shows for this extension: its task tools, then the fallback tools."""
        tools = [tool.definition() for tool in self.protocol.tools.values()]
        return [*tools, *self.protocol.fallback_tool_definitions()]

    @overload
    def task_tool(self, fn: Callable[P, R]) -> TaskTool[P, R]: ...

    @overload
    def task_tool(self, **options: Unpack[TaskToolOptions]) -> TaskToolDecorator: ...

    def task_tool(
        self, fn: Callable[P, R] | None = None, **options: Unpack[TaskToolOptions]
    ) -> TaskTool[P, R] | TaskToolDecorator:
        """Decorator: `@ext.task_tool` or `@ext.task_tool(...)` with the options of `mcptasks.task_tool`."""
        return registering(self.add_tool, fn, options)

    def install(self, server: MCPServer[Any]) -> None:
        """List this extension's task tools in `server`'s `tools/list` and serve
        `subscriptions/listen` for task ids there (middleware on `server.middleware`).

        `lifespan()` does this when the server starts, so it is rarely needed by hand; calling it
        again does nothing."""
        if server in self._servers:
            return
        self._servers.add(server)
        _EXTENSIONS_BY_SERVER[server] = self
        server.middleware.append(TaskToolListing(self.tool_definitions))
        server.middleware.append(self._listen_streams)

    def owns_middleware(self, middleware: object) -> bool:
        """Whether `middleware` (an entry of a server's `middleware`) is one `install` added."""
        return isinstance(middleware, TaskToolListing) or middleware == self._listen_streams

    async def _listen_streams(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Task listen streams, while `push` is on (see `mcptasks.server.listen`)."""
        if self._listen is None:
            return await call_next(ctx)
        return await self._listen(ctx, call_next)

    def use_store(self, store: TaskStore | str) -> None:
        """Replace the store before the server starts (what `mcptasks serve --store` does)."""
        if self.engine.running:
            raise RuntimeError("cannot change the store of a running server")
        self.engine.use_store(store_from_url(store) if isinstance(store, str) else store)

    def lifespan(self, user: Lifespan | None = None) -> Lifespan:
        """The lifespan for `MCPServer(extensions=[ext], lifespan=ext.lifespan(yours))`: it
        installs the extension on the server (`install`) and runs the engine around `user`'s
        lifespan, whose state your ordinary tools see as before.

        The SDK may enter a server's lifespan more than once at a time (one per in-process
        client): the first entry starts the engine, later ones share it, and the first one's exit
        waits until the others have left before stopping it.
        """
        return EngineLifespan(self, user)

    @asynccontextmanager
    async def run_around(self, server: MCPServer[Any], user: Lifespan | None) -> AsyncIterator[Any]:
        """Enter `user`'s lifespan for `server` with the engine running (see `lifespan`)."""
        self.install(server)
        if self.engine.running:
            self._lifespan_guests += 1
            try:
                async with _entered(user, server) as state:
                    yield state
            finally:
                self._lifespan_guests -= 1
                if self._lifespan_guests == 0:
                    self._guests_left.set()
            return
        async with self.engine, self._feed():
            try:
                async with _entered(user, server) as state:
                    yield state
            finally:
                if self._lifespan_guests:
                    self._guests_left = anyio.Event()
                    with anyio.CancelScope(shield=True):
                        await self._guests_left.wait()

    @asynccontextmanager
    async def _feed(self) -> AsyncIterator[None]:
        if self.push is None:
            yield
            return
        async with anyio.create_task_group() as group:
            await group.start(self.push.feed.run, self.engine.store)
            if self.listen_hub is not None:
                await group.start(self.listen_hub.run)
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
        raw, meta = _as_validated(params)
        return await self._handle(method, raw, headers, meta)

    async def read_task_request(
        self, params: Mapping[str, Any] | None, headers: Mapping[str, str] | None
    ) -> tuple[TaskRecord, int]:
        """What `answer_task_request("tasks/get", ...)` answers with, before it is rendered: the
        record and the poll interval (`TasksProtocol.read_task`); the same checks and errors."""
        raw, meta = _as_validated(params)
        try:
            return await self.protocol.read_task(
                raw, owner=current_owner(), headers=headers, meta=meta, over_transport=True
            )
        except ProtocolError as exc:
            raise _mcp_error(exc) from None

    async def _answer(
        self, method: str, params: _AnyParams, headers: Mapping[str, str] | None, meta: Any
    ) -> dict[str, Any]:
        raw, meta = _dumped(params, meta)
        return await self._handle(method, raw, headers, meta)

    async def _handle(
        self, method: str, params: Mapping[str, Any], headers: Mapping[str, str] | None, meta: Any
    ) -> dict[str, Any]:
        try:
            return await self.protocol.handle(
                method, params, owner=current_owner(), headers=headers, meta=meta, over_transport=True
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
            return call_tool_result(result)
        if params.name not in self.protocol.tools:
            return await call_next(ctx)
        answered = take_from(ctx.request.scope if ctx.request is not None else None, params.name)
        if answered is not None:
            result = answered.replay()
        else:
            modern = ctx.protocol_version == PROTOCOL_VERSION
            result = await self.call_task_tool(
                params, meta=ctx.meta, modern=modern, peer=SessionPeer(ctx, legacy=not modern)
            )
        if result.get("resultType") == "complete":
            return call_tool_result(result)
        return result

    async def call_task_tool(
        self,
        params: CallToolRequestParams,
        *,
        meta: Any,
        modern: bool = True,
        peer: SessionPeer | None = None,
    ) -> dict[str, Any]:
        """Run a `tools/call` of one of this extension's task tools (`modern`: on a 2026-07-28
        connection; `peer`: the caller, for the progress and questions of a body run inline); the
        result dict with its `resultType`, or `MCPError` as the SDK would send it."""
        responses = params.input_responses
        try:
            return await self.protocol.call_tool(
                params.name,
                params.arguments,
                meta=meta if modern else None,
                owner=current_owner(),
                tasks_allowed=modern,
                input_responses={k: _raw(v) for k, v in responses.items()} if responses is not None else None,
                request_state=params.request_state,
                peer=peer,
            )
        except ProtocolError as exc:
            raise _mcp_error(exc) from None


@asynccontextmanager
async def _entered(user: Lifespan | None, server: MCPServer[Any]) -> AsyncIterator[Any]:
    if user is None:
        yield {}
    else:
        async with user(server) as state:
            yield state


class EngineLifespan:
    """The lifespan `TasksExtension.lifespan()` returns (it names its extension for `extension_of`)."""

    def __init__(self, extension: TasksExtension, user: Lifespan | None) -> None:
        self.extension = extension
        self.user = user

    def __call__(self, server: MCPServer[Any]) -> AbstractAsyncContextManager[Any]:
        return self.extension.run_around(server, self.user)


def extension_of(server: MCPServer[Any]) -> TasksExtension | None:
    """The `TasksExtension` installed on `server` or running in its lifespan, if any."""
    installed = _EXTENSIONS_BY_SERVER.get(server)
    if installed is not None:
        return installed
    lifespan = server.settings.lifespan
    return lifespan.extension if isinstance(lifespan, EngineLifespan) else None
