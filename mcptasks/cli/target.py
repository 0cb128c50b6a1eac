"""The server `mcptasks call` and `mcptasks tasks` talk to: a Streamable HTTP URL or a stdio command."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcptasks.cli.errors import CliError
from mcptasks.cli.ledger import LEDGER_ENV

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters

    from mcptasks.client import TasksClient


@dataclass(frozen=True)
class Target:
    """The server a command talks to: a Streamable HTTP URL or a stdio command."""

    url: str | None = None
    command: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def identity(self) -> str:
        """The ledger's name for this server."""
        from mcptasks.client import server_identity

        return server_identity(self.url if self.url is not None else self._stdio())

    def _stdio(self) -> StdioServerParameters:
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=self.command[0], args=list(self.command[1:]), env=dict(os.environ)
        )

    def words(self) -> list[str]:
        """The command-line words naming this target (for the resume hint; headers left out)."""
        if self.url is not None:
            return [self.url]
        return ["--stdio", shlex.join(self.command)]

    def client(self, extension: TasksClient, **options: Any) -> Client:
        """An `mcp.Client` for this target with `extension` installed."""
        from mcp import Client

        server: Any
        if self.url is None:
            server = self._stdio()
        elif self.headers:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(
                headers=dict(self.headers), timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=False
            )
            server = streamable_http_client(self.url, http_client=http)
        else:
            server = self.url
        return Client(server, extensions=[extension], **options)


def _headers(headers: Sequence[str]) -> list[tuple[str, str]]:
    parsed: list[tuple[str, str]] = []
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise CliError(f"--header must look like 'Name: value', got {header!r}")
        parsed.append((name.strip(), value.strip()))
    return parsed


def _stdio_target(stdio: str) -> Target:
    try:
        command = shlex.split(stdio)
    except ValueError as exc:
        raise CliError(f"--stdio: {exc}") from None
    if not command:
        raise CliError("--stdio needs a command")
    return Target(command=tuple(command))


def split_target(words: Sequence[str], stdio: str | None, headers: Sequence[str]) -> tuple[Target, list[str]]:
    """Take the target off the front of the positional words: a URL unless `--stdio` was given."""
    parsed_headers = _headers(headers)
    if stdio is not None:
        if parsed_headers:
            raise CliError("--header applies to HTTP servers only, not to --stdio")
        return _stdio_target(stdio), list(words)
    if not words:
        raise CliError("missing the server: give a URL (http://...) or --stdio 'COMMAND ...'")
    url, *rest = words
    if not url.startswith(("http://", "https://")):
        raise CliError(f"expected the server's URL (http://... or https://...) or --stdio, got {url!r}")
    return Target(url=url, headers=tuple(parsed_headers)), rest


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """The options naming the server (`--stdio`, `--header`) and the `--ledger`."""
    parser.add_argument(
        "--stdio",
        metavar="CMD",
        help="run the server as this command (one shell-quoted string) and talk over stdio",
    )
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for every request (repeatable), e.g. 'Authorization: Bearer ...'",
    )
    parser.add_argument(
        "--ledger", metavar="PATH", help=f"record started tasks in this SQLite ledger (also ${LEDGER_ENV})"
    )
