"""A real webhook endpoint for tests: an HTTP server on 127.0.0.1 in a thread of its own.

It records every request (headers and raw body), verifies its Standard Webhooks signature with
the `standardwebhooks` package, and answers as the test says: a status per attempt of an event,
a redirect, or a hold (requests wait until the test releases them).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""The signing secret the tests configure (32 bytes in base64)."""

Answer = Callable[["Delivery"], "tuple[int, dict[str, str]]"]
"""What the endpoint answers to a request: a status and headers."""


@dataclass
class Delivery:
    """One request the endpoint received."""

    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    attempt: int
    """How many requests with this `webhook-id` came before this one, plus one."""

    @property
    def id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


def ok(_: Delivery) -> tuple[int, dict[str, str]]:
    return 200, {}


@dataclass
class Receiver:
    """The endpoint (use `receiving()`): `url` to configure, `deliveries` as they came."""

    answer: Answer = ok
    secret: str = SECRET
    deliveries: list[Delivery] = field(default_factory=list)
    hold: threading.Event = field(default_factory=threading.Event)
    """Cleared: requests wait (up to a minute) before they are answered."""
    port: int = 0
    sni: list[str | None] = field(default_factory=list)
    scheme: str = "http"

    def __post_init__(self) -> None:
        self.hold.set()
        self.lock = threading.Lock()
        self.verifier = Webhook(self.secret)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/hooks"

    def take(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str]]:
        try:
            self.verifier.verify(body, headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        with self.lock:
            seen = sum(1 for d in self.deliveries if d.id == headers.get("webhook-id"))
            delivery = Delivery(path, headers, body, verified, seen + 1)
            self.deliveries.append(delivery)
        self.hold.wait(60)
        return self.answer(delivery)

    def events(self) -> list[Delivery]:
        """The verified deliveries so far (a copy)."""
        with self.lock:
            return [d for d in self.deliveries if d.verified]

    def unique(self) -> dict[str, Delivery]:
        """The first verified delivery of each event id."""
        first: dict[str, Delivery] = {}
        for delivery in self.events():
            first.setdefault(delivery.id, delivery)
        return first


@contextmanager
def receiving(
    answer: Answer = ok, *, secret: str = SECRET, tls: ssl.SSLContext | None = None
) -> Iterator[Receiver]:
    """A `Receiver` listening on a free port of 127.0.0.1 until the block ends (over TLS with
    `tls`, a server context: the names clients ask for by SNI go to `receiver.sni`)."""
    receiver = Receiver(answer, secret)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            status, extra = receiver.take(self.path, headers, body)
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:

        def named(_: Any, name: str | None, __: Any) -> None:
            receiver.sni.append(name)

        tls.sni_callback = named
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    receiver.port = int(server.server_address[1])
    receiver.scheme = "https" if tls is not None else "http"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


async def arrive(check: Callable[[], Any], what: str, *, bound: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy; fail after `bound` seconds."""
    deadline = time.monotonic() + bound
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound} s waiting for {what}")
        await anyio.sleep(0.05)


def self_signed(directory: Path, name: str = "localhost") -> ssl.SSLContext:
    """A server TLS context with a certificate for `name` that no client trusts (made by openssl)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
