"""The `mcptasks` command line: `serve` and `worker` (server side), `call` and `tasks` (client side)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import socket
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mcptasks._runtime.executor import EXECUTOR_ENV
from mcptasks._runtime.gctuning import tune_gc
from mcptasks._version import __version__
from mcptasks.cli.arguments import Handler
from mcptasks.cli.errors import CliError
from mcptasks.cli.logsetup import LOG_FORMATS, LOG_LEVELS, LogFormat, configure_logging
from mcptasks.cli.output import write
from mcptasks.cli.startup import Startup, ToolLine, webhook_urls
from mcptasks.stores.extras import MissingExtra
from mcptasks.stores.url import store_error_hint

STORE_ENV = "MCPTASKS_STORE"


def _split_target(target: str) -> tuple[str, str]:
    path, sep, attr = target.rpartition(":")
    # A Windows drive letter or a plain target has no usable attribute part.
    if not sep or not path or "/" in attr or "\\" in attr:
        return target, "app"
    return path, attr or "app"


def load_target(target: str) -> Any:
    """Load `path/to/file.py[:attr]` or `package.module[:attr]` (attr defaults to `app`)."""
    location, attr = _split_target(target)
    if location.endswith(".py") or os.sep in location or "/" in location:
        path = Path(location)
        if not path.is_file():
            raise CliError(f"cannot load {target!r}: no such file {str(path)!r}")
        module_name = f"_mcptasks_target_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise CliError(f"cannot load {target!r}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        sys.path.insert(0, str(path.resolve().parent))
        try:
            spec.loader.exec_module(module)
        except MissingExtra as exc:
            raise CliError(f"cannot load {target!r}: {exc}") from None
        except Exception as exc:
            raise CliError(f"cannot load {target!r}: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(location)
        except MissingExtra as exc:
            raise CliError(f"cannot load {target!r}: {exc}") from None
        except ImportError as exc:
            raise CliError(f"cannot import module {location!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise CliError(
            f"{location!r} has no attribute {attr!r} (name the server object as TARGET:ATTR)"
        ) from None


def _check_port(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _check_store(store_object: Any, shown: str) -> None:
    """Open and close `store_object` once, so an unusable store is one error line, not a traceback."""
    import anyio

    async def probe() -> None:
        await store_object.open()
        await store_object.close()

    try:
        anyio.run(probe)
    except MissingExtra as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:
        leaf: BaseException = exc
        while getattr(leaf, "exceptions", None):
            leaf = leaf.exceptions[0]  # type: ignore[attr-defined]
        text = str(leaf).rstrip(". ") or type(leaf).__name__
        raise CliError(f"cannot open the task store {shown}: {text}; {store_error_hint(leaf)}") from None


def _store(store: str | None) -> Any:
    """The store named by --store or the environment, checked by opening it once (None: unset)."""
    from mcptasks.stores.redaction import redact_url
    from mcptasks.stores.url import store_from_url

    store_url = store or os.environ.get(STORE_ENV)
    if not store_url:
        return None
    try:
        store_object = store_from_url(store_url)
    except (ValueError, MissingExtra) as exc:
        raise CliError(str(exc)) from None
    _check_store(store_object, redact_url(store_url))
    return store_object


def _exit_when_stuck(stuck: list[str]) -> None:
    """At shutdown, leave bodies that ignore cancellation behind instead of waiting forever."""
    write(
        sys.stderr,
        f"mcptasks: exiting without waiting for {len(stuck)} task bodies that ignore cancellation\n",
    )
    os._exit(1)


def _configure(
    extension: Any, *, run_tasks: bool | None = None, park_waiting: bool = False, **flags: Any
) -> None:
    """Apply the `MCPTASKS_*` environment, then the flags, to the extension's configuration
    (`park_waiting`: turn `EngineConfig.park_waiting` on unless the environment sets it)."""
    from dataclasses import replace

    config = _configured(extension.config, **flags)
    if run_tasks is not None:
        config = replace(config, run_tasks=run_tasks)
    if park_waiting and "MCPTASKS_PARK_WAITING" not in os.environ:
        config = replace(config, park_waiting=True)
    extension.configure(config)


def _configured(base: Any = None, **flags: Any) -> Any:
    """`base` (default: the defaults) with the `MCPTASKS_*` environment, then the flags, applied."""
    from mcptasks._runtime.config import EngineConfig, apply_flags

    try:
        return apply_flags(EngineConfig.from_env(base), **flags)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _extension_of(server: Any) -> Any:
    """The `TasksExtension` of a TaskServer or MCPServer (None when an MCPServer has none)."""
    from mcptasks.server.app import TaskServer
    from mcptasks.server.extension import extension_of

    return server.extension if isinstance(server, TaskServer) else extension_of(server)


def _extension(server: Any, target: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    from mcptasks.server.app import TaskServer

    if not isinstance(server, (TaskServer, MCPServer)):
        raise CliError(f"{target!r} is a {type(server).__name__}, not a TaskServer or an MCPServer")
    extension = _extension_of(server)
    if extension is None:
        raise CliError(f"{target!r} has no TasksExtension (pass lifespan=ext.lifespan() to MCPServer)")
    return extension


def _startup(mcp: Any, extension: Any, url: str | None, log_level: str, log_format: str) -> Startup:
    """What the start-up block shows for this server."""
    import anyio

    from mcptasks.stores.redaction import redact_url
    from mcptasks.stores.url import describe_store

    startup = Startup(server=str(mcp.name), url=url, log_level=log_level, log_format=log_format)
    task_tools = extension.task_tools if extension is not None else {}
    if extension is not None:
        startup.store = describe_store(extension.engine.store)
        startup.runs_tasks = extension.engine.run_tasks
        named = extension.config.executor
        if named is not None:
            startup.executor = redact_url(named) if isinstance(named, str) else repr(named)
        startup.fallback = extension.protocol.fallback
        startup.webhooks = webhook_urls(extension.config)
    listed = [tool.name for tool in anyio.run(mcp.list_tools)]
    if extension is not None:  # task tools are listed by the extension's middleware, not the SDK
        listed += [definition["name"] for definition in extension.tool_definitions()]
    for name in dict.fromkeys(listed):
        tool = task_tools.get(name)
        if tool is None:
            startup.tools.append(ToolLine(name))
        else:
            own = tool.fallback if tool.fallback not in (None, startup.fallback) else None
            startup.tools.append(ToolLine(name, tool.task_support, own))
    return startup


def _serve_http(
    mcp: Any,
    extension: Any,
    host: str,
    port: int,
    path: str,
    log_level: str,
    metrics: Any = None,
    settings: Any = None,
) -> None:
    """Serve Streamable HTTP with uvicorn, its records going through the handler `serve` installed,
    with the read deadlines and connection bound of `settings` (an `EngineConfig`; default: the
    extension's)."""
    import anyio

    from mcptasks.cli.metrics_server import with_metrics
    from mcptasks.server.app import http_app, uvicorn_server
    from mcptasks.server.guarded_server import guarded_config

    app = http_app(mcp, extension, path=path, host=host)
    config = guarded_config(
        app,
        settings if settings is not None else extension.config,
        host=host,
        port=port,
        lifespan="on",
        log_config=None,
        log_level="debug" if log_level == "debug" else "warning",
        access_log=log_level == "debug",
    )
    anyio.run(with_metrics, uvicorn_server(config, extension).serve, metrics)


def serve(
    target: str,
    *,
    transport: str,
    host: str,
    port: int,
    path: str,
    store: str | None,
    enqueue_only: bool = False,
    lease_ttl: float | None = None,
    log_level: str = "info",
    log_format: LogFormat = "text",
    fast_path: bool | None = None,
    accept_missing_mcp_name: bool = False,
    status_tool: bool = False,
    related_tasks: bool = False,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    executor: str | None = None,
    no_worker_timeout: float | None = None,
    header_timeout: float | None = None,
    body_timeout: float | None = None,
    max_connections: int | None = None,
    webhooks: list[str] | None = None,
    webhook_secret: str | None = None,
    webhook_allow_private: bool = False,
) -> None:
    """Load TARGET and serve it until interrupted (`KeyboardInterrupt` after Ctrl-C)."""
    from mcp.server.mcpserver import MCPServer

    from mcptasks.server.app import TaskServer
    from mcptasks.stores.url import describe_store

    server = load_target(target)
    if not isinstance(server, (TaskServer, MCPServer)):
        raise CliError(f"{target!r} is a {type(server).__name__}, not a TaskServer or an MCPServer")
    store_object = _store(store)
    hooks: dict[str, Any] = {
        "webhooks": webhooks,
        "webhook_secret": webhook_secret,
        "webhook_allow_private": webhook_allow_private,
    }
    if store_object is not None or enqueue_only or lease_ttl is not None or executor is not None or webhooks:
        _extension(server, target)  # the flags need one
    extension = _extension_of(server)
    connections: dict[str, Any] = {
        "header_timeout": header_timeout,
        "body_timeout": body_timeout,
        "max_connections": max_connections,
    }
    if extension is not None:
        _configure(
            extension,
            **connections,
            enqueue_only=enqueue_only,
            lease_ttl=lease_ttl,
            fast_path=fast_path,
            accept_missing_mcp_name=accept_missing_mcp_name,
            status_tool=status_tool,
            related_tasks=related_tasks,
            executor=executor,
            no_worker_timeout=no_worker_timeout,
            **hooks,
        )
        if store_object is not None:
            extension.use_store(store_object)
        else:  # the store the file configured
            _check_store(extension.engine.store, describe_store(extension.engine.store))
        _check_webhooks(extension)
        if extension.config.executor is not None:  # the executor's workers run the bodies
            _check_executor(extension)
            _configure(extension, run_tasks=False)
    if transport == "http":
        _check_port(host, port)
    if extension is not None:
        extension.engine.on_stuck_shutdown = _exit_when_stuck
    mcp = server.mcp if isinstance(server, TaskServer) else server
    metrics = None
    if metrics_port is not None:
        from mcptasks.cli.metrics_server import metrics_server

        _check_port(metrics_host, metrics_port)
        try:
            metrics = metrics_server(_extension(server, target), metrics_host, metrics_port)
        except MissingExtra as exc:
            raise CliError(f"--metrics-port: {exc}") from None
    settings = extension.config if extension is not None else _configured(**connections)
    _serve_transport(mcp, extension, transport, host, port, path, log_level, log_format, metrics, settings)


def _serve_transport(
    mcp: Any,
    extension: Any,
    transport: str,
    host: str,
    port: int,
    path: str,
    log_level: str,
    log_format: LogFormat,
    metrics: Any = None,
    settings: Any = None,
) -> None:
    """Show the start-up block and serve `mcp` over `transport` until interrupted (and `metrics`,
    a `metrics_server`, beside it; `settings`: the `EngineConfig` whose HTTP settings apply)."""
    import anyio

    from mcptasks.cli.metrics_server import with_metrics
    from mcptasks.server.stdio_stop import serve_stdio

    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}{path}" if transport == "http" else None
    configure_logging(log_level, log_format)
    startup = _startup(mcp, extension, url, log_level, log_format)
    startup.metrics = metrics.url if metrics is not None else None
    if transport == "http":
        startup.print(sys.stderr)
        _serve_http(mcp, extension, host, port, path, log_level, metrics, settings)
        return
    tune_gc()
    run = partial(with_metrics, mcp.run_stdio_async, metrics)
    if anyio.run(serve_stdio, run, lambda: startup.print(sys.stderr)):
        raise KeyboardInterrupt


def _check_webhooks(extension: Any) -> None:
    """Refuse to start with webhooks the install or the store cannot deliver."""
    config = extension.config
    if not config.webhooks:
        return
    from mcptasks._runtime.webhooks.targets import endpoints
    from mcptasks.stores.foreign import adopt_store
    from mcptasks.stores.url import describe_store

    try:  # the settings are final now: the environment's and the flags' parts together
        endpoints(config.webhooks, config.webhook_secret, config.webhook_allow_private)
    except ValueError as exc:
        raise CliError(str(exc)) from None

    try:
        import standardwebhooks  # noqa: F401
    except ImportError:
        raise CliError(
            str(
                MissingExtra(
                    "webhooks", "standardwebhooks", "webhooks", what="--webhook (task event webhooks)"
                )
            )
        ) from None
    store = extension.engine.store
    if adopt_store(store).outbox() is None:
        raise CliError(f"--webhook: the task store {describe_store(store)} keeps no webhook outbox")


def _check_executor(extension: Any) -> None:
    """Refuse an executor URL that does not load, or an executor over a store other processes
    cannot read (its workers run elsewhere)."""
    from mcptasks._runtime.executor import executor_from_url

    named = extension.config.executor
    if isinstance(named, str):
        try:
            executor_from_url(named)
        except (ValueError, ImportError) as exc:
            raise CliError(str(exc)) from None
    if not extension.engine.store.durable:
        raise CliError(
            "an executor's workers run in other processes: they need a store shared between "
            "processes (pass --store redis://, postgresql:// or sqlite:///)"
        )


def work(
    target: str,
    *,
    store: str | None,
    concurrency: int | None,
    lease_ttl: float | None = None,
    log_level: str = "info",
    log_format: LogFormat = "text",
    executor: str | None = None,
    no_worker_timeout: float | None = None,
    webhooks: list[str] | None = None,
    webhook_secret: str | None = None,
    webhook_allow_private: bool = False,
) -> None:
    """Load TARGET and run its tasks until interrupted: claimed from the shared store, or those the
    executor (`--executor`) assigns to this worker."""
    import anyio

    extension = _extension(load_target(target), target)
    store_object = _store(store)
    if store_object is None:
        raise CliError(f"a worker needs a shared store: pass --store URL or set {STORE_ENV}")
    if not store_object.durable:
        raise CliError(
            "a worker needs a store shared between processes (redis://, postgresql://, sqlite:///)"
        )
    extension.use_store(store_object)
    _configure(
        extension,
        lease_ttl=lease_ttl,
        concurrency=concurrency,
        run_tasks=True,
        park_waiting=True,
        executor=executor,
        no_worker_timeout=no_worker_timeout,
        webhooks=webhooks,
        webhook_secret=webhook_secret,
        webhook_allow_private=webhook_allow_private,
    )
    _check_webhooks(extension)
    if extension.config.executor is not None:
        _check_executor(extension)
    engine = extension.engine
    engine.on_stuck_shutdown = _exit_when_stuck
    configure_logging(log_level, log_format)

    async def run() -> None:
        async with engine:
            on = "" if engine.executor is None else f" for {engine.executor!r}"
            write(
                sys.stdout,
                f"mcptasks worker {engine.instance_id} running {len(engine.tools)} task tools{on}\n",
            )
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break

    tune_gc()
    anyio.run(run)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `mcptasks` command."""
    parser = argparse.ArgumentParser(
        prog="mcptasks", description="Long-running MCP tools with the Tasks extension."
    )
    parser.add_argument("--version", action="version", version=f"mcptasks {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve a TaskServer or MCPServer")
    run.add_argument(
        "target", help="path/to/file.py[:attr] or package.module[:attr] (attr defaults to 'app')"
    )
    run.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (a client starts this process) or http (Streamable HTTP; default stdio)",
    )
    run.add_argument(
        "--host", default="127.0.0.1", help="interface to listen on with --transport http (default 127.0.0.1)"
    )
    run.add_argument(
        "--port", type=int, default=8000, help="port to listen on with --transport http (default 8000)"
    )
    run.add_argument("--path", default="/mcp", help="HTTP path of the MCP endpoint (default /mcp)")
    run.add_argument(
        "--store",
        help=f"task store URL (memory://, sqlite:///tasks.db, redis://, postgresql://); also ${STORE_ENV}",
    )
    run.add_argument(
        "--fast-path",
        choices=("on", "off"),
        help="answer tasks/get|update|cancel, task tool calls and task listen streams over HTTP below the "
        "SDK's request machinery (default on; also $MCPTASKS_FAST_PATH)",
    )
    run.add_argument(
        "--accept-missing-mcp-name",
        action="store_true",
        help="accept tasks/* requests over HTTP without an Mcp-Name header (a mismatched one is still "
        "refused), warning once per client; also $MCPTASKS_ACCEPT_MISSING_MCP_NAME",
    )
    run.add_argument(
        "--status-tool",
        action="store_true",
        help="list the task_status tool beside the task tools, so a model can read its tasks' "
        "progress in hosts that show it only to the user; also $MCPTASKS_STATUS_TOOL",
    )
    run.add_argument(
        "--related-tasks",
        action="store_true",
        help="keep the related task ids a tools/call names in _meta (the ext-tasks draft) for its "
        "body to read; also $MCPTASKS_RELATED_TASKS",
    )
    run.add_argument(
        "--header-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="HTTP: close a connection whose request head has not arrived this long after it opened "
        "(default 10; also $MCPTASKS_HEADER_TIMEOUT)",
    )
    run.add_argument(
        "--body-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="HTTP: close a connection whose request body has not arrived this long after its head "
        "(default 30; responses and SSE streams are not bounded; also $MCPTASKS_BODY_TIMEOUT)",
    )
    run.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help="HTTP: the most connections open at once, more wait in the listen backlog (default: "
        "three quarters of the open-file limit, ulimit -n; also $MCPTASKS_MAX_CONNECTIONS)",
    )
    run.add_argument(
        "--enqueue-only",
        action="store_true",
        help="create tasks but leave running them to `mcptasks worker` processes on the same store",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="also serve task metrics in the Prometheus text format on this port (any path; default off)",
    )
    run.add_argument(
        "--metrics-host", default="127.0.0.1", help="address of the metrics endpoint (default 127.0.0.1)"
    )
    run.add_argument(
        "--reload",
        action="store_true",
        help="restart the server when a file in the target's directory changes (development; HTTP only)",
    )
    worker = commands.add_parser(
        "worker", help="run queued tasks of a TaskServer from a shared store, serving nothing"
    )
    worker.add_argument("target", help="the same TARGET the serving replicas use")
    worker.add_argument("--store", help=f"the shared task store URL; also ${STORE_ENV}")
    worker.add_argument(
        "--concurrency", type=int, default=None, help="most tasks run at once (default: no bound)"
    )
    for command in (run, worker):
        command.add_argument(
            "--executor",
            default=None,
            help="run bodies on a durable execution engine: temporal://HOST:PORT[/NAMESPACE], "
            "dbos+postgresql://..., dbos+sqlite:///PATH (serve starts them, workers run them; "
            f"also ${EXECUTOR_ENV})",
        )
        command.add_argument(
            "--lease-ttl",
            type=float,
            default=None,
            help="seconds without a heartbeat after which this instance's tasks count as lost (default 15)",
        )
        command.add_argument(
            "--no-worker-timeout",
            type=float,
            default=None,
            help="seconds a queued task waits while no live worker offers its tool (a rolling deploy) "
            "before it fails with no_worker_for_tool (default 300)",
        )
        command.add_argument(
            "--webhook",
            action="append",
            default=None,
            metavar="URL",
            help="send task events (input_required, completed, failed, cancelled) to URL as signed "
            "Standard Webhooks messages; repeatable (also $MCPTASKS_WEBHOOKS, comma-separated)",
        )
        command.add_argument(
            "--webhook-secret",
            default=None,
            metavar="whsec_...",
            help="the Standard Webhooks signing secret, required with --webhook "
            "(also $MCPTASKS_WEBHOOK_SECRET, which keeps it out of the process list)",
        )
        command.add_argument(
            "--webhook-allow-private",
            action="store_true",
            help="also deliver to private, loopback and link-local addresses "
            "(refused by default; also $MCPTASKS_WEBHOOK_ALLOW_PRIVATE)",
        )
        command.add_argument(
            "--log-level",
            choices=LOG_LEVELS,
            default="info",
            help="level of mcptasks' log records on stderr (default info: one line per task transition)",
        )
        command.add_argument(
            "--log-format",
            choices=LOG_FORMATS,
            default="text",
            help="text lines, or one JSON object per line for log collectors (default text)",
        )
    from mcptasks.cli import admin as admin_cli
    from mcptasks.cli import call as call_cli
    from mcptasks.cli import dashboard as dashboard_cli
    from mcptasks.cli import tasks as tasks_cli

    call_cli.register(commands)
    tasks_cli.register(commands)
    admin_cli.register(commands)
    dashboard_cli.register(commands)
    return parser


def _reload(args: argparse.Namespace, argv: list[str]) -> int:
    """`serve --reload`: serve in a child process restarted on changes (`mcptasks.cli.reload`)."""
    from mcptasks.cli.reload import supervise, watched_directory

    if args.transport != "http":
        raise CliError("--reload needs --transport http (a stdio client cannot reconnect)")
    location, _ = _split_target(args.target)
    return supervise([arg for arg in argv if arg != "--reload"], watched_directory(location))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `mcptasks` and `python -m mcptasks`."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            if not 0 < args.port < 65536:
                raise CliError(f"--port must be between 1 and 65535, got {args.port}")
            if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
                raise CliError(f"--metrics-port must be between 1 and 65535, got {args.metrics_port}")
            if args.reload:
                return _reload(args, sys.argv[1:] if argv is None else list(argv))
            serve(
                args.target,
                transport=args.transport,
                host=args.host,
                port=args.port,
                path=args.path,
                store=args.store,
                enqueue_only=args.enqueue_only,
                lease_ttl=args.lease_ttl,
                log_level=args.log_level,
                log_format=args.log_format,
                fast_path=None if args.fast_path is None else args.fast_path == "on",
                accept_missing_mcp_name=args.accept_missing_mcp_name,
                status_tool=args.status_tool,
                related_tasks=args.related_tasks,
                metrics_port=args.metrics_port,
                metrics_host=args.metrics_host,
                executor=args.executor,
                no_worker_timeout=args.no_worker_timeout,
                header_timeout=args.header_timeout,
                body_timeout=args.body_timeout,
                max_connections=args.max_connections,
                webhooks=args.webhook,
                webhook_secret=args.webhook_secret,
                webhook_allow_private=args.webhook_allow_private,
            )
        elif args.command == "worker":
            work(
                args.target,
                store=args.store,
                concurrency=args.concurrency,
                lease_ttl=args.lease_ttl,
                log_level=args.log_level,
                log_format=args.log_format,
                executor=args.executor,
                no_worker_timeout=args.no_worker_timeout,
                webhooks=args.webhook,
                webhook_secret=args.webhook_secret,
                webhook_allow_private=args.webhook_allow_private,
            )
        else:
            handler: Handler = args.handler
            return handler(args)
    except CliError as exc:
        return exc.report(sys.stderr)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
