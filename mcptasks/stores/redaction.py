"""`redact_url`: a store URL with its password hidden, for messages, logs and reprs.

Shared by the URL parser (`mcptasks.stores.url`), the Redis store and the command line, so a
password never reaches a log line or an error message, whichever of them shows the URL.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """`url` with any password replaced by `***` (for messages, logs and reprs)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port is not None else ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
    except ValueError:
        return "<unparsable URL>"
