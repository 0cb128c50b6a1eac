"""A raw `subscriptions/listen` client over Streamable HTTP, for wire-level push tests.

`ListenStream` POSTs one listen request with the 2026-07-28 headers and `_meta` envelope and
reads the SSE response frame by frame: JSON-RPC messages (`frames`) and comment lines
(`comments`, the keep-alives). Nothing here sleeps: reads block on the socket under a timeout.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from sdk_helpers import OPT_IN, PROTOCOL_VERSION, TIMEOUT, request_meta

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACK = "notifications/subscriptions/acknowledged"
TASKS = "notifications/tasks"

_ids = itertools.count(1000)


class ListenStream:
    """One open listen stream: `next()` returns the next JSON-RPC message on it."""

    def __init__(self, response: httpx2.Response, request_id: int) -> None:
        self.response = response
        self.request_id = request_id
        self.status = response.status_code
        self.frames: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = TIMEOUT) -> dict[str, Any]:  # noqa: ASYNC109
        """The next JSON-RPC message (comments are collected on the way)."""
        if self.response.headers.get("content-type", "").startswith("application/json"):
            with anyio.fail_after(timeout):
                message = dict(json.loads(await self.response.aread()))
            self.frames.append(message)
            return message
        data: list[str] = []
        with anyio.fail_after(timeout):
            async for line in self._lines:
                if line.startswith(":"):
                    self.comments.append(line)
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    message = dict(json.loads("\n".join(data)))
                    self.frames.append(message)
                    return message
        raise EOFError("the stream ended")

    async def next_comment(self, timeout: float = TIMEOUT) -> str:  # noqa: ASYNC109
        """Read until a comment line (a keep-alive) arrives; return it."""
        seen = len(self.comments)
        with anyio.fail_after(timeout):
            async for line in self._lines:
                if line.startswith(":"):
                    self.comments.append(line)
                    if len(self.comments) > seen:
                        return line
        raise EOFError("the stream ended")

    async def until_result(self) -> dict[str, Any]:
        """Read frames until the response to the listen request; return that response."""
        while True:
            frame = await self.next()
            if frame.get("id") == self.request_id:
                return frame


@asynccontextmanager
async def listen(
    url: str,
    notifications: Mapping[str, Any],
    *,
    capabilities: Mapping[str, Any] = OPT_IN,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[ListenStream]:
    """Open a `subscriptions/listen` stream; leaving the block closes it (the client's unsubscribe)."""
    request_id = next(_ids)
    payload = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "subscriptions/listen",
        "params": {"notifications": dict(notifications), "_meta": request_meta(capabilities)},
    }
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "subscriptions/listen",
        **dict(headers or {}),
    }
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(TIMEOUT, read=None)) as http,
        http.stream("POST", url, content=json.dumps(payload), headers=sent) as response,
    ):
        yield ListenStream(response, request_id)


def task_frames(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `notifications/tasks` params among `frames`."""
    return [frame["params"] for frame in frames if frame.get("method") == TASKS]


def without_meta(params: Mapping[str, Any]) -> dict[str, Any]:
    """Notification params without `_meta`, to compare with a `tasks/get` result."""
    return {k: v for k, v in params.items() if k != "_meta"}


def as_notification(task: Mapping[str, Any]) -> dict[str, Any]:
    """A `tasks/get` result as `notifications/tasks` params would carry it (no `resultType`, `_meta`)."""
    return {k: v for k, v in task.items() if k not in ("resultType", "_meta")}
