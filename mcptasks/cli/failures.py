"""How a client subcommand ends on a failure: one line naming the cause, and the exit status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TextIO
from urllib.parse import urlsplit, urlunsplit

import anyio

from mcptasks.cli.errors import EXIT_FAILED, EXIT_INTERRUPTED, PROG, CliError
from mcptasks.cli.output import one_line, write


def leaf(exc: BaseException) -> BaseException:
    """The first innermost exception of (nested) exception groups; `exc` itself otherwise."""
    while True:
        inner = getattr(exc, "exceptions", None)
        if not inner:
            return exc
        exc = inner[0]


def _not_found(url: str) -> str:
    """The error for an HTTP 404 from `url`, with the likely right URL."""
    parts = urlsplit(url)
    if parts.path.rstrip("/") != "/mcp":
        likely = urlunsplit(parts._replace(path="/mcp", query="", fragment=""))
        return (
            f"no MCP endpoint at {url} (HTTP 404 Not Found); `mcptasks serve` and most servers "
            f"answer at the path /mcp: try {likely}"
        )
    return (
        f"no MCP endpoint at {url} (HTTP 404 Not Found); check the path the server was started "
        "with (`mcptasks serve --path`)"
    )


def describe(exc: BaseException, url: str | None = None) -> str:
    """A failure as one line; `url` (the server's, when it has one) names what could not be reached."""
    import httpx2
    from mcp import MCPError

    from mcptasks.errors import ProtocolError, TaskError

    cause = leaf(exc)
    # The SDK's HTTP client turns a 404 response into this error (a JSON-RPC method-not-found
    # from a server says "Method not found").
    if url is not None and isinstance(cause, MCPError) and cause.message == "Not Found":
        return _not_found(url)
    if url is not None and isinstance(cause, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        reason = str(cause) or type(cause).__name__
        if reason == "All connection attempts failed":
            reason = "connection refused"
        return f"cannot connect to {url} ({reason}): is the server running there?"
    if isinstance(cause, (MCPError, ProtocolError)):
        return f"{cause.message} (code {cause.code})"
    text = str(cause) or type(cause).__name__
    return text if isinstance(cause, TaskError) else f"{type(cause).__name__}: {text}"


def store_open_failure(exc: BaseException, shown: str) -> str:
    """Why the task store `shown` (a redacted URL) could not be opened, as one line."""
    from mcptasks.stores.base import StoreNotFound
    from mcptasks.stores.extras import MissingExtra
    from mcptasks.stores.url import store_error_hint

    cause = leaf(exc)
    if isinstance(cause, (MissingExtra, StoreNotFound)):
        return str(cause)
    text = " ".join(str(cause).split()).rstrip(". ") or type(cause).__name__
    return f"cannot open the task store {shown}: {text}; {store_error_hint(cause)}"


def run_reporting(work: Callable[[], Awaitable[int]], stderr: TextIO, url: str | None = None) -> int:
    """Run `work` to its exit status, reporting a failure in one line (exit 2, 3 or 130)."""
    try:
        return anyio.run(work)
    except CliError as exc:
        return exc.report(stderr)
    except KeyboardInterrupt:
        write(stderr, f"\n{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        cause = leaf(exc)
        if isinstance(cause, CliError):
            return cause.report(stderr)
        write(stderr, f"{PROG}: error: {one_line(describe(exc, url))}\n")
        return EXIT_FAILED
