"""The lean listen path (`mcptasks.server.listen_path`) over real Streamable HTTP on 127.0.0.1.

A task-only listen is served below the SDK with the SDK path's bytes and rules: each exchange here
is sent as raw bytes to a server with the lean path (the default) and to one without it
(`fast_path=False`), and the two answers must be the same bytes (timestamps, dates and task ids
aside). Owner scoping, the limits, keep-alives, slow clients and unsubscribing are checked on the
lean path itself.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from push_helpers import ACK, TASKS, listen
from sdk_helpers import OPT_IN, TIMEOUT, HostApp, RawClient, poll, request_meta, serve_http
from starlette.types import ASGIApp, Receive, Scope, Send

from mcptasks import Limits, Result
from mcptasks.server.listen import CLOSE_REASON_META

pytestmark = pytest.mark.anyio

Exchange = Callable[[int, dict[str, str]], Awaitable[bytes]]


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


def _listen_body(task_ids: Any, *, request_id: Any = 7, capabilities: Any = OPT_IN, **extra: Any) -> bytes:
    params = {"notifications": {"taskIds": task_ids, **extra}, "_meta": request_meta(capabilities)}
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}
    ).encode()


def _head(port: int, body: bytes, headers: dict[str, str | None]) -> bytes:
    sent: dict[str, str | None] = {
        "Host": f"127.0.0.1:{port}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    sent.update(headers)
    lines = [f"{k}: {v}" for k, v in sent.items() if v is not None]
    lines.append(f"Content-Length: {len(body)}")
    return ("POST /mcp HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n").encode()


async def raw_exchange(
    port: int, body: bytes, headers: dict[str, str | None] | None = None, *, read_for: float = 0.4
) -> bytes:
    """Everything the server writes back within `read_for` seconds (or until it closes)."""
    stream = await anyio.connect_tcp("127.0.0.1", port)
    async with stream:
        await stream.send(_head(port, body, headers or {}) + body)
        received = b""
        with anyio.move_on_after(read_for):
            while True:
                try:
                    received += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
    return received


def _normalised(answer: bytes, ids: dict[str, str]) -> bytes:
    answer = re.sub(rb"date: [^\r]*", b"date: -", answer)
    answer = re.sub(rb"mcp-session-id: [^\r]*", b"mcp-session-id: -", answer)
    answer = re.sub(rb'"(createdAt|lastUpdatedAt)":"[^"]*"', rb'"\1":"-"', answer)
    for real, name in ids.items():
        answer = answer.replace(real.encode(), name.encode())
    return answer


@asynccontextmanager
async def both_paths(**options: Any) -> AsyncIterator[list[tuple[HostApp, str, RawClient]]]:
    """Two servers of the same app: with the lean path, and without it (the SDK's)."""
    lean, sdk = HostApp(**options), HostApp(**options)
    async with (
        serve_http(lean.app.streamable_http_app()) as lean_url,
        serve_http(sdk.app.streamable_http_app(fast_path=False)) as sdk_url,
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
    ):
        yield [(lean, lean_url, RawClient(http, lean_url)), (sdk, sdk_url, RawClient(http, sdk_url))]


async def start(raw: RawClient, tool: str, arguments: dict[str, Any]) -> str:
    created = (await raw.call(tool, arguments)).result
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def test_task_only_listens_are_served_below_the_sdk_with_the_sdks_bytes() -> None:
    exchanges: list[tuple[Any, dict[str, str | None], float]] = [
        (lambda g, d: _listen_body([g]), {}, 0.4),  # ack, current state
        (lambda g, d: _listen_body([d]), {}, 0.4),  # ack, final state, closing response
        (lambda g, d: _listen_body(["no-such-task"], request_id="s-1"), {}, 0.4),  # nothing agreed
        (lambda g, d: _listen_body([g, "x", d, g], request_id="s-2"), {}, 0.4),
        (lambda g, d: _listen_body([g], toolsListChanged=False), {}, 0.4),  # core kinds off
        (lambda g, d: _listen_body([g], capabilities={}), {}, 0.4),  # -32021: the SDK answers
        (lambda g, d: _listen_body("nope"), {}, 0.4),  # -32602
        (lambda g, d: b'{"jsonrpc":"2.0","id":1,"method":', {}, 0.4),  # parse error
        (lambda g, d: _listen_body([g]), {"Host": "evil.example"}, 0.4),  # 421
        (lambda g, d: _listen_body([g]), {"Origin": "http://evil.example"}, 0.4),  # 403
        (lambda g, d: _listen_body([g]), {"Accept": "application/json"}, 0.4),  # 406
        (lambda g, d: _listen_body([g]), {"Mcp-Method": None}, 0.4),  # routing header missing
        (lambda g, d: _listen_body([g]), {"Mcp-Method": "tools/list"}, 0.4),  # mismatch
        (lambda g, d: _listen_body([g]), {"MCP-Protocol-Version": "2025-11-25"}, 0.4),
        (lambda g, d: _listen_body([g]), {"MCP-Protocol-Version": "2099-01-01"}, 0.4),
        (lambda g, d: _listen_body([g]), {"Mcp-Name": "x"}, 0.4),
        (lambda g, d: _listen_body([g], request_id=7.0), {}, 0.4),  # an id pydantic reads as 7
        (lambda g, d: _listen_body([g], request_id=None), {}, 0.4),
        (lambda g, d: _listen_body([g, *(f"{i:0100d}" for i in range(900))]), {}, 0.6),  # > 64 KB
        (lambda g, d: _listen_body([g], padding="x" * (4 * 1024 * 1024)), {}, 0.6),  # > 4 MiB: 413
    ]
    answers: list[list[bytes]] = []
    async with both_paths() as servers:
        for host, url, raw in servers:
            gated = await start(raw, "gated", {"label": "wire"})
            done = ""
            while done < gated:  # states go out in task id order: the same order on both servers
                done = await start(raw, "quick", {"n": 1})
            await raw.finish(done)
            ids = {gated: "GATED", done: "DONE"}
            answers.append(
                [
                    _normalised(
                        await raw_exchange(_port(url), make(gated, done), headers, read_for=wait), ids
                    )
                    for make, headers, wait in exchanges
                ]
            )
            host.release("wire")
        lean, sdk = answers
        for index, (ours, theirs) in enumerate(zip(lean, sdk, strict=True)):
            assert ours == theirs, f"exchange {index}:\n{ours!r}\n!=\n{theirs!r}"
        assert b"event: message" in lean[0] and b'"status":"completed"' in lean[1]
        assert b" 421 " in lean[8] and b" 403 " in lean[9] and b" 406 " in lean[10]
        assert b" 413 " in lean[-1]


async def test_the_lean_path_holds_the_stream_and_the_sdk_path_does_not() -> None:
    async with both_paths() as servers:
        for host, url, raw in servers:
            task_id = await start(raw, "gated", {"label": "where"})
            hub = host.app.extension.listen_hub
            assert hub is not None
            async with listen(url, {"taskIds": [task_id]}) as stream:
                assert (await stream.next())["method"] == ACK
                assert (await stream.next())["method"] == TASKS
                lean = host is servers[0][0]
                assert hub.open_streams == (1 if lean else 0)
            push = host.app.extension.push
            assert push is not None
            await poll(lambda: _open(push), lambda count: count == 0, what="the stream's release")  # noqa: B023
            assert not push.feed.watching(task_id)
            assert hub.open_streams == 0
            host.release("where")


async def _open(push: Any) -> int:
    return int(push.open_streams)


class _AsUser:
    """An outer ASGI layer that authenticates the request as `X-Test-User` (the auth context the
    SDK's auth middleware would set), so owner scoping runs on the lean path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = dict(scope.get("headers", ())).get(b"x-test-user") if scope["type"] == "http" else None
        if user is None:
            await self.app(scope, receive, send)
            return
        name = user.decode()
        token = AccessToken(token=name, client_id=f"{name}-client", scopes=[], subject=name)
        reset = auth_context_var.set(AuthenticatedUser(token))
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)


async def test_a_listener_gets_only_its_own_tasks() -> None:
    host = HostApp()
    hub = host.app.extension.listen_hub
    assert hub is not None
    async with (
        serve_http(_AsUser(host.app.streamable_http_app())) as url,
        httpx2.AsyncClient(timeout=TIMEOUT, headers={"X-Test-User": "alice"}) as alice_http,
    ):
        alice = RawClient(alice_http, url)
        task_id = await start(alice, "gated", {"label": "alice's"})
        async with listen(url, {"taskIds": [task_id]}, headers={"X-Test-User": "bob"}) as stream:
            ack = await stream.next()
            assert ack["params"]["notifications"]["taskIds"] == []
            closing = await stream.until_result()
            assert closing["result"]["_meta"][CLOSE_REASON_META] == "done"
            assert not [frame for frame in stream.frames if frame.get("method") == TASKS]
        async with listen(url, {"taskIds": [task_id]}, headers={"X-Test-User": "alice"}) as stream:
            assert (await stream.next())["params"]["notifications"]["taskIds"] == [task_id]
            assert (await stream.next())["params"]["taskId"] == task_id
            assert hub.open_streams == 1  # served by the lean path
        host.release("alice's")


async def test_refusals_at_the_limits_are_the_sdk_paths() -> None:
    refusals: list[bytes] = []
    async with both_paths(limits=Limits(max_listen_streams=1)) as servers:
        for host, url, raw in servers:
            task_id = await start(raw, "gated", {"label": "limit"})
            async with listen(url, {"taskIds": [task_id]}) as held:
                assert (await held.next())["method"] == ACK
                answer = await raw_exchange(_port(url), _listen_body([task_id]))
                refusals.append(_normalised(answer, {task_id: "TASK"}))
            host.release("limit")
    lean, sdk = refusals
    assert lean == sdk
    assert b"Subscription limit reached: server limit of 1 task listen streams reached; retry later" in lean


async def test_keepalive_comments_while_quiet() -> None:
    host = HostApp(keepalive=0.2)
    hub = host.app.extension.listen_hub
    assert hub is not None
    try:
        async with (
            serve_http(host.app.streamable_http_app()) as url,
            httpx2.AsyncClient(timeout=TIMEOUT) as http,
        ):
            task_id = await start(RawClient(http, url), "gated", {"label": "quiet"})
            async with listen(url, {"taskIds": [task_id]}) as stream:
                await stream.next()
                await stream.next()
                assert hub.open_streams == 1
                started = anyio.current_time()
                assert await stream.next_comment() == ": ping"
                assert await stream.next_comment() == ": ping"
                assert anyio.current_time() - started >= 0.3
            host.release("quiet")
    finally:
        from mcptasks.server.listen import SDK_SSE_KEEPALIVE, set_sse_keepalive

        set_sse_keepalive(SDK_SSE_KEEPALIVE)


async def test_a_client_that_stops_reading_is_dropped_and_holds_up_nobody() -> None:
    host = HostApp(limits=Limits(max_status_length=400_000))
    push = host.app.extension.push
    assert push is not None
    push.stall_timeout = 0.5
    go, release = anyio.Event(), anyio.Event()
    rounds = 100

    @host.app.task_tool(poll_interval=0.05)
    async def loud():
        """Once the test says go, set a 300 KB status `rounds` times; then wait for the test."""
        yield "ready"
        await go.wait()
        for index in range(rounds):
            yield f"{index} " + "x" * 300_000
            await anyio.sleep(0.01)
        await release.wait()
        yield Result("done")

    async with serve_http(host.app.streamable_http_app()) as url, httpx2.AsyncClient(timeout=TIMEOUT) as http:
        task_id = await start(RawClient(http, url), "loud", {})
        # a client that never reads, with a small receive buffer (the kernel's would hold megabytes)
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", _port(url)))
        body = _listen_body([task_id])
        stalled.sendall(_head(_port(url), body, {}) + body)
        with stalled:
            await _stalled_and_read(url, push, task_id, go, release, rounds)
        await poll(lambda: _open(push), lambda count: count == 0, what="every stream's release")


async def _stalled_and_read(
    url: str, push: Any, task_id: str, go: anyio.Event, release: anyio.Event, rounds: int
) -> None:
    """With the stalled stream open: a reading listener gets every newest state, the stalled
    stream is dropped (its slot given back), and the reader's stream closes normally."""
    async with listen(url, {"taskIds": [task_id]}) as reader:
        assert (await reader.next())["method"] == ACK
        await poll(lambda: _open(push), lambda count: count == 2, what="both streams")
        go.set()
        last = ""
        while not last.startswith(f"{rounds - 1} "):  # every newest state reaches the reader
            frame = await reader.next()
            if frame.get("method") == TASKS:
                last = frame["params"].get("statusMessage", "")
        # the stalled stream was dropped (its slot given back), the reader's is still open
        await poll(lambda: _open(push), lambda count: count == 1, what="the stalled stream's drop")
        release.set()
        closing = await reader.until_result()
        assert closing["result"]["_meta"][CLOSE_REASON_META] == "done"
