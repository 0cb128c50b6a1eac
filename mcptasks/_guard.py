"""Request guards of the HTTP surfaces beside the MCP endpoint (the dashboard, the metrics
endpoint): the Host and Origin check against DNS rebinding (every route), and the operator login
that protects reading when the dashboard is reachable beyond loopback.

The Host and Origin rules follow the MCP SDK's transport security (an allowed host is an exact
`Host` value or `name:*` for any port); a refused Host gets 421, a refused Origin 403, each with a
plain-text body saying what to configure.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ANY_HOST",
    "LOOPBACK_HOSTS",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "HostGuard",
    "bearer_token",
    "host_matches",
    "hosts_for",
    "token_matches",
]

ANY_HOST = "*"
"""An allowed-hosts entry that turns the Host check off (Origin is still checked)."""

LOOPBACK_HOSTS: tuple[str, ...] = (
    "127.0.0.1",
    "127.0.0.1:*",
    "localhost",
    "localhost:*",
    "[::1]",
    "[::1]:*",
)
"""The `Host` values a dashboard (or metrics endpoint) answers to by default: this machine's names, on any port."""

SESSION_COOKIE = "mcptasks_dashboard"
"""The cookie the login sets (HttpOnly, SameSite=Strict); its value is a random session id
(`mcptasks.dashboard.login.Sessions`), never the token."""

SESSION_SECONDS = 12 * 3600
"""How long a login lasts."""

_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def _normal(value: str) -> str:
    return value.strip().lower()


def host_matches(value: str, allowed: Iterable[str]) -> bool:
    """Whether `value` (a `Host` header or an `Origin`) is one of `allowed`: an exact entry, or an
    entry `name:*` with any numeric port after `name:` (case-insensitive)."""
    value = _normal(value)
    for entry in allowed:
        entry = _normal(entry)
        if value == entry:
            return True
        if entry.endswith(":*"):
            prefix = entry[:-1]
            port = value[len(prefix) :]
            if value.startswith(prefix) and port.isascii() and port.isdigit():
                return True
    return False


def hosts_for(listen_host: str | None = None) -> list[str]:
    """The default allowed hosts: the loopback names, plus `listen_host` (with and without a
    port) when it is one concrete address or name rather than a wildcard such as 0.0.0.0."""
    hosts = list(LOOPBACK_HOSTS)
    name = _normal(listen_host or "").strip("[]")
    if name and name not in {"0.0.0.0", "::", "*"}:
        shown = f"[{name}]" if ":" in name else name
        for entry in (shown, f"{shown}:*"):
            if entry not in hosts:
                hosts.append(entry)
    return hosts


def _quoted(value: str) -> str:
    text = value if len(value) <= 100 else value[:100] + "..."
    return repr(text)


class HostGuard:
    """ASGI middleware answering 421 to a request whose `Host` is not allowed and 403 to one
    whose `Origin` is neither its own (http or https on the same Host) nor an allowed origin."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str],
        allowed_origins: Sequence[str] = (),
        name: str = "dashboard",
        setting: str = "mcptasks dashboard --allowed-host NAME, or dashboard_app(allowed_hosts=...)",
    ):
        self.app = app
        self.name = name
        """What the refusals call the app ("dashboard")."""
        self.setting = setting
        """Where the refusal of a Host says to allow it."""
        self.any_host = ANY_HOST in allowed_hosts
        self.allowed_hosts = tuple(h for h in allowed_hosts if h != ANY_HOST)
        self.allowed_origins = tuple(allowed_origins)

    def refusal(self, headers: Headers) -> PlainTextResponse | None:
        """The answer to a request these headers make unacceptable, or None to let it through."""
        host = headers.get("host", "")
        if not host.strip():
            return self._refuse(421, "Invalid Host header: the request has none.")
        if not self.any_host and not host_matches(host, self.allowed_hosts):
            return self._refuse(
                421,
                f"Invalid Host header: this {self.name} does not answer to {_quoted(host)}. "
                f"Allowed: {', '.join(self.allowed_hosts) or 'none'}. To reach it by that name, add it to "
                f"the allowed hosts ({self.setting}).",
            )
        origin = headers.get("origin")
        if origin is None:
            return None
        own = (f"http://{host}", f"https://{host}")
        if host_matches(origin, own) or host_matches(origin, self.allowed_origins):
            return None
        return self._refuse(
            403,
            f"Invalid Origin header: requests from {_quoted(origin)} are not allowed; the {self.name} "
            "answers only to its own pages (and the allowed origins it was given).",
        )

    @staticmethod
    def _refuse(status: int, message: str) -> PlainTextResponse:
        return PlainTextResponse(message + "\n", status_code=status, headers=_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = self.refusal(Headers(scope=scope))
            if refusal is not None:
                if scope["type"] == "http":
                    await refusal(scope, receive, send)
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
        await self.app(scope, receive, send)


def token_matches(given: str, token: str) -> bool:
    """Whether `given` is the operator token (constant-time)."""
    return hmac.compare_digest(given.encode(), token.encode())


def bearer_token(headers: Headers) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
