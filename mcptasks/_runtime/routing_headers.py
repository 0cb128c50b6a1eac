"""The HTTP routing headers of `tasks/*` requests: `Mcp-Method` and `Mcp-Name` (SEP-2243).

Over Streamable HTTP a `tasks/get|update|cancel` request names its method and task id in headers,
so a proxy can route it without reading the body; `check_routing_headers` refuses a mismatch with
-32020. A header value may be sent in its `=?base64?...?=` form (`decode_header_value`). A server
may accept a missing `Mcp-Name` (`accept_missing_mcp_name`); `MissingNameWarnings` then logs once
per client that did so.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Mapping
from typing import Any

from mcptasks._runtime.safe_text import one_line
from mcptasks.errors import ProtocolError
from mcptasks.wire import CLIENT_INFO_META, HEADER_MISMATCH

logger = logging.getLogger("mcptasks")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header `name` (lower case), whatever the case of the mapping's keys."""
    value = headers.get(name)  # ASGI, Starlette and the SDK give lower-case names
    if value is None:
        value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    return None if value is None else str(value)


_BASE64_HEADER = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


def decode_header_value(value: str) -> str | None:
    """A header value as sent, or the text of its `=?base64?...?=` form (SEP-2243).

    A malformed encoded value (bad or non-canonical base64, bad UTF-8) gives None, so it never
    matches anything.
    """
    if not value.startswith("=?"):
        return value
    match = _BASE64_HEADER.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


MISSING_NAME_HINT = (
    "a server accepts a missing one with accept_missing_mcp_name (mcptasks serve "
    "--accept-missing-mcp-name); see Tested clients (how-to/clients-tested) in the mcptasks docs"
)
"""What the -32020 error of a missing `Mcp-Name` adds: the switch that accepts it."""


def check_routing_headers(
    method: str, task_id: str, headers: Mapping[str, str] | None, *, accept_missing_name: bool = False
) -> bool:
    """On HTTP, `Mcp-Method` must equal the method and `Mcp-Name` the task id (-32020 otherwise).

    `headers` is None on transports without headers (stdio, in-process), where nothing is checked.
    With `accept_missing_name`, a missing `Mcp-Name` passes (a mismatched one never does); the
    result says whether it was missing and accepted.
    """
    if headers is None:
        return False
    sent_method = _header(headers, "mcp-method")
    if sent_method is not None and sent_method.strip() != method:
        raise ProtocolError(
            HEADER_MISMATCH, f"Mcp-Method header {sent_method.strip()!r} does not match {method!r}"
        )
    sent_name = _header(headers, "mcp-name")
    if sent_name is None:
        if accept_missing_name:
            return True
        raise ProtocolError(
            HEADER_MISMATCH,
            f"{method} over HTTP needs an Mcp-Name header equal to params.taskId; {MISSING_NAME_HINT}",
        )
    if decode_header_value(sent_name.strip()) != task_id:
        raise ProtocolError(HEADER_MISMATCH, "Mcp-Name header does not match params.taskId")
    return False


MAX_WARNED_CLIENTS = 1000
"""How many clients `MissingNameWarnings` remembers; past it, warnings stop rather than repeat."""


class MissingNameWarnings:
    """One warning per client (its `clientInfo` name and version, else its User-Agent) whose
    `tasks/*` request over HTTP came without `Mcp-Name` and was accepted."""

    def __init__(self) -> None:
        self._warned: set[tuple[str, str]] = set()

    def accepted(self, method: str, meta: Mapping[str, Any] | None, headers: Mapping[str, str]) -> None:
        """Note an accepted request; warn when it is the first of its client."""
        client = _client_of(meta, headers)
        if client in self._warned or len(self._warned) >= MAX_WARNED_CLIENTS:
            return
        self._warned.add(client)
        kind, who = client
        logger.warning(
            "accepted %s without an Mcp-Name header from %s %s (accept_missing_mcp_name is on; "
            "logged once per client)",
            method,
            kind,
            who,
            extra={"event": "missing_mcp_name", "client": who},
        )


def _client_of(meta: Mapping[str, Any] | None, headers: Mapping[str, str]) -> tuple[str, str]:
    """("client", "name version") from the request's `clientInfo`, else ("User-Agent", value)."""
    info = meta.get(CLIENT_INFO_META) if isinstance(meta, Mapping) else None
    if isinstance(info, Mapping) and isinstance(info.get("name"), str):
        version = info.get("version")
        name = f"{info['name']} {version}" if isinstance(version, str) else str(info["name"])
        return "client", one_line(" ".join(name.split())[:200])  # the client's text: escaped
    agent = _header(headers, "user-agent")
    return "User-Agent", repr(agent[:200]) if agent is not None else "(none)"
