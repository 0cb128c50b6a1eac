"""Whitespace around a header value is not part of it (RFC 9110 §5.5), whichever HTTP parser
uvicorn uses: h11 trims it, httptools does not, and the app trims it itself
(`mcptasks.server.header_values`)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import anyio
import pytest
from sdk_helpers import HARNESS, TIMEOUT, HostApp, request_meta, serve_http

from mcptasks.wire import PROTOCOL_VERSION

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """uvicorn runs on asyncio."""
    return "asyncio"


async def _raw_post(url: str, body: bytes, headers: list[tuple[str, str]]) -> tuple[int, bytes]:
    """POST with the header lines written exactly as given (an HTTP library would refuse the
    whitespace); the status and the body of the answer."""
    parts = urlsplit(url)
    head = f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{name}:{value}\r\n" for name, value in headers) + "Connection: close\r\n\r\n"
    async with await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80) as stream:
        await stream.send(head.encode() + body)
        answer = b""
        while True:
            try:
                answer += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("parser", ["h11", "httptools"])
@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_routing_headers_with_whitespace_around_their_values_are_accepted(
    parser: str, fast_path: bool
) -> None:
    host = HostApp()
    app = host.app.streamable_http_app(fast_path=fast_path)
    params = {"name": "quick", "arguments": {"n": 2}, "_meta": request_meta(HARNESS)}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = [
        ("Content-Type", " application/json"),
        ("Accept", "\tapplication/json, text/event-stream "),
        ("MCP-Protocol-Version", f"  {PROTOCOL_VERSION}  "),
        ("Mcp-Method", " tools/call\t"),
        ("Mcp-Name", "   quick  "),
    ]
    async with serve_http(app, http=parser) as url:
        with anyio.fail_after(TIMEOUT):
            status, answer = await _raw_post(url, body, headers)
    assert status == 200, answer
    result = json.loads(answer)["result"]
    assert result["resultType"] == "task", result
    if fast_path:
        assert app.state.tasks_fast_path.tool_calls == 1
