"""The configured webhook endpoints and secret, checked at start, and the destination check.

`endpoints(urls, secret, allow_private)` turns the configured URLs into `Endpoint`s, raising a
`ValueError` that names the flag and the environment variable for a bad URL or secret. A
destination is checked on the address that is connected to (`destination`): the host name is
resolved, every address must be globally routable unless private ones are allowed, and the
request then goes to that very address (the name stays in `Host` and TLS SNI), so a DNS answer
that changes between the check and the connection (rebinding) cannot reach a private address.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import anyio

from mcptasks.errors import MCPTasksError

URL_SETTING = "--webhook / MCPTASKS_WEBHOOKS"
SECRET_SETTING = "--webhook-secret / MCPTASKS_WEBHOOK_SECRET"
ALLOW_SETTING = "--webhook-allow-private / MCPTASKS_WEBHOOK_ALLOW_PRIVATE"

FAILURE_REASONS: tuple[str, ...] = (
    "connection_refused",
    "timeout",
    "tls_error",
    "refused_address",
    "http_3xx",
    "http_4xx",
    "http_5xx",
    "other",
)
"""The `reason` label values of failed attempts (the categories of the MCP events proposal,
plus a refused destination, a redirect and anything else)."""

SECRET_PREFIX = "whsec_"
SECRET_BYTES = (24, 64)
"""The length bounds (bytes) of a decoded secret, as the Standard Webhooks spec recommends."""


@dataclass(frozen=True)
class Endpoint:
    """One configured webhook endpoint."""

    url: str
    key: str
    """A short digest of the URL, what outbox entries name it by (the URL itself may hold a token)."""
    shown: str
    """The URL without user info and query, for logs and the start-up block."""


class RefusedAddress(MCPTasksError):
    """A webhook destination resolves to an address that is not globally routable."""


def endpoints(
    urls: Sequence[str], secret: str | None, allow_private: bool, *, complete: bool = True
) -> list[Endpoint]:
    """The `Endpoint`s of `urls`; `ValueError` naming the setting for a bad URL or secret, and
    (`complete`: the settings are final) a missing secret or a literal private address while
    private ones are refused. `EngineConfig` checks each field alone (`complete=False`): the
    environment and the flags may each bring a part."""
    found: list[Endpoint] = []
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{URL_SETTING}: {shown_url(url)!r} is not an http:// or https:// URL")
        if parts.fragment:
            raise ValueError(f"{URL_SETTING}: {shown_url(url)!r} has a #fragment, which is never sent")
        try:
            parts.port  # noqa: B018 - raises for a port out of range
        except ValueError:
            raise ValueError(f"{URL_SETTING}: {shown_url(url)!r} has an invalid port") from None
        literal = _literal(parts.hostname)
        if complete and literal is not None and not allow_private and not is_global(literal):
            raise ValueError(
                f"{URL_SETTING}: {shown_url(url)!r} is a private, loopback or link-local address; "
                f"allow such destinations with {ALLOW_SETTING}"
            )
        digest = hashlib.sha256(url.strip().encode()).hexdigest()[:16]
        if all(e.key != digest for e in found):
            found.append(Endpoint(url.strip(), digest, shown_url(url)))
    if (found and complete) or secret is not None:
        check_secret(secret)
    return found


def check_secret(secret: str | None) -> bytes:
    """The key of a `whsec_...` secret; `ValueError` naming the setting when it is missing or bad."""
    if not secret:
        raise ValueError(f"{URL_SETTING} needs a signing secret: set {SECRET_SETTING} (whsec_ and base64)")
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(
            f"{SECRET_SETTING}: the secret must start with {SECRET_PREFIX!r} (Standard Webhooks)"
        )
    body = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{SECRET_SETTING}: the part after {SECRET_PREFIX!r} is not base64") from None
    low, high = SECRET_BYTES
    if not low <= len(key) <= high:
        raise ValueError(f"{SECRET_SETTING}: the secret must decode to {low} to {high} bytes, not {len(key)}")
    return key


def shown_url(url: str) -> str:
    """`url` without user info, query and fragment (they may hold credentials)."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def is_global(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `address` is globally routable (not private, loopback, link-local, shared,
    reserved, multicast, unspecified, ...; an IPv4-mapped IPv6 address is judged as IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


async def destination(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to for `host`: its first resolved address, every one of which must
    be global unless `allow_private`; `RefusedAddress` otherwise, `OSError` when it does not
    resolve."""
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
        if not addresses:
            raise OSError(f"{host} has no address")
    if not allow_private:
        refused = [str(a) for a in addresses if not is_global(a)]
        if refused:
            raise RefusedAddress(
                f"{host} resolves to {', '.join(refused)}, which is not a globally routable address "
                f"(allow it with {ALLOW_SETTING})"
            )
    return str(addresses[0])
