"""The `mcptasks` command line: `serve` and `worker` (server side), `call` and `tasks` (client side)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcptasks import __version__

STORE_ENV = "MCPTASKS_STORE"


class CliError(Exception):
    """A user error the CLI reports in one line (exit status 2)."""


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
        except Exception as exc:
            raise CliError(f"cannot load {target!r}: {type(exc).__name__}: {exc}") from exc
    else:
        try:
            module = importlib.import_module(location)
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


def _store(store: str | None) -> Any:
    """The store named by --store or the environment, checked by opening it once (None: unset)."""
    import anyio

    from mcptasks.store.url import store_from_url

    store_url = store or os.environ.get(STORE_ENV)
    if not store_url:
        return None
    try:
        store_object = store_from_url(store_url)
    except ValueError as exc:
        raise CliError(str(exc)) from None

    async def probe() -> None:
        await store_object.open()
        await store_object.close()

    try:
        anyio.run(probe)
    except Exception as exc:
        raise CliError(f"cannot open the task store {store_url!r}: {exc}") from None
    return store_object


def _extension(server: Any, target: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    from mcptasks.ext import extension_of
    from mcptasks.server import TaskServer

    if isinstance(server, TaskServer):
        return server.extension
    if isinstance(server, MCPServer):
        extension = extension_of(server)
        if extension is None:
            raise CliError(f"{target!r} has no TasksExtension attached (call ext.attach(server))")
        return extension
    raise CliError(f"{target!r} is a {type(server).__name__}, not a TaskServer or an MCPServer")


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
) -> None:
    """Load TARGET and serve it until interrupted."""
    from mcp.server.mcpserver import MCPServer

    from mcptasks.server import TaskServer

    server = load_target(target)
    if not isinstance(server, (TaskServer, MCPServer)):
        raise CliError(f"{target!r} is a {type(server).__name__}, not a TaskServer or an MCPServer")
    store_object = _store(store)
    if store_object is not None or enqueue_only or lease_ttl is not None:
        extension = _extension(server, target)
        if store_object is not None:
            extension.use_store(store_object)
        if enqueue_only:
            extension.engine.run_tasks = False
        if lease_ttl is not None:
            extension.engine.lease_ttl = lease_ttl
    if transport == "http":
        _check_port(host, port)
    if isinstance(server, TaskServer):
        server.run("http" if transport == "http" else "stdio", host=host, port=port, path=path)
    elif transport == "http":
        server.run("streamable-http", host=host, port=port, streamable_http_path=path)
    else:
        server.run("stdio")


def work(target: str, *, store: str | None, concurrency: int | None, lease_ttl: float | None = None) -> None:
    """Load TARGET and run its queued tasks from the shared store until interrupted."""
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
    engine = extension.engine
    engine.run_tasks = True
    engine.max_concurrent = concurrency
    if lease_ttl is not None:
        engine.lease_ttl = lease_ttl

    async def run() -> None:
        async with engine:
            print(f"mcptasks worker {engine.instance_id} running {len(engine.tools)} task tools", flush=True)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break

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
    run.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8000)
    run.add_argument("--path", default="/mcp", help="HTTP path of the MCP endpoint (default /mcp)")
    run.add_argument(
        "--store",
        help=f"task store URL (memory://, sqlite:///tasks.db, redis://, postgresql://); also ${STORE_ENV}",
    )
    run.add_argument(
        "--enqueue-only",
        action="store_true",
        help="create tasks but leave running them to `mcptasks worker` processes on the same store",
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
            "--lease-ttl",
            type=float,
            default=None,
            help="seconds without a heartbeat after which this instance's tasks count as lost (default 15)",
        )
    from mcptasks import admin_cli, call_cli
    from mcptasks.dashboard import cli as dashboard_cli

    call_cli.register(commands)
    admin_cli.register(commands)
    dashboard_cli.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `mcptasks` and `python -m mcptasks`."""
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "lease_ttl", None) is not None and not args.lease_ttl > 0:
            raise CliError("--lease-ttl must be a positive number of seconds")
        if args.command == "serve":
            if not 0 < args.port < 65536:
                raise CliError(f"--port must be between 1 and 65535, got {args.port}")
            serve(
                args.target,
                transport=args.transport,
                host=args.host,
                port=args.port,
                path=args.path,
                store=args.store,
                enqueue_only=args.enqueue_only,
                lease_ttl=args.lease_ttl,
            )
        elif args.command == "worker":
            if args.concurrency is not None and args.concurrency < 1:
                raise CliError("--concurrency must be a positive integer")
            work(args.target, store=args.store, concurrency=args.concurrency, lease_ttl=args.lease_ttl)
        else:
            handler: Callable[[argparse.Namespace], int] = args.handler
            return handler(args)
    except CliError as exc:
        print(f"mcptasks: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
