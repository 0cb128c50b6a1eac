"""A tiny HTTP reverse proxy on 127.0.0.1 that puts two replicas behind one URL, crosswise.

Requests go to the replicas in turn, with one rule that makes "any replica answers any task"
certain rather than likely: a `tasks/get`, `tasks/update` or `tasks/cancel` for a task the proxy
saw created (a `CreateTaskResult` in a `tools/call` response) always goes to the replica that
did NOT create it. `crossed` and `uncrossed` count those requests per method. Responses are
relayed as they arrive (SSE streams included).
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}
)
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
BACKEND_TIMEOUT = 60.0


class RoundRobinProxy(ThreadingHTTPServer):
    """Forwards requests to two backends (see the module docstring); counts where tasks/* went."""

    daemon_threads = True

    def __init__(self, backends: Sequence[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        if len(backends) != 2:
            raise ValueError("the proxy crosses exactly two replicas")
        self.backends = list(backends)
        self._turn = itertools.cycle((0, 1))
        self._lock = threading.Lock()
        self._creator: dict[str, int] = {}
        self.crossed: Counter[str] = Counter()
        """tasks/* method -> requests answered by the replica that did not create the task."""
        self.uncrossed: Counter[str] = Counter()
        """tasks/* method -> requests for tasks the proxy did not see created (rotated normally)."""

    @property
    def url(self) -> str:
        """The MCP endpoint clients use."""
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"

    def route(self, method: str, task_id: str | None) -> int:
        """The backend index for a request."""
        with self._lock:
            if method in TASK_METHODS and task_id in self._creator:
                self.crossed[method] += 1
                return 1 - self._creator[task_id]
            if method in TASK_METHODS:
                self.uncrossed[method] += 1
            return next(self._turn)

    def created(self, index: int, body: bytes) -> None:
        """Remember which backend created the task a `tools/call` response describes, if any."""
        for message in _messages(body):
            result = message.get("result")
            if isinstance(result, dict) and result.get("resultType") == "task" and "taskId" in result:
                with self._lock:
                    self._creator[str(result["taskId"])] = index


def _messages(body: bytes) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of a JSON or SSE response body."""
    text = body.decode("utf-8", errors="replace")
    chunks = [text] if text.lstrip().startswith("{") else []
    chunks += [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    for chunk in chunks:
        try:
            message = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(message, dict):
            yield message


class _Handler(BaseHTTPRequestHandler):
    server: RoundRobinProxy
    protocol_version = "HTTP/1.0"  # the response ends when the connection closes: no re-chunking

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the counters, not a log."""

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        method = (self.headers.get("Mcp-Method") or "").strip()
        task_id = (self.headers.get("Mcp-Name") or "").strip() or None
        index = self.server.route(method, task_id)
        port = self.server.backends[index]
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        backend = http.client.HTTPConnection("127.0.0.1", port, timeout=BACKEND_TIMEOUT)
        started = False
        relayed = bytearray()  # a tools/call response so far
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
                if method == "tools/call":  # learn the creator before the client can ask about it
                    relayed += chunk
                    self.server.created(index, bytes(relayed))
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
    """Serve a `RoundRobinProxy` over two backends (ports on 127.0.0.1) in a thread."""
    proxy = RoundRobinProxy(backends)
    thread = threading.Thread(target=proxy.serve_forever, name="round-robin-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=30)
