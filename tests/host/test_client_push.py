"""`TasksClient` following tasks through `notifications/tasks` pushes, over real HTTP.

The server counts the `tasks/get` requests it answers (a middleware on its `MCPServer`), so a
test sees how many polls following a task cost with push and without it. A loopback TCP proxy
between client and server can cut every open connection, to show the client's recovery.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from mcp import Client
from mcp.client.extension import NotificationBinding
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from processes import clean_env
from sdk_helpers import TIMEOUT, poll, serve_http

from mcptasks import EngineConfig, Result, TaskServer
from mcptasks.client import DetailedTask, TaskPolicy, TasksClient, start_tool_call

pytestmark = pytest.mark.anyio


class CountingApp:
    """A `TaskServer` whose `slow` task changes status three times over `seconds`, whose
    `stepped` task does so at the test's pace (gates), and whose `gated` task waits for one gate."""

    def __init__(self, **options: Any) -> None:
        self.app = TaskServer("push-client-tests", config=EngineConfig(immediate_results=False, **options))
        self.methods: Counter[str] = Counter()
        self.gates: dict[str, anyio.Event] = {}

        async def count(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
            self.methods[ctx.method] += 1
            return await call_next(ctx)

        self.app.mcp.middleware.insert(0, count)  # outermost: it sees what push middleware serves

        @self.app.task_tool(poll_interval=1.0)
        async def slow(seconds: float) -> AsyncIterator[Any]:
            """Three statuses over `seconds`, then a result."""
            for step in (1, 2, 3):
                await anyio.sleep(seconds / 3)
                yield f"step {step} of 3"
            yield Result("slow done")

        @self.app.task_tool(poll_interval=1.0)
        async def stepped() -> AsyncIterator[Any]:
            """Three statuses, then a result: each once the client saw the state before it."""
            for step in (1, 2, 3):
                await self.gate(f"seen {step}").wait()
                yield f"step {step} of 3"
            await self.gate("seen 4").wait()
            yield Result("stepped done")

        # 1 s: a re-listen comes one interval after a cut, a quiet-stream check only ten later,
        # so a loaded machine cannot turn a slow push into an extra tasks/get
        @self.app.task_tool(poll_interval=1.0)
        async def gated(label: str) -> AsyncIterator[Any]:
            """Say it waits, wait for the test's gate, then finish."""
            yield f"{label}: waiting"
            await self.gate(label).wait()
            yield f"{label}: finishing"
            yield Result(f"{label} done")

    def gate(self, label: str) -> anyio.Event:
        return self.gates.setdefault(label, anyio.Event())


async def follow(app: CountingApp, url: str, *, push: bool) -> tuple[list[tuple[str, str | None]], str]:
    """Call `stepped` through `TasksClient`; the states it saw (status, statusMessage) and the text.

    The body makes its next change only once the client saw the state before it, so every state
    reaches the client on its own: the states seen do not depend on timing.
    """
    seen: list[tuple[str, str | None]] = []

    def on_status(task: DetailedTask) -> None:
        seen.append((task.status, task.status_message))
        app.gate(f"seen {len(seen)}").set()

    # pushed: the client may fall back to one tasks/get only after a whole TIMEOUT without a frame
    policy = TaskPolicy(min_poll_interval=TIMEOUT) if push else TaskPolicy()
    extension = TasksClient(policy, push=push, on_status=on_status)
    async with Client(url, extensions=[extension]) as client:
        result = await client.call_tool("stepped", {})
    block = result.content[0]
    assert block.type == "text"
    return seen, block.text


async def test_a_task_followed_by_push_costs_no_poll_and_one_listen_per_change() -> None:
    pushed, polled = CountingApp(), CountingApp()
    outcomes: dict[str, tuple[list[tuple[str, str | None]], str]] = {}
    async with (
        serve_http(pushed.app.streamable_http_app()) as push_url,
        serve_http(polled.app.streamable_http_app()) as poll_url,
    ):
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:

                async def run(name: str, app: CountingApp, url: str, push: bool) -> None:
                    outcomes[name] = await follow(app, url, push=push)

                group.start_soon(run, "push", pushed, push_url, True)
                group.start_soon(run, "poll", polled, poll_url, False)
    states = [
        ("working", None),  # from the creation result
        ("working", "step 1 of 3"),
        ("working", "step 2 of 3"),
        ("working", "step 3 of 3"),
        ("completed", "step 3 of 3"),  # the result keeps the last status message
    ]
    assert outcomes == {"push": (states, "stepped done"), "poll": (states, "stepped done")}
    # pushed: each of the four changes came on a listen stream of its own, none by tasks/get
    assert pushed.methods["tasks/get"] == 0, pushed.methods
    assert pushed.methods["subscriptions/listen"] == 4, pushed.methods
    # polled: each change needs a tasks/get that sees it (more if a poll comes before the write)
    assert polled.methods["tasks/get"] >= 4, polled.methods
    assert polled.methods["subscriptions/listen"] == 0, polled.methods


class CountingTasksClient(TasksClient):
    """A `TasksClient` that counts the `notifications/tasks` it receives."""

    def __init__(self) -> None:
        super().__init__()
        self.received = 0

    def notifications(self) -> list[NotificationBinding[Any]]:
        (binding,) = super().notifications()

        async def counted(params: Any) -> None:
            self.received += 1
            await binding.handler(params)

        return [NotificationBinding(method=binding.method, params_type=binding.params_type, handler=counted)]


class CuttingProxy:
    """Relays 127.0.0.1 TCP connections to a server; `cut()` closes the connections whose latest
    request was a `subscriptions/listen` (the client's other, pooled connections stay up). A side
    that closes its connection closes the other side's too, as without the proxy."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listening: dict[anyio.CancelScope, bool] = {}

    def cut(self) -> None:
        for scope, listening in tuple(self._listening.items()):
            if listening:
                scope.cancel()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[int]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)

        async def relay(
            source: SocketStream, sink: SocketStream, scope: anyio.CancelScope, requests: bool
        ) -> None:
            try:
                async for chunk in source:
                    if requests and b" HTTP/1.1\r\n" in chunk:  # a new request on this connection
                        self._listening[scope] = b"mcp-method: subscriptions/listen" in chunk.lower()
                    await sink.send(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass
            # one side closed (the client aborting a stream it no longer reads, or the server): close
            # the other too, as a direct connection would, so the server ends that stream
            scope.cancel()

        async def handle(client: SocketStream) -> None:
            with anyio.CancelScope() as scope:
                self._listening[scope] = False
                async with (
                    client,
                    await anyio.connect_tcp("127.0.0.1", self.target_port) as server,
                    anyio.create_task_group() as pair,
                ):
                    pair.start_soon(relay, client, server, scope, True)
                    pair.start_soon(relay, server, client, scope, False)
            self._listening.pop(scope, None)

        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, handle)
            try:
                yield port
            finally:
                group.cancel_scope.cancel()


async def test_a_cut_stream_is_caught_up_with_one_get_and_listened_again() -> None:
    app = CountingApp()
    async with serve_http(app.app.streamable_http_app()) as url:
        port = int(url.split(":")[2].split("/")[0])
        proxy = CuttingProxy(port)
        async with proxy.running() as proxy_port:
            proxied = f"http://127.0.0.1:{proxy_port}/mcp"
            with anyio.fail_after(TIMEOUT):
                extension = CountingTasksClient()
                async with Client(proxied, extensions=[extension]) as client:
                    handle = await start_tool_call(client, "gated", {"label": "cut"})
                    states: list[str | None] = []

                    async def cut_then_finish(listens: int, pushes: int) -> None:
                        # the client listens again for its next state: cut that stream once it is up,
                        # that is once it pushed the current state (counted from before it started: the
                        # push can come before this task looks)
                        await poll(lambda: _count(app, "subscriptions/listen"), lambda n: n > listens)
                        await poll(lambda: _received(extension), lambda n: n > pushes)
                        proxy.cut()
                        # change the task only once the client caught up and listens again
                        await poll(lambda: _count(app, "subscriptions/listen"), lambda n: n > listens + 1)
                        gets_after_cut.append(app.methods["tasks/get"])
                        app.gate("cut").set()

                    gets_after_cut: list[int] = []
                    async with anyio.create_task_group() as group, handle.watch() as updates:
                        async for task in updates:
                            states.append(task.status_message)
                            if task.status_message == "cut: waiting":
                                listens = app.methods["subscriptions/listen"]
                                group.start_soon(cut_then_finish, listens, extension.received)
    assert states[-1] == "cut: finishing"
    assert handle.last is not None and handle.last.status == "completed"
    assert gets_after_cut[0] >= 1  # caught up with tasks/get after the cut, before listening again
    assert app.methods["tasks/get"] == gets_after_cut[0]  # the final state came by push


async def test_a_server_that_stops_serving_streams_is_polled() -> None:
    app = CountingApp()
    push = app.app.extension.push
    assert push is not None
    async with serve_http(app.app.streamable_http_app()) as url:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, extensions=[TasksClient()]) as client:
                handle = await start_tool_call(client, "gated", {"label": "stop"})
                async with handle.watch() as updates:
                    async for task in updates:
                        if task.status_message == "stop: waiting" and not push.feed.watching("never"):
                            push.feed.close()  # every stream ends now, and new ones end at once
                            gets = app.methods["tasks/get"]
                            app.gate("stop").set()
    assert handle.last is not None and handle.last.status == "completed"
    assert app.methods["tasks/get"] > gets


async def test_a_server_without_push_is_polled() -> None:
    app = CountingApp(push=False)
    async with serve_http(app.app.streamable_http_app()) as url:
        with anyio.fail_after(TIMEOUT):
            async with Client(url, extensions=[TasksClient()]) as client:
                handle = await start_tool_call(client, "gated", {"label": "old"})
                app.gate("old").set()
                final = await handle.wait()
    assert final.status == "completed"
    assert 1 <= app.methods["subscriptions/listen"] <= 3  # silent streams: tried, then polled
    assert app.methods["tasks/get"] >= 1


async def _count(app: CountingApp, method: str) -> int:
    return app.methods[method]


async def _received(extension: CountingTasksClient) -> int:
    return extension.received


async def test_mcptasks_call_shows_each_pushed_state() -> None:
    app = CountingApp()
    command = "import sys; from mcptasks.cli.main import main; sys.exit(main(sys.argv[1:]))"
    async with serve_http(app.app.streamable_http_app()) as url:
        # three statuses 0.5 s apart: polling at pollIntervalMs 1000 would skip some of them
        with anyio.fail_after(TIMEOUT):
            done = await anyio.run_process(
                [sys.executable, "-c", command, "call", url, "slow", "seconds=1.5"],
                check=False,
                env=clean_env(),
                stdin=subprocess.DEVNULL,
            )
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert done.stdout.decode() == "slow done\n"
    shown = [line.split("] ", 1)[1] for line in err.splitlines() if line.startswith("[")]
    assert "working: step 1 of 3" in shown and "working: step 2 of 3" in shown, shown
    # step 3 and the result are written back to back: one push may carry both (latest state wins);
    # a finished task's line shows its status alone, not the last working message
    assert shown[-1] == "completed", shown
    assert app.methods["tasks/get"] <= 1
