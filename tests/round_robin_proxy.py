"""A tiny HTTP reverse proxy on 127.0.0.1 that sends each request to the next backend in turn.

Two `mcptasks serve` replicas behind it look like one server at one URL, and no two consecutive
requests reach the same replica: a client that creates a task and then polls it is answered by
the other replica every time. Responses are relayed as they arrive (SSE streams included).
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}
)
BACKEND_TIMEOUT = 60.0


class RoundRobinProxy(ThreadingHTTPServer):
    """Forwards every request to `backends` in rotation; counts what each backend served."""

    daemon_threads = True

    def __init__(self, backends: Sequence[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.backends = list(backends)
        self._next = itertools.cycle(range(len(self.backends)))
        self._lock = threading.Lock()
        self.served: Counter[tuple[int, str]] = Counter()
        """(backend index, `Mcp-Method` header) -> requests forwarded."""

    @property
    def url(self) -> str:
        """The MCP endpoint clients use."""
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"

    def pick(self, method: str) -> tuple[int, int]:
        """The next backend (index, port), counting the request against it."""
        with self._lock:
            index = next(self._next)
            self.served[(index, method)] += 1
        return index, self.backends[index]


class _Handler(BaseHTTPRequestHandler):
    server: RoundRobinProxy
    protocol_version = "HTTP/1.0"  # the response ends when the connection closes: no re-chunking

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads `served`, not a log."""

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        _, port = self.server.pick(self.headers.get("Mcp-Method", ""))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        backend = http.client.HTTPConnection("127.0.0.1", port, timeout=BACKEND_TIMEOUT)
        started = False
        try:
            backend.request(self.command, self.path, body=body, headers=headers)
            response = backend.getresponse()
            self.send_response(response.status, response.reason)
            started = True
            for key, value in response.getheaders():
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value)
            self.end_headers()
            while chunk := response.read1(65536):
                self.wfile.write(chunk)
                self.wfile.flush()
        except (OSError, http.client.HTTPException) as exc:
            if not started:  # once the status line is out, closing the connection is the only signal
                self.send_error(502, f"backend 127.0.0.1:{port}: {exc}")
        finally:
            backend.close()

    do_GET = do_POST = do_DELETE = _forward


@contextmanager
def round_robin(backends: Sequence[int]) -> Iterator[RoundRobinProxy]:
    """Serve a `RoundRobinProxy` over `backends` (ports on 127.0.0.1) in a thread."""
    proxy = RoundRobinProxy(backends)
    thread = threading.Thread(target=proxy.serve_forever, name="round-robin-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=30)
