"""`mcptasks serve` against slow and exhausting clients: a request head or body that does not
arrive in time closes its connection, connections beyond the bound (or beyond the process's file
descriptors) wait instead of flooding the log, and responses such as listen streams are never cut.

Real `mcptasks serve` processes on 127.0.0.1, their open-file limit set with `setrlimit` where a
test needs it, raw sockets for the slow clients. Deadlines are shortened to fractions of a second;
every wait is bounded by a generous deadline and waits for an event, never a fixed delay.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio.to_thread
import httpx2
import pytest
from mcp import Client
from mcp.client.extension import advertise
from processes import ROOT, clean_env, free_port, serving_http
from push_helpers import listen
from sdk_helpers import PROTOCOL_VERSION, Tasks, request_meta

CONFORMANCE = str(ROOT / "examples" / "conformance_server.py")
EXTENSION_ID = "io.modelcontextprotocol/tasks"
DEADLINE = 60.0
"""Upper bound of every wait; never a synchronisation delay."""
HALF_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture(scope="module")
def quick_deadlines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A server whose request heads and bodies must arrive within half a second, with SSE
    keep-alives every 0.2 s; its port and log."""
    port, log = free_port(), tmp_path_factory.mktemp("deadlines") / "server.log"
    extra = ("--header-timeout", "0.5", "--body-timeout", "0.5")
    with serving_http(CONFORMANCE, port=port, log=log, extra=extra, env=clean_env(MCPTASKS_KEEPALIVE="0.2")):
        yield port, log


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sent on `sock` until it closed it (fails after `DEADLINE`)."""
    sock.settimeout(DEADLINE)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def log_with(log: Path, fragment: str) -> str:
    """The server's log, once it holds `fragment`."""
    until = time.monotonic() + DEADLINE
    while fragment not in (text := log.read_text(errors="replace")):
        assert time.monotonic() < until, f"no {fragment!r} in the log:\n{text}"
        time.sleep(0.05)
    return text


def half_open(port: int, count: int, stack: ExitStack) -> list[socket.socket]:
    """`count` connections that sent a request line and one header, and never the rest."""
    held = []
    for _ in range(count):
        sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=DEADLINE))
        sock.sendall(HALF_HEAD)
        held.append(sock)
    return held


def tools_list(port: int) -> list[str]:
    """A legitimate `tools/list` on a new connection: the tool names (waits up to `DEADLINE`)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": request_meta({})}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/list",
    }
    response = httpx2.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers, timeout=DEADLINE)
    assert response.status_code == 200, response.text
    return [tool["name"] for tool in json.loads(response.text)["result"]["tools"]]


# -- read deadlines ------------------------------------------------------------------------------


def test_a_half_sent_request_head_is_answered_408_and_closed(quick_deadlines: tuple[int, Path]) -> None:
    port, log = quick_deadlines
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(HALF_HEAD)
        answer = until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    log_with(log, "whose request head did not arrive within 0.5 s (header_timeout)")


def test_a_connection_that_sends_nothing_is_closed(quick_deadlines: tuple[int, Path]) -> None:
    port, _ = quick_deadlines
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        assert until_closed(sock) == b""


def test_a_half_sent_body_is_closed(quick_deadlines: tuple[int, Path]) -> None:
    port, log = quick_deadlines
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(head.encode() + b'{"jsonrpc": "2.0", ')
        until_closed(sock)
    log_with(log, "whose request body did not arrive within 0.5 s (body_timeout)")


@pytest.mark.anyio
async def test_a_listen_stream_stays_open_past_the_read_deadlines(quick_deadlines: tuple[int, Path]) -> None:
    port, _ = quick_deadlines
    url = f"http://127.0.0.1:{port}/mcp"
    async with Client(url, extensions=[advertise(EXTENSION_ID)]) as client:
        tasks = Tasks(client)
        task_id = (await tasks.start("slow_compute", {"seconds": 120}))["taskId"]
        try:
            async with listen(url, {"taskIds": [task_id]}) as stream:
                await stream.next_comment()  # the stream is open
                # a connection opened after the stream is closed by its header deadline: the
                # stream has now been open for longer than that
                with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as idle:
                    await anyio.to_thread.run_sync(until_closed, idle)
                await stream.next_comment()
                await stream.next_comment()
        finally:
            await tasks.cancel(task_id)


# -- bounds on connections -----------------------------------------------------------------------


@contextmanager
def besieged(tmp_path: Path, extra: tuple[str, ...], *, connections: int) -> Iterator[tuple[int, Path, int]]:
    """A server limited to 128 open files, once `connections` half-open connections reached it:
    its port, its log and the log's line count before they came."""
    port, log = free_port(), tmp_path / "server.log"
    with serving_http(CONFORMANCE, port=port, log=log, extra=extra, open_files=128), ExitStack() as stack:
        before = log.read_text().count("\n")
        half_open(port, connections, stack)
        yield port, log, before


def test_more_half_open_connections_than_file_descriptors(tmp_path: Path) -> None:
    """The bound is above the open-file limit: accepting runs out of descriptors, says so in a line
    per interval (not a traceback per attempt), and resumes once the deadlines free some."""
    extra = ("--header-timeout", "2", "--max-connections", "10000")
    with besieged(tmp_path, extra, connections=200) as (port, log, before):
        log_with(log, "cannot accept connections")
        assert "slow_compute" in tools_list(port)
        text = log.read_text()
    assert "Traceback" not in text, text
    assert "out of system resource" not in text, text
    grown = text.count("\n") - before
    assert grown <= 6, text


def test_connections_beyond_the_bound_wait_for_a_free_one(tmp_path: Path) -> None:
    """The default bound, three quarters of the open-file limit (96 of 128): connections beyond
    it wait in the listen backlog and are served once the deadlines close the half-open ones; the
    process never runs out of descriptors."""
    with besieged(tmp_path, ("--header-timeout", "2"), connections=150) as (port, log, _):
        log_with(log, "connection bound reached 1 time(s): 96 connections open (max_connections)")
        assert "slow_compute" in tools_list(port)
        text = log.read_text()
    assert "cannot accept" not in text, text
    assert "Traceback" not in text, text
