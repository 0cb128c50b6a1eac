"""Task tools on a FastMCP 4 server (`pip install "mcptasks[fastmcp]"`), through FastMCP's public
extension API.

    from fastmcp import FastMCP
    from mcptasks.server.fastmcp import add_tasks

    mcp = FastMCP("inventory")
    tasks = add_tasks(mcp, tools=[recount], store="sqlite:///tasks.db")

`add_tasks` registers one FastMCP `ServerExtension` (`FastMCP.add_extension`). It advertises
`io.modelcontextprotocol/tasks` in `server/discover`, serves `tasks/get|update|cancel`
(`MethodBinding`s, on 2026-07-28 requests only), answers `tools/call` for the task tools
(`intercept_tool_call`) and runs the task engine in its `lifespan()`. Each task tool is also added
to the server as a FastMCP `Tool` (`FastMCP.add_tool`), so `tools/list` shows it with its exact
schema and task support. The answers themselves come from `mcptasks.lowlevel.TasksProtocol`, the
same code `TaskServer` serves.

`fastmcp` is imported when `add_tasks` (or `FastMCPTasks.install`) runs, not when this module is.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, overload

import anyio
from mcp import MCPError
from mcp.server.auth.provider import principal_components
from mcp.server.context import ServerRequestContext
from mcp_types import CallToolResult, RequestParams
from mcp_types import Tool as ListedTool
from pydantic import BaseModel, ConfigDict, PrivateAttr, model_serializer
from typing_extensions import ParamSpec, TypeVar, Unpack

from mcptasks._authoring.tool import TaskTool, TaskToolDecorator, TaskToolOptions, registering
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.protocol import ANONYMOUS_OWNER, TasksProtocol
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import TaskStore
from mcptasks.wire import EXTENSION_ID, PROTOCOL_VERSION

__all__ = ["FastMCPTasks", "add_tasks"]

P = ParamSpec("P")
R = TypeVar("R")
P2 = ParamSpec("P2")
R2 = TypeVar("R2")

TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")


class _AnyParams(RequestParams):
    """Accept any params, so the protocol layer names the offending field itself."""

    model_config = ConfigDict(extra="allow")


class _WireResult(BaseModel):
    """A `tools/call` answer FastMCP hands to the SDK as it is (`resultType` `"task"` or
    `"input_required"`): dumped verbatim, `null` values included (`ttlMs: null` is meaningful)."""

    _wire: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> _WireResult:
        """Wrap a result dict."""
        wrapped = cls()
        wrapped._wire = dict(result)
        return wrapped

    @model_serializer(mode="plain")
    def _dump(self) -> dict[str, Any]:
        return self._wire


def _mcp_error(exc: ProtocolError) -> MCPError:
    return MCPError(code=exc.code, message=exc.message, data=exc.data)


def _wire(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


def current_owner() -> str:
    """The task owner of this request: its authenticated principal as FastMCP sees it (the same
    string `TaskServer` uses, so both can share a store), or the anonymous scope."""
    from fastmcp.server.dependencies import get_access_token  # type: ignore[import-not-found, unused-ignore]

    token = get_access_token()
    if token is None:
        return ANONYMOUS_OWNER
    client_id, issuer, subject = principal_components(token)
    return json.dumps([issuer, subject or client_id], separators=(",", ":"))


class FastMCPTasks:
    """Task tools and their engine, served on FastMCP servers (`add_tasks` builds one).

    `store` is a `TaskStore` or URL; `config` an `EngineConfig` (default: `EngineConfig.from_env()`).
    Its `engine` and `protocol` are the ones `TaskServer` has. `push` is not served here: clients
    poll `tasks/get`.
    """

    def __init__(
        self,
        store: TaskStore | str = "memory://",
        *,
        config: EngineConfig | None = None,
        tools: Sequence[TaskTool] = (),
    ) -> None:
        self.engine = TaskEngine(store, config=config if config is not None else EngineConfig.from_env())
        self.protocol = TasksProtocol(self.engine)
        self._servers: list[tuple[Any, set[str]]] = []
        """The FastMCP servers installed on, each with the tool names added to it."""
        for tool in tools:
            self.add_tool(tool)

    @property
    def task_tools(self) -> dict[str, TaskTool]:
        """The task tools by name."""
        return self.protocol.tools

    def add_tool(self, tool: TaskTool) -> TaskTool:
        """Register a decorated task tool (listed at once on every server it is installed on)."""
        self.protocol.add_tool(tool)
        for server, listed in self._servers:
            self._list_on(server, listed)
        return tool

    @overload
    def task_tool(self, fn: Callable[P, R]) -> TaskTool[P, R]: ...

    @overload
    def task_tool(self, **options: Unpack[TaskToolOptions]) -> TaskToolDecorator: ...

    def task_tool(
        self, fn: Callable[P, R] | None = None, **options: Unpack[TaskToolOptions]
    ) -> TaskTool[P, R] | TaskToolDecorator:
        """Decorator: `@tasks.task_tool` or `@tasks.task_tool(...)` with the options of
        `mcptasks.task_tool`."""
        return registering(self.add_tool, fn, options)

    def install(self, server: Any) -> Any:
        """Serve the task tools on `server` (a `fastmcp.FastMCP`) before it starts: register the
        extension and add each task tool to its tools; the extension is returned. One server per
        `FastMCPTasks` (its engine runs in that server's lifespan).

        FastMCP refuses a second extension with the same identifier (`ValueError`), so a server
        that already has fastmcp-tasks' `TasksExtension` cannot take this one."""
        if self._servers:
            raise ValueError(
                "these task tools are already served on a FastMCP server (one engine, one server)"
            )
        extension = _extension_class()(self)
        server.add_extension(extension)
        self._servers.append((server, set()))
        self._list_on(*self._servers[-1])
        return extension

    def _list_on(self, server: Any, listed: set[str]) -> None:
        """Add the task tools and generated tools not yet on `server` (named in `listed`)."""
        definitions = [tool.definition() for tool in self.protocol.tools.values()]
        for definition in [*definitions, *self.protocol.fallback_tool_definitions()]:
            if definition["name"] not in listed:
                server.add_tool(_listed_tool_class().of(self, definition))
                listed.add(definition["name"])

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The engine (store connections, background duties, running bodies) for the server's
        lifetime: what the extension's `lifespan()` enters.

        FastMCP closes extension lifespans inside a shielded cancel scope of its own, and a task
        group entered before that scope cannot be exited inside it (anyio's `RuntimeError:
        Attempted to exit a cancel scope that isn't the current task's current cancel scope`).
        So on asyncio, FastMCP's event loop, the engine runs in a task of its own from here until
        the lifespan ends, which enters and exits its task group in order."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another event loop: enter the engine here
            async with self.engine:
                yield
            return
        ready, stop = anyio.Event(), anyio.Event()
        runner = loop.create_task(self._run_engine(ready, stop))
        try:
            await ready.wait()
        except BaseException:
            runner.cancel()
            raise
        if runner.done():
            runner.result()  # the engine could not start: its error
        try:
            yield
        finally:
            stop.set()
            with anyio.CancelScope(shield=True):
                await runner

    async def _run_engine(self, ready: anyio.Event, stop: anyio.Event) -> None:
        try:
            async with self.engine:
                ready.set()
                await stop.wait()
        finally:
            ready.set()

    # -- what the extension answers ----------------------------------------------------------

    async def answer_task_request(
        self, method: str, params: Mapping[str, Any], headers: Mapping[str, str] | None
    ) -> dict[str, Any]:
        """`tasks/get|update|cancel` with their params as the client sent them (`MCPError` as
        the SDK sends it)."""
        meta = params.get("_meta")
        try:
            return await self.protocol.handle(
                method,
                params,
                owner=current_owner(),
                headers=headers,
                meta=meta if isinstance(meta, Mapping) else None,
                over_transport=True,
            )
        except ProtocolError as exc:
            raise _mcp_error(exc) from None

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        meta: Mapping[str, Any] | None,
        modern: bool,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> dict[str, Any]:
        """A `tools/call` of a task tool or a generated fallback tool (`modern`: a 2026-07-28
        request, with its `_meta` in `meta`); the result dict with its `resultType`."""
        try:
            if self.protocol.is_fallback_tool(name):
                return await self.protocol.call_fallback_tool(name, arguments, owner=current_owner())
            return await self.protocol.call_tool(
                name,
                arguments,
                meta=meta if modern else None,
                owner=current_owner(),
                tasks_allowed=modern,
                input_responses=(
                    {key: _wire(value) for key, value in input_responses.items()}
                    if input_responses is not None
                    else None
                ),
                request_state=request_state,
            )
        except ProtocolError as exc:
            raise _mcp_error(exc) from None

    async def refuse_fastmcp_task_tools(self, server: Any) -> None:
        """Raise `RuntimeError` when `server` has FastMCP components declared with `task=True`:
        they are fastmcp-tasks' to run, and with this extension registered under the same
        identifier FastMCP would let them start and never run them as tasks."""
        declared = sorted(component.name for component in await server.get_tasks())
        if declared:
            raise RuntimeError(
                f"FastMCP components declared with task=True ({', '.join(declared)}) need "
                f"fastmcp-tasks, whose extension has the same identifier as this one "
                f"({EXTENSION_ID!r}). Decorate them with mcptasks.task_tool instead."
            )

    def serves(self, name: str) -> bool:
        """Whether a `tools/call` of `name` is this extension's to answer."""
        return name in self.protocol.tools or self.protocol.is_fallback_tool(name)


def add_tasks(
    server: Any,
    tools: Sequence[TaskTool] = (),
    *,
    store: TaskStore | str = "memory://",
    config: EngineConfig | None = None,
) -> FastMCPTasks:
    """Serve `tools` (functions decorated with `mcptasks.task_tool`) as task tools on `server`, a
    `fastmcp.FastMCP`, before it starts; `store` and `config` as for `TaskServer`. More tools can
    be added later with the returned object's `task_tool` decorator or `add_tool`."""
    tasks = FastMCPTasks(store, config=config, tools=tools)
    tasks.install(server)
    return tasks


# -- the FastMCP classes, defined when fastmcp is first needed --------------------------------------


@functools.cache
def _extension_class() -> type[Any]:
    from fastmcp.server.context import Context  # type: ignore[import-not-found, unused-ignore]
    from fastmcp.server.extensions import (  # type: ignore[import-not-found, unused-ignore]
        MethodBinding,
        ServerExtension,
        ToolCallContinuation,
        ToolCallOutcome,
    )
    from mcp_types import CallToolRequestParams

    class TasksServerExtension(ServerExtension):  # type: ignore[misc, unused-ignore]
        """`io.modelcontextprotocol/tasks` on a FastMCP server, answered by a `FastMCPTasks`."""

        identifier = EXTENSION_ID

        def __init__(self, tasks: FastMCPTasks) -> None:
            self.tasks = tasks

        def settings(self) -> dict[str, Any]:
            """No settings: an empty object advertises support."""
            return {}

        def methods(self) -> Sequence[Any]:
            """`tasks/get`, `tasks/update`, `tasks/cancel`, on 2026-07-28 requests only."""
            versions = frozenset({PROTOCOL_VERSION})
            return [
                MethodBinding(method, _AnyParams, self._handler(method), protocol_versions=versions)
                for method in TASK_METHODS
            ]

        def _handler(self, method: str) -> Callable[[ServerRequestContext[Any, Any], Any], Any]:
            async def handle(ctx: ServerRequestContext[Any, Any], params: _AnyParams) -> dict[str, Any]:
                headers = dict(ctx.request.headers) if ctx.request is not None else None
                raw = params.model_dump(by_alias=True, exclude_unset=True)
                return await self.tasks.answer_task_request(method, raw, headers)

            return handle

        @asynccontextmanager
        async def lifespan(self) -> AsyncIterator[None]:
            """The task engine, for the server's lifetime (once no FastMCP tool declares
            `task=True`: see `FastMCPTasks.refuse_fastmcp_task_tools`)."""
            await self.tasks.refuse_fastmcp_task_tools(self.server)
            async with self.tasks.running():
                yield

        async def intercept_tool_call(
            self, params: CallToolRequestParams, context: Context, call_next: ToolCallContinuation
        ) -> ToolCallOutcome:
            """Answer `tools/call` for the task tools FastMCP lets this request see (enabled and
            authorized: `FastMCP.get_tool`); pass every other call through."""
            if not self.tasks.serves(params.name) or await context.fastmcp.get_tool(params.name) is None:
                return await call_next()
            request = context.request_context
            result = await self.tasks.call_tool(
                params.name,
                params.arguments,
                meta=request.meta if request is not None else None,
                modern=request is not None and request.protocol_version == PROTOCOL_VERSION,
                input_responses=params.input_responses,
                request_state=params.request_state,
            )
            return _tool_call_outcome(result)

    return TasksServerExtension


def _tool_call_outcome(result: Mapping[str, Any]) -> BaseModel:
    """A `tools/call` answer as FastMCP takes it from an interceptor: a `ToolResult` when complete
    (FastMCP middleware sees an ordinary result), else the wire dict as it is."""
    from fastmcp.tools.base import ToolResult  # type: ignore[import-not-found, unused-ignore]

    if result.get("resultType") != "complete":
        return _WireResult.of(result)
    fields = {key: value for key, value in result.items() if key != "resultType"}
    outcome: BaseModel = ToolResult.from_mcp_result(CallToolResult.model_validate(fields))
    return outcome


@functools.cache
def _listed_tool_class() -> type[Any]:
    from fastmcp.tools.base import Tool  # type: ignore[import-not-found, unused-ignore]

    class ListedTaskTool(Tool):  # type: ignore[misc, unused-ignore]
        """A task tool (or a generated fallback tool) as FastMCP lists it: its definition exactly.

        Its calls are the extension's (`intercept_tool_call`); `run` serves a call that bypasses
        FastMCP's middleware (`FastMCP.call_tool(..., run_middleware=False)`) inline."""

        _tasks: FastMCPTasks = PrivateAttr()
        _definition: dict[str, Any] = PrivateAttr()

        @classmethod
        def of(cls, tasks: FastMCPTasks, definition: Mapping[str, Any]) -> ListedTaskTool:
            """The tool `definition` (as `tools/list` shows it), answered by `tasks`."""
            tool = cls(
                name=definition["name"],
                description=definition.get("description"),
                parameters=definition.get("inputSchema", {"type": "object"}),
            )
            tool._tasks = tasks
            tool._definition = dict(definition)
            return tool

        def to_mcp_tool(self, **overrides: Any) -> ListedTool:
            """The definition `TaskServer` lists (a renaming override applied)."""
            return ListedTool.model_validate({**self._definition, "name": overrides.get("name", self.name)})

        async def run(self, arguments: dict[str, Any]) -> Any:
            """Run the tool inline (never a task: no request asked for one)."""
            return _tool_call_outcome(
                await self._tasks.call_tool(self.name, arguments, meta=None, modern=False)
            )

    return ListedTaskTool
