"""What a body run inline can still reach of its caller: progress and, on older sessions, questions.

A call without the tasks extension runs its body to its result inside the request (see
`mcptasks._runtime.routes`). There is no task to carry a `statusMessage`, but the request may carry
a `progressToken`: each status the body yields is then sent as a `notifications/progress` message.
On a 2025-11-25 session the server may send requests to the client while it answers one, so a
question the session declared it can answer (elicitation, sampling, roots) goes to the client as
that request (`elicitation/create`, ...) instead of making the `yield` evaluate to `Unsupported`.
The host adapter says how to reach the caller (`InlinePeer`); this module stays free of the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from mcptasks._authoring.yields import InputRequest
from mcptasks._runtime.driver import InlineChannel
from mcptasks.errors import InvalidAnswer, ToolError

__all__ = ["InlinePeer", "PeerChannel"]

logger = logging.getLogger("mcptasks.engine")

MAX_ASKS = 3
"""How many times an inline question is sent when the client's answers do not fit it."""


class InlinePeer(Protocol):
    """The caller of a task tool run inline, as its host reaches it."""

    @property
    def session_capabilities(self) -> Mapping[str, Any] | None:
        """The client capabilities its session declared when requests to the client may be sent
        during the call (a 2025-11-25 session), in wire form; None when they may not."""
        ...

    async def progress(self, message: str) -> None:
        """Send `message` as the call's next progress notification (nothing when the request
        carried no `progressToken`)."""
        ...

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send the request `method` to the client and return its result in wire form."""
        ...


class PeerChannel(InlineChannel):
    """The channel of a body run inline for `peer`: statuses become progress notifications, and
    questions become requests to the client when `peer` may receive them (else they are refused
    as on any inline run). Wrap it in `gated` with the declared capabilities, so a question the
    client cannot answer evaluates to `Unsupported` and never reaches it."""

    def __init__(self, tool: str, peer: InlinePeer) -> None:
        super().__init__(tool)
        self.peer = peer
        self.asks = peer.session_capabilities is not None
        self._progress_failed = False

    async def set_status(self, message: str) -> None:
        """Send the status as progress. A failed send (the caller went away) is logged once and
        does not stop the body: the call's own end reports what happened to it."""
        if self._progress_failed:
            await super().set_status(message)
            return
        try:
            await self.peer.progress(message)
        except Exception as exc:
            self._progress_failed = True
            logger.info("progress for an inline call of %r could not be sent: %r", self.tool, exc)

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Send each request to the client in turn and return what the `yield`s evaluate to. An
        answer that does not fit is asked again with the reason, a few times at most."""
        if not self.asks:
            return await super().ask(requests)
        return [await self._answer(request) for request in requests]

    async def _answer(self, request: InputRequest) -> Any:
        for _ in range(MAX_ASKS):
            try:
                response = await self.peer.request(request.method, request.params)
            except Exception as exc:
                raise ToolError(
                    f"Tool {self.tool!r} asked the client ({request.method}) and got no answer: {exc}"
                ) from exc
            try:
                return request.parse(response)
            except InvalidAnswer as exc:
                reason = str(exc)
                request = request.retry_with(reason)
        raise ToolError(
            f"Tool {self.tool!r} asked the client ({request.method}) {MAX_ASKS} times and got no "
            f"valid answer: {reason}"
        )
