"""`Retry-After` on HTTP answers that refuse a request for rate or capacity.

A refusal that tells the client when to come back (a poll that came too fast, a create over the
active-task limits, a request the failing store could not serve) carries `retryAfterMs` in its
JSON-RPC error data. Over HTTP the answer also says it the HTTP way: `Retry-After` in whole
seconds, rounded up (RFC 9110 `delay-seconds`), so hosts and proxies that read only headers wait
as long. The status and body stay what the SDK writes.

The fast path adds the header where it builds its error answers (`mcptasks.server.lean_http`);
`RetryAfterHeader` adds it to the JSON answers the SDK writes. An answer the SDK has already
committed to an event stream (one slower than its SSE deferral window) keeps its headers.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_MARKER = b'"retryAfterMs"'


def retry_after_seconds(data: Any) -> int | None:
    """The `Retry-After` seconds for a JSON-RPC error's `data` (its `retryAfterMs` rounded up to
    whole seconds), or None when it has no usable `retryAfterMs`."""
    if not isinstance(data, dict):
        return None
    millis = data.get("retryAfterMs")
    if isinstance(millis, bool) or not isinstance(millis, (int, float)) or not millis >= 0:
        return None
    if math.isinf(millis):
        return None
    return math.ceil(millis / 1000)


def retry_after_of(body: bytes) -> int | None:
    """The `Retry-After` seconds for a JSON-RPC answer's bytes: those of its error's
    `retryAfterMs`; None for any other answer (read only when the bytes name `retryAfterMs`)."""
    if _MARKER not in body:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = message.get("error") if isinstance(message, dict) else None
    return retry_after_seconds(error.get("data")) if isinstance(error, dict) else None


def _is_json(start: Message) -> bool:
    for key, value in start.get("headers", ()):
        if key.lower() == b"content-type":
            return bool(value.lower().startswith(b"application/json"))
    return False


class RetryAfterHeader:
    """ASGI middleware adding `Retry-After` to JSON error answers with `retryAfterMs`
    (`app.add_middleware(RetryAfterHeader)`); every other answer passes unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; hold a JSON answer's start until its body is known."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        chunks: list[bytes] = []

        async def send_with_header(message: Message) -> None:
            nonlocal held
            kind = message["type"]
            if kind == "http.response.start" and _is_json(message):
                held = message
                return
            if held is None or kind != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            start, held = held, None
            seconds = retry_after_of(body)
            if seconds is not None:
                start = {**start, "headers": [*start.get("headers", ()), retry_after_header(seconds)]}
            await send(start)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, send_with_header)


def retry_after_header(seconds: int) -> tuple[bytes, bytes]:
    """The raw `Retry-After` header for `seconds`."""
    return (b"retry-after", str(seconds).encode())
