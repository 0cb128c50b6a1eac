"""The caller of an inline task tool call, reached through the SDK's request context.

`SessionPeer` is the SDK side of `mcptasks._runtime.inline_peer.InlinePeer`: progress goes out
with `ServerSession.report_progress` (a no-op when the request carried no `progressToken`), and on
a 2025-11-25 session a body's question goes to the client as the matching request, sent on the
call's own stream so it reaches the client over Streamable HTTP without a standalone stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel

__all__ = ["SessionPeer"]

_REQUESTS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


class SessionPeer:
    """The caller of one `tools/call`, as its SDK request context reaches it (`legacy`: a
    2025-11-25 session, which may be sent requests while the call runs)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], *, legacy: bool) -> None:
        self._ctx = ctx
        self._legacy = legacy
        self._sent = 0

    @property
    def session_capabilities(self) -> Mapping[str, Any] | None:
        """What the legacy session declared at initialize (wire form); None on newer sessions."""
        if not self._legacy:
            return None
        declared = self._ctx.session.client_capabilities
        return {} if declared is None else declared.model_dump(by_alias=True, exclude_none=True, mode="json")

    async def progress(self, message: str) -> None:
        """The next `notifications/progress` for this call (progress counts the statuses sent)."""
        self._sent += 1
        await self._ctx.session.report_progress(self._sent, None, message)

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send `method` to the client on this call's stream; its result in wire form."""
        kinds = _REQUESTS.get(method)
        if kinds is None:
            raise ValueError(f"{method} cannot be sent to a client during a call")
        request_type, result_type = kinds
        request: Any = request_type.model_validate({"method": method, "params": dict(params)})
        result = await self._ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id)
        )
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")
