"""ASGI middleware that trims whitespace around request header values, as RFC 9110 requires.

A field value excludes the optional whitespace (spaces and tabs) around it (RFC 9110 §5.5), so
`Mcp-Name:   greet  ` names the tool `greet`. uvicorn's pure-Python parser (h11) trims it; its
httptools parser, which uvicorn prefers when it is installed, passes it on, and the SDK then finds
that the routing header does not match the body. This middleware trims every header value the way
h11 does, so both parsers present the same request to the app.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

_OWS = b" \t"


def _untrimmed(value: bytes) -> bool:
    return value[:1] in (b" ", b"\t") or value[-1:] in (b" ", b"\t")


class TrimmedHeaderValues:
    """Wraps an ASGI app (`app.add_middleware(TrimmedHeaderValues)`); see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its header values trimmed (a new scope only when needed)."""
        if scope["type"] == "http" and any(_untrimmed(value) for _, value in scope["headers"]):
            trimmed = [(key, value.strip(_OWS)) for key, value in scope["headers"]]
            scope = {**scope, "headers": trimmed}
        await self.app(scope, receive, send)
