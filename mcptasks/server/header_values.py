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
_OWS_BYTES = frozenset(_OWS)


def _untrimmed(headers: list[tuple[bytes, bytes]]) -> bool:
    # A plain loop rather than any(<generator>): this runs for every request.
    for _, value in headers:  # noqa: SIM110
        if value and (value[0] in _OWS_BYTES or value[-1] in _OWS_BYTES):
            return True
    return False


class TrimmedHeaderValues:
    """Wraps an ASGI app (`app.add_middleware(TrimmedHeaderValues)`); see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with its header values trimmed (a new scope only when needed)."""
        if scope["type"] == "http" and _untrimmed(scope["headers"]):
            trimmed = [(key, value.strip(_OWS)) for key, value in scope["headers"]]
            scope = {**scope, "headers": trimmed}
        await self.app(scope, receive, send)
