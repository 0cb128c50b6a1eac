"""`TaskServer`: the one-line way to serve task tools (an `MCPServer` with `TasksExtension` installed)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, Literal, overload

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from typing_extensions import Unpack

from mcptasks._authoring.tool import FallbackMode, TaskTool, TaskToolOptions
from mcptasks._runtime.engine import PollLimit
from mcptasks._runtime.limits import Limits
from mcptasks.server.extension import Lifespan, TasksExtension
from mcptasks.server.fast_path import add_fast_path
from mcptasks.server.http_hints import ProtocolVersionHint
from mcptasks.server.stdio_stop import serve_stdio
from mcptasks.stores.base import TaskStore

Transport = Literal["stdio", "http"]


class TaskServer:
    """An MCP server whose `@app.task_tool` functions run as tasks.

        app = TaskServer("ci-runner", store="sqlite:///tasks.db")

        @app.task_tool(poll_interval=2)
        async def build(target: str):
            yield f"building {target}"
            yield Result("done")

        app.run()                      # stdio; app.run("http", port=8000) for Streamable HTTP

    `app.mcp` is the underlying `MCPServer`: add prompts, resources and ordinary tools there or
    with `@app.tool`. `store`, `secret`, `poll_limit`, `adaptive_poll_max`, `fallback`,
    `immediate_results`, `limits`, `push` and `keepalive` configure the tasks side (see `TasksExtension`); other keyword arguments go
    to `MCPServer` (auth, instructions, ...).
    """

    def __init__(
        self,
        name: str,
        *,
        store: TaskStore | str = "memory://",
        lifespan: Lifespan | None = None,
        secret: str | bytes | None = None,
        poll_limit: PollLimit = "off",
        adaptive_poll_max: float | None = None,
        fallback: FallbackMode = "inline",
        immediate_results: bool = True,
        limits: Limits | None = None,
        push: bool = True,
        keepalive: float | None = None,
        **mcp_options: Any,
    ) -> None:
        self.extension = TasksExtension(
            store,
            limits=limits,
            secret=secret,
            poll_limit=poll_limit,
            adaptive_poll_max=adaptive_poll_max,
            fallback=fallback,
            immediate_results=immediate_results,
            push=push,
            keepalive=keepalive,
        )
        extensions = [self.extension, *mcp_options.pop("extensions", ())]
        self.mcp: MCPServer[Any] = MCPServer(
            name, extensions=extensions, lifespan=self.extension.lifespan(lifespan), **mcp_options
        )
        self.extension.attach(self.mcp)

    @property
    def name(self) -> str:
        """The server's name."""
        return str(self.mcp.name)

    @overload
    def task_tool(self, fn: Callable[..., Any]) -> TaskTool: ...

    @overload
    def task_tool(self, **options: Unpack[TaskToolOptions]) -> Callable[[Callable[..., Any]], TaskTool]: ...

    def task_tool(
        self, fn: Callable[..., Any] | None = None, **options: Unpack[TaskToolOptions]
    ) -> TaskTool | Callable[[Callable[..., Any]], TaskTool]:
        """Register a task tool: `@app.task_tool` or `@app.task_tool(...)` (see `mcptasks.task_tool`)."""
        if fn is not None:
            return self.extension.task_tool(fn)
        return self.extension.task_tool(**options)

    def add_task_tool(self, tool: TaskTool) -> TaskTool:
        """Register a function already decorated with `mcptasks.task_tool`."""
        return self.extension.add_tool(tool)

    def tool(self, *args: Any, **kwargs: Any) -> Any:
        """Register an ordinary (non-task) tool; same arguments as `MCPServer.tool`."""
        return self.mcp.tool(*args, **kwargs)

    def use_store(self, store: TaskStore | str) -> None:
        """Replace the task store before the server starts."""
        self.extension.use_store(store)

    def streamable_http_app(
        self, *, path: str = "/mcp", host: str = "127.0.0.1", fast_path: bool = True, **options: Any
    ) -> Starlette:
        """The Streamable HTTP ASGI app (a fresh one per call; mount it or serve it with uvicorn).

        A request without `MCP-Protocol-Version` that the server rejects for want of a session
        is told to send that header (see `mcptasks.server.http_hints`). `fast_path` (default on)
        answers `tasks/get|update|cancel` below the SDK's request machinery, with the same bytes
        on the wire (see `mcptasks.server.fast_path`)."""
        app = self.mcp.streamable_http_app(streamable_http_path=path, host=host, **options)
        app.add_middleware(ProtocolVersionHint)
        if fast_path:
            add_fast_path(app, self.mcp, self.extension, path=path)
        return app

    def run(
        self,
        transport: Transport = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        path: str = "/mcp",
        log_level: str = "warning",
    ) -> None:
        """Serve until interrupted: stdio, or Streamable HTTP at `http://host:port/path`.

        Ctrl-C (SIGINT) stops either transport with `KeyboardInterrupt`; SIGTERM stops it normally.
        """
        if transport == "stdio":
            if anyio.run(serve_stdio, self.mcp.run_stdio_async):
                raise KeyboardInterrupt
        elif transport == "http":
            anyio.run(self.serve_http, host, port, path, log_level)
        else:
            raise ValueError(f"unknown transport {transport!r}: use 'stdio' or 'http'")

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8000, path: str = "/mcp", log_level: str = "warning"
    ) -> None:
        """Serve Streamable HTTP with uvicorn in the current event loop until cancelled."""
        import uvicorn

        app = self.streamable_http_app(path=path, host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
        await uvicorn_server(config, self.extension).serve()


def uvicorn_server(config: Any, extension: TasksExtension | None) -> Any:
    """A `uvicorn.Server` for `config` that ends the extension's open listen streams (with their
    closing response) when it starts shutting down; they would hold its graceful shutdown forever.

    Once started it moves everything start-up allocated (modules, the SDK, schemas) out of the
    garbage collector's reach with `gc.freeze()`: full collections then scan only what requests
    and tasks allocate, which shortens the longest pauses a request can wait behind."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            gc.collect()
            gc.freeze()

        async def shutdown(self, sockets: Any = None) -> None:
            if extension is not None:
                extension.close_listen_streams()
            await super().shutdown(sockets)

    return Server(config)
