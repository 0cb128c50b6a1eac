"""A small webhook receiver for mcptasks task events: verifies each signature, prints each event.

Run it (the secret is the one `mcptasks serve --webhook-secret` signs with):

    export MCPTASKS_WEBHOOK_SECRET=whsec_...
    python examples/webhook_receiver.py --port 8787

and point a server at it (a loopback receiver needs --webhook-allow-private):

    mcptasks serve app.py --webhook http://127.0.0.1:8787/hooks --webhook-allow-private

Each verified event is printed as one JSON line on stdout: `{"id", "type", "timestamp", "data"}`.
A request whose signature does not verify (or whose timestamp is over five minutes away) gets 401;
an event seen before (same `webhook-id`: a retry, or a second replica) is answered 200 and not
printed again. The body carries the task id, which is a bearer secret: keep this receiver's
output where only operators can read it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MAX_BODY = 1 << 20
"""The largest body taken (bytes); a larger one gets 413, which mcptasks does not retry."""

REMEMBERED = 10_000
"""How many event ids are remembered to drop duplicates."""


class Events:
    """The verified events, printed once each (thread-safe)."""

    def __init__(self, secret: str, out: Any = sys.stdout) -> None:
        self.verifier = Webhook(secret)
        self.out = out
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()

    def take(self, body: bytes, headers: dict[str, str]) -> int:
        """The HTTP status for one request: 200 (taken, or a duplicate), 401 (not verified)."""
        try:
            event = self.verifier.verify(body, headers)
        except WebhookVerificationError:
            return 401
        event_id = headers["webhook-id"]
        with self.lock:
            if event_id in self.seen:
                return 200
            self.seen[event_id] = None
            if len(self.seen) > REMEMBERED:
                self.seen.popitem(last=False)
            line = {"id": event_id, **event}
            self.out.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.out.flush()
        return 200


def handler_for(events: Events) -> type[BaseHTTPRequestHandler]:
    """The request handler class of a receiver that feeds `events`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                self._answer(413)
                return
            body = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            self._answer(events.take(body, headers))

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: stdout carries the events only."""

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    options = parser.parse_args(argv)
    secret = os.environ.get("MCPTASKS_WEBHOOK_SECRET")
    if not secret:
        parser.error("set MCPTASKS_WEBHOOK_SECRET to the secret the server signs with (whsec_...)")
    server = ThreadingHTTPServer((options.host, options.port), handler_for(Events(secret)))
    print(f"receiving task events on http://{options.host}:{server.server_port}/", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
