"""The limit server of `benchmarks/http.py`: a bare ASGI app that answers every JSON-RPC POST with
a `json.dumps`'d result, served by the same uvicorn as mcptasks. What one core can do with nothing
but HTTP parsing, one `json.loads` and one `json.dumps` per request.

    uvicorn benchmarks.limit_app:app --port 8001
"""

from __future__ import annotations

import json
from typing import Any

_HEADERS = [(b"content-type", b"application/json")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer a POST with `{"jsonrpc": "2.0", "id": <id>, "result": {...}}`; ignore lifespan."""
    if scope["type"] != "http":
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    request = json.loads(body)
    result = {
        "taskId": request.get("params", {}).get("taskId", "t"),
        "status": "completed",
        "resultType": "complete",
    }
    payload = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result}).encode()
    headers = [*_HEADERS, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
