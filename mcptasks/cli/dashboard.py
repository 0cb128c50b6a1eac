"""`mcptasks dashboard`: serve the dashboard for a store with uvicorn."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from mcptasks._runtime.operator import check_operator_url
from mcptasks.cli.admin import STORE_ENV, add_store_option, open_operator_store
from mcptasks.cli.arguments import Subcommands
from mcptasks.cli.errors import EXIT_INTERRUPTED, EXIT_OK, CliError
from mcptasks.cli.logsetup import configure_logging
from mcptasks.cli.output import write

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "REDACT_ENV",
    "TOKEN_ENV",
    "allowed_hosts",
    "is_loopback",
    "redaction",
    "register",
    "run_dashboard",
]

TOKEN_ENV = "MCPTASKS_DASHBOARD_TOKEN"
ALLOWED_HOSTS_ENV = "MCPTASKS_DASHBOARD_ALLOWED_HOSTS"
REDACT_ENV = "MCPTASKS_DASHBOARD_REDACT"


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(args: argparse.Namespace) -> list[str]:
    """The `Host` values the dashboard answers to: `--allowed-host` (repeated), else the
    comma-separated `$MCPTASKS_DASHBOARD_ALLOWED_HOSTS`, else the loopback names plus `--host`."""
    from mcptasks.dashboard.guard import hosts_for

    given = args.allowed_host or [h for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    return [h.strip() for h in given] if given else hosts_for(args.host)


def redaction(args: argparse.Namespace) -> bool | list[str]:
    """What the detail view masks: True (every argument value) with `--redact-arguments` or a
    `*` among the names, else the names of `--redact` (repeated) or of the comma-separated
    `$MCPTASKS_DASHBOARD_REDACT` (the option replaces the variable); [] for nothing."""
    given = args.redact or os.environ.get(REDACT_ENV, "").split(",")
    names = [name.strip() for name in given if name.strip()]
    if args.redact_arguments or "*" in names:
        return True
    return names


def _redaction_text(redact: bool | list[str]) -> str:
    if redact is True:
        return "every argument value redacted"
    return (
        f"arguments redacted: {', '.join(redact)}"
        if redact
        else "arguments shown (--redact-arguments hides them)"
    )


_PROG = "mcptasks dashboard"


def _fail(message: str) -> CliError:
    """A bad `mcptasks dashboard` option: one `mcptasks dashboard: error:` line, exit 2."""
    return CliError(message, prog=_PROG)


def _check(args: argparse.Namespace, url: str | None, token: str | None) -> str:
    """The store URL, once the options are known to be usable (`CliError` otherwise)."""
    from mcptasks.dashboard.login import TOKEN_ADVICE, weak_token

    if not url:
        raise _fail(f"name the task store: --store URL or ${STORE_ENV}")
    try:
        check_operator_url(url)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if not 0 < args.port < 65536:
        raise _fail(f"--port must be between 1 and 65535, got {args.port}")
    if any(not h.strip() for h in args.allowed_host or ()):
        raise _fail("--allowed-host needs a host name, such as dash.example.com or dash.example.com:*")
    if not is_loopback(args.host) and token is None:
        raise _fail(
            f"refusing to listen on {args.host} without an operator token: set ${TOKEN_ENV} "
            "(or --token), or keep the default --host 127.0.0.1"
        )
    weakness = None if is_loopback(args.host) or token is None else weak_token(token)
    if weakness is not None:
        raise _fail(
            f"refusing to listen on {args.host} with a weak operator token ({weakness}): beyond "
            f"loopback it guards reading too; {TOKEN_ADVICE}"
        )
    return url


def _probe(url: str) -> None:
    """Open and close the existing store once (creating nothing), so an unusable one is one
    error line before serving."""
    import anyio

    async def probe() -> None:
        store = await open_operator_store(url, prog=_PROG)
        await store.close()

    anyio.run(probe)


def run_dashboard(args: argparse.Namespace) -> int:
    """Check the options, then serve until interrupted (`CliError` for unusable options)."""
    import uvicorn

    from mcptasks.dashboard.app import dashboard_app

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    url = _check(args, args.store or os.environ.get(STORE_ENV), token)
    configure_logging("info")  # an operator's cancel is one line on stderr
    _probe(url)
    hosts = allowed_hosts(args)
    protect_reads = not is_loopback(args.host)
    redact = redaction(args)
    try:
        app = dashboard_app(
            url,
            token=token,
            title=args.title,
            refresh=args.refresh,
            show_results=not args.no_results,
            allowed_hosts=hosts,
            protect_reads=protect_reads,
            redact_arguments=redact,
        )
    except ValueError as exc:
        raise _fail(str(exc)) from None
    cancel = "cancel enabled (operator token set)" if token else "read-only (no operator token)"
    login = ", login required to read" if protect_reads else ""
    write(sys.stdout, f"mcptasks dashboard on http://{args.host}:{args.port}/ - {cancel}{login}\n")
    defaults = not args.allowed_host and not os.environ.get(ALLOWED_HOSTS_ENV, "").strip(", ")
    hint = " (--allowed-host adds the names clients use)" if protect_reads and defaults else ""
    write(sys.stdout, f"answering to Host: {', '.join(hosts)}{hint}\n")
    write(sys.stdout, _redaction_text(redact) + "\n")
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def register(commands: Subcommands) -> None:
    """Add the `dashboard` subcommand (it sets `handler(args) -> int`)."""
    parser = commands.add_parser(
        "dashboard",
        help="serve a live web dashboard of the task store (operators)",
        description=(
            "Serve a live web dashboard of the task store. On loopback reads need no token; beyond "
            "it they do (a login form, or an Authorization: Bearer header). Cancelling always does."
        ),
    )
    add_store_option(parser)
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface (default 127.0.0.1; others need a token)"
    )
    parser.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        metavar="HOST",
        help=(
            "a Host header value the dashboard answers to (NAME, or NAME:* for any port; '*' for any), "
            f"repeatable; also ${ALLOWED_HOSTS_ENV} (comma-separated). Default: 127.0.0.1, localhost, "
            "[::1] and --host, each on any port"
        ),
    )
    parser.add_argument(
        "--token",
        help=f"operator token that enables the cancel button (prefer ${TOKEN_ENV}: arguments are visible to ps)",
    )
    parser.add_argument("--title", default="mcptasks", help="page title")
    parser.add_argument("--refresh", type=float, default=2.0, help="seconds between live updates (default 2)")
    parser.add_argument("--no-results", action="store_true", help="leave task results out of the detail view")
    parser.add_argument(
        "--redact-arguments",
        action="store_true",
        help="mask every tool argument value in the detail view and its API (names stay visible)",
    )
    parser.add_argument(
        "--redact",
        action="append",
        metavar="NAME",
        help=(
            "mask the value of argument NAME (case-insensitive, also nested keys; '*' for all), "
            f"repeatable; also ${REDACT_ENV} (comma-separated), which the option replaces. "
            "Masked values show as '\u2022\u2022\u2022 (redacted)' and are never sent to the browser"
        ),
    )
    parser.set_defaults(handler=run_dashboard)
