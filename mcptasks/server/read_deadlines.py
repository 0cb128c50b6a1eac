"""`DeadlineProtocol`: uvicorn's HTTP/1.1 protocol, with deadlines on reading each request.

uvicorn closes a keep-alive connection that stays idle between requests, but nothing bounds a
request that arrives slowly: a client that sends a request line and then one header byte every
few seconds, or a `Content-Length` and then never the body, holds its connection (and a file
descriptor) for as long as it likes. Wrapped in a `DeadlineProtocol`, a connection is closed when

- the request head has not fully arrived `header_timeout` seconds after the connection opened (or
  after the first byte of a later request on it): answered `408 Request Timeout` if some of it
  came, closed silently if nothing did;
- the body has not fully arrived `body_timeout` seconds after the head (the app reading it sees
  the client disconnect).

Only reading the request is bounded. Once a request is read, its response may take as long as it
takes: SSE streams (`GET /mcp`, `subscriptions/listen`) stay open.

The wrapper follows the request through the wrapped protocol's `cycle` (uvicorn's h11 and
httptools protocols both keep the request being answered there, with `more_body` and
`response_complete`), so it needs no HTTP parser of its own. A connection the wrapped protocol
hands to another protocol (a WebSocket upgrade) keeps being counted, without deadlines.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, Protocol, cast

from mcptasks.server.connection_guard import ConnectionGuard


def _request_timeout_response() -> bytes:
    body = b"The request did not arrive in time.\n"
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
    )
    return head + body


REQUEST_TIMEOUT = _request_timeout_response()


class GuardedSettings(Protocol):
    """What a `DeadlineProtocol` needs of its uvicorn config (a `GuardedConfig`): the guard."""

    guard: ConnectionGuard


class DeadlineProtocol(asyncio.Protocol):
    """One HTTP connection: uvicorn's protocol (`config.guard.inner_protocol`) inside, closed when
    a request does not arrive within the guard's deadlines; counted by the guard while open."""

    def __init__(
        self,
        config: GuardedSettings,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.guard = config.guard
        inner = self.guard.inner_protocol
        assert inner is not None, "GuardedConfig.load sets the protocol it wraps"
        self.inner: asyncio.Protocol = inner(
            config=config, server_state=server_state, app_state=app_state, _loop=_loop
        )
        self.loop = _loop or asyncio.get_event_loop()
        self.transport: asyncio.Transport | None = None
        self._request: Any = None
        """The wrapped protocol's `cycle` whose head was seen last."""
        self._waiting: Literal["head", "body"] | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._head_started = False
        self._switched = False
        self._counted = True
        self.guard.opened()

    # -- asyncio.Protocol, forwarded to the wrapped protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)
        self._expect("head")

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)
        if self._switched or self._follow_switch():
            return
        if self._waiting == "head":
            self._head_started = True
        self._track()

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        try:
            self.inner.connection_lost(exc)
        finally:
            self.release()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def release(self) -> None:
        """Stop counting this connection (once; also for one whose transport never started)."""
        if self._counted:
            self._counted = False
            self.guard.closed()

    # -- the deadlines

    def _track(self) -> None:
        """Arm or stop the deadline after the wrapped protocol read some bytes."""
        cycle: Any = getattr(self.inner, "cycle", None)
        if cycle is not self._request:  # a request head arrived
            self._request = cycle
            if cycle is not None and cycle.more_body and not cycle.response_complete:
                self._expect("body")
            else:
                self._stop()
        elif self._waiting == "body":
            if not cycle.more_body or cycle.response_complete:
                self._stop()
        elif self._waiting is None and (cycle is None or cycle.response_complete):
            self._expect("head")  # the first bytes of the next request on a kept-alive connection
            self._head_started = True

    def _expect(self, part: Literal["head", "body"]) -> None:
        self._stop()
        self._waiting = part
        self._head_started = False
        seconds = self.guard.header_timeout if part == "head" else self.guard.body_timeout
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _stop(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._waiting = None

    def _expired(self) -> None:
        part, self._waiting, self._deadline = self._waiting, None, None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if part == "head":
            self.guard.header_timeouts.note()
            if self._head_started and not transport.get_write_buffer_size():
                transport.write(REQUEST_TIMEOUT)
        else:
            self.guard.body_timeouts.note()
        if transport.get_write_buffer_size():
            transport.abort()  # a client that does not read would keep it open while it drains
        else:
            transport.close()

    def _follow_switch(self) -> bool:
        """After a protocol switch (a WebSocket upgrade), keep forwarding to the new protocol and
        counting the connection, with no deadlines (the switch happens only after a full head)."""
        transport = self.transport
        if transport is None or transport.get_protocol() is self:
            return False
        self._stop()
        self._switched = True
        self.inner = cast(asyncio.Protocol, transport.get_protocol())
        transport.set_protocol(self)
        return True
