"""ASGI middleware that makes one confusing Streamable HTTP error say what to do.

A request without `MCP-Protocol-Version` is taken for the 2025-11-25 protocol, which needs a
session, so a hand-written `tools/call` gets `400 Bad Request: Missing session ID`. The request
most likely meant the 2026-07-28 protocol (sessionless), whose requests carry the header. This
middleware adds that to the error message of such a response; nothing else changes.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcptasks.wire import PROTOCOL_VERSION

HINT = (
    f" (send the header 'MCP-Protocol-Version: {PROTOCOL_VERSION}' with every request for the "
    f"sessionless {PROTOCOL_VERSION} protocol, or start a 2025-11-25 session with 'initialize' first)"
)


def _has_header(scope: Scope, name: bytes) -> bool:
    return any(key.lower() == name for key, _ in scope.get("headers", ()))


def hinted(body: bytes) -> bytes | None:
    """`body` (a JSON-RPC error about a missing session) with the hint added, or None."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    if not isinstance(message, str) or "missing session id" not in message.lower():
        return None
    error["message"] = message + HINT
    return json.dumps(data, separators=(",", ":")).encode()


class ProtocolVersionHint:
    """Wraps an MCP Streamable HTTP ASGI app (`app.add_middleware(ProtocolVersionHint)`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; hold a 400 answer to a headerless request and add the hint."""
        if (
            scope["type"] != "http"
            or _has_header(scope, b"mcp-protocol-version")
            or _has_header(scope, b"mcp-session-id")
        ):
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        body = b""

        async def send_with_hint(message: Message) -> None:
            nonlocal held, body
            if message["type"] == "http.response.start" and message["status"] == 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            body += message.get("body", b"")
            if message.get("more_body", False):
                return
            new_body = hinted(body)
            if new_body is not None:
                headers = [(k, v) for k, v in held.get("headers", ()) if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(new_body)).encode()))
                held = {**held, "headers": headers}
                body = new_body
            await send(held)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, send_with_hint)
