"""`TaskServer`: the one-line way to serve task tools (an `MCPServer` with `TasksExtension` installed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Literal, overload

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from typing_extensions import ParamSpec, TypeVar, Unpack

from mcptasks._authoring.tool import TaskTool, TaskToolDecorator, TaskToolOptions
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.gctuning import tune_gc
from mcptasks.server.extension import Lifespan, TasksExtension
from mcptasks.server.fast_path import add_fast_path
from mcptasks.server.header_values import TrimmedHeaderValues
from mcptasks.server.http_hints import ProtocolVersionHint
from mcptasks.server.retry_after import RetryAfterHeader
from mcptasks.server.stdio_stop import serve_stdio
from mcptasks.stores.base import TaskStore

P = ParamSpec("P")
R = TypeVar("R")


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
    with `@app.tool`. `store` is the task store; `config` an `EngineConfig` (default:
    `EngineConfig.from_env()`) configures the tasks side; other keyword arguments go to
    `MCPServer` (auth, instructions, ...). `executor` (an `Executor` or its URL, such as
    `temporal://127.0.0.1:7233`) runs the bodies on a durable execution engine's workers
    (`EngineConfig.executor`).
    """

    def __init__(
        self,
        name: str,
        *,
        store: TaskStore | str = "memory://",
        config: EngineConfig | None = None,
        executor: Executor | str | None = None,
        lifespan: Lifespan | None = None,
        **mcp_options: Any,
    ) -> None:
        if executor is not None:
            config = replace(config if config is not None else EngineConfig.from_env(), executor=executor)
        self.extension = TasksExtension(store, config=config)
        extensions = [self.extension, *mcp_options.pop("extensions", ())]
        self.mcp: MCPServer[Any] = MCPServer(
            name, extensions=extensions, lifespan=self.extension.lifespan(lifespan), **mcp_options
        )
        self.extension.install(self.mcp)

    @property
    def config(self) -> EngineConfig:
        """The configuration of the tasks side."""
        return self.extension.config

    def configure(self, config: EngineConfig) -> None:
        """Replace the configuration before the server starts (see `TasksExtension.configure`)."""
        self.extension.configure(config)

    @property
    def name(self) -> str:
        """The server's name."""
        return str(self.mcp.name)

    @overload
    def task_tool(self, fn: Callable[P, R]) -> TaskTool[P, R]: ...

    @overload
    def task_tool(self, **options: Unpack[TaskToolOptions]) -> TaskToolDecorator: ...

    def task_tool(
        self, fn: Callable[P, R] | None = None, **options: Unpack[TaskToolOptions]
    ) -> TaskTool[P, R] | TaskToolDecorator:
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
        self, *, path: str = "/mcp", host: str = "127.0.0.1", fast_path: bool | None = None, **options: Any
    ) -> Starlette:
        """The Streamable HTTP ASGI app (a fresh one per call; mount it or serve it with uvicorn).

        A request without `MCP-Protocol-Version` that the server rejects for want of a session
        is told to send that header (see `mcptasks.server.http_hints`). `fast_path` (default:
        `EngineConfig.fast_path`, on) answers `tasks/get|update|cancel` and opted-in task tool
        calls below the SDK's request machinery, with the same bytes on the wire (see
        `mcptasks.server.fast_path`)."""
        return http_app(self.mcp, self.extension, path=path, host=host, fast_path=fast_path, **options)

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
        The process's garbage collector is tuned for serving once it serves (`tune_gc`).
        """
        if transport == "stdio":
            tune_gc()
            if anyio.run(serve_stdio, self.mcp.run_stdio_async):
                raise KeyboardInterrupt
        elif transport == "http":
            anyio.run(self.serve_http, host, port, path, log_level)
        else:
            raise ValueError(f"unknown transport {transport!r}: use 'stdio' or 'http'")

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8000, path: str = "/mcp", log_level: str = "warning"
    ) -> None:
        """Serve Streamable HTTP with uvicorn in the current event loop until cancelled, with the
        read deadlines and connection bound of the extension's `EngineConfig` (`header_timeout`,
        `body_timeout`, `max_connections`)."""
        from mcptasks.server.guarded_server import guarded_config

        app = self.streamable_http_app(path=path, host=host)
        config = guarded_config(
            app, self.extension.config, host=host, port=port, log_level=log_level, lifespan="on"
        )
        await uvicorn_server(config, self.extension).serve()


def http_app(
    mcp: MCPServer[Any],
    extension: TasksExtension | None,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    fast_path: bool | None = None,
    **options: Any,
) -> Starlette:
    """`mcp`'s Streamable HTTP app with header values trimmed (`TrimmedHeaderValues`),
    `Retry-After` on refusals with `retryAfterMs` (`RetryAfterHeader`), the protocol-version
    hint and, where `extension` serves it and `fast_path` (default: its
    `EngineConfig.fast_path`) is on, the `tasks/*` fast path and the lean path of task-only
    listen streams (`mcptasks.server.listen_path`)."""
    app = mcp.streamable_http_app(streamable_http_path=path, host=host, **options)
    app.add_middleware(RetryAfterHeader)  # inside the fast path, which adds the header itself
    app.add_middleware(ProtocolVersionHint)
    if extension is not None and (extension.config.fast_path if fast_path is None else fast_path):
        add_fast_path(app, mcp, extension, path=path)
    app.add_middleware(TrimmedHeaderValues)  # outermost: every layer sees trimmed values
    return app


def uvicorn_server(config: Any, extension: TasksExtension | None) -> Any:
    """A `uvicorn.Server` for `config` that ends the extension's open listen streams (with their
    closing response) when it starts shutting down; they would hold its graceful shutdown forever.

    Once started it tunes the garbage collector for serving (`tune_gc`): everything start-up
    allocated (modules, the SDK, schemas) is frozen out of its reach, so full collections scan only
    what requests and tasks allocate, and young collections run less often.

    With a `GuardedConfig` (`mcptasks.server.guarded_server`), an `Acceptor` accepts its
    connections within the bound, and the guard's throttled log lines are flushed every second."""
    import uvicorn

    from mcptasks.server.guarded_server import GuardedConfig, acceptor_for

    guard = config.guard if isinstance(config, GuardedConfig) else None

    class Server(uvicorn.Server):
        async def serve(self, sockets: Any = None) -> None:
            async with anyio.create_task_group() as self.tasks:
                await super().serve(sockets)
                self.tasks.cancel_scope.cancel()

        async def startup(self, sockets: Any = None) -> None:
            self.acceptor = None
            await super().startup(sockets)
            tune_gc()
            acceptor = acceptor_for(self)
            taken = acceptor.take_over(self.servers) if acceptor is not None and self.started else []
            if acceptor is not None and taken:
                await self.tasks.start(partial(acceptor.run, taken))
                self.acceptor = acceptor

        async def on_tick(self, counter: int) -> bool:
            if guard is not None and counter % 10 == 0:
                guard.flush_logs()
            return bool(await super().on_tick(counter))

        async def shutdown(self, sockets: Any = None) -> None:
            if self.acceptor is not None:
                await self.acceptor.stop()
            if extension is not None:
                extension.close_listen_streams()
            await super().shutdown(sockets)

    return Server(config)
