"""`subscriptions/listen` for task ids over stdio: a real `mcptasks serve` child, raw JSON-RPC lines.

On stdio the client unsubscribes with `notifications/cancelled` naming the listen request.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from processes import ROOT, clean_env
from push_helpers import ACK, SUBSCRIPTION_ID, TASKS
from sdk_helpers import OPT_IN, TIMEOUT, request_meta

from mcptasks.server.listen import CLOSE_REASON_META

pytestmark = pytest.mark.anyio


class Stdio:
    """JSON-RPC lines to and from a server's stdin/stdout; every frame read is kept in `seen`."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.seen: list[dict[str, Any]] = []
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        params = {**params, "_meta": request_meta(OPT_IN)}
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    async def next(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        with anyio.fail_after(TIMEOUT):
            while b"\n" not in self._buffer:
                self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = dict(json.loads(line))
        self.seen.append(message)
        return message

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """Read until the response to `request_id`."""
        while True:
            message = await self.next()
            if message.get("id") == request_id and "method" not in message:
                return message


async def test_listen_over_stdio_pushes_and_notifications_cancelled_unsubscribes() -> None:
    command = [sys.executable, "-m", "mcptasks", "serve", "tests/replica_app.py"]
    async with await anyio.open_process(command, cwd=ROOT, env=clean_env()) as process:
        rpc = Stdio(process)
        try:
            await rpc.request(1, "tools/call", {"name": "work", "arguments": {"seconds": 600}})
            first = (await rpc.answer(1))["result"]["taskId"]
            await rpc.request(2, "tools/call", {"name": "work", "arguments": {"seconds": 600}})
            second = (await rpc.answer(2))["result"]["taskId"]

            # a stream for the first task; cancelling the task pushes its end and closes the stream
            await rpc.request("listen-a", "subscriptions/listen", {"notifications": {"taskIds": [first]}})
            ack = await rpc.next()
            assert ack["method"] == ACK
            assert ack["params"]["notifications"] == {"taskIds": [first]}
            assert ack["params"]["_meta"][SUBSCRIPTION_ID] == "listen-a"
            state = await rpc.next()
            assert state["method"] == TASKS and state["params"]["taskId"] == first
            await rpc.request(3, "tasks/cancel", {"taskId": first})
            pushed = []
            while True:
                frame = await rpc.next()
                if frame.get("id") == "listen-a":
                    closing = frame
                    break
                if frame.get("method") == TASKS:
                    pushed.append(frame["params"])
            assert pushed[-1]["status"] == "cancelled"
            assert closing["result"]["_meta"] == {SUBSCRIPTION_ID: "listen-a", CLOSE_REASON_META: "done"}

            # a stream for the second task, ended by the client with notifications/cancelled
            await rpc.request("listen-b", "subscriptions/listen", {"notifications": {"taskIds": [second]}})
            assert (await rpc.next())["method"] == ACK
            assert (await rpc.next())["params"]["taskId"] == second
            await rpc.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "listen-b"}}
            )
            cancelled_at = len(rpc.seen)
            await rpc.request(4, "tasks/cancel", {"taskId": second})
            await rpc.answer(4)
            # a third stream proves the server kept going; nothing more came on the cancelled one
            await rpc.request("listen-c", "subscriptions/listen", {"notifications": {"taskIds": [second]}})
            assert (await rpc.answer("listen-c"))["result"]["_meta"][SUBSCRIPTION_ID] == "listen-c"
            later = rpc.seen[cancelled_at:]
            assert not [
                f
                for f in later
                if (f.get("params") or {}).get("_meta", {}).get(SUBSCRIPTION_ID) == "listen-b"
            ]
            assert not [f for f in later if f.get("id") == "listen-b"]
            for frame in rpc.seen:
                assert frame.get("method") not in ("notifications/progress", "notifications/message")
        finally:
            process.terminate()
