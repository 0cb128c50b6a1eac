"""`subscriptions/listen` + `notifications/tasks` on the wire, over real Streamable HTTP.

A raw SSE reader (`push_helpers.listen`) sees every frame exactly as sent: the ack first, the
subscription id on every frame, task states equal to `tasks/get`, the closing response.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from processes import free_port, serving_http
from push_helpers import (
    ACK,
    SUBSCRIPTION_ID,
    TASKS,
    as_notification,
    listen,
    task_frames,
    without_meta,
)
from sdk_helpers import TIMEOUT, HostApp, RawClient, StaticTokens, poll, serve_http

from mcptasks import Limits
from mcptasks.server.listen import CLOSE_REASON_META, set_sse_keepalive
from mcptasks.wire import EXTENSION_ID, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def running(host: HostApp) -> AsyncIterator[tuple[str, RawClient]]:
    async with (
        serve_http(host.app.streamable_http_app()) as url,
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
    ):
        yield url, RawClient(http, url)


async def start(raw: RawClient, tool: str, arguments: dict[str, Any]) -> str:
    created = (await raw.call(tool, arguments)).result
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def test_ack_first_then_states_equal_to_tasks_get_then_closing_response() -> None:
    host = HostApp()
    async with running(host) as (url, raw):
        task_id = await start(raw, "gated", {"label": "push"})
        done_id = await start(raw, "quick", {"n": 1})
        await raw.finish(done_id)
        async with listen(url, {"taskIds": [task_id, "no-such-task", done_id, task_id]}) as stream:
            assert stream.status == 200
            assert stream.response.headers["content-type"].startswith("text/event-stream")
            ack = await stream.next()
            assert ack["method"] == ACK
            assert "id" not in ack
            # the caller's own tasks, once each; unknown ids are left out
            assert ack["params"]["notifications"] == {"taskIds": [task_id, done_id]}
            assert ack["params"]["_meta"][SUBSCRIPTION_ID] == stream.request_id

            # the current states first (so nothing between the call and the listen is missed);
            # a task that already ended gets its final state once
            first, other = await stream.next(), await stream.next()
            if first["params"]["taskId"] == done_id:
                first, other = other, first
            assert without_meta(other["params"]) == as_notification(await raw.get(done_id))
            assert first["method"] == TASKS
            assert first["params"]["_meta"][SUBSCRIPTION_ID] == stream.request_id
            assert without_meta(first["params"]) == as_notification(await raw.get(task_id))
            assert first["params"]["statusMessage"] == "push: waiting"

            host.release("push")
            final = await stream.next()
            assert final["method"] == TASKS
            assert final["params"]["status"] == "completed"
            assert without_meta(final["params"]) == as_notification(await raw.get(task_id))
            assert final["params"]["result"]["content"][0]["text"] == "push: done"

            # every followed task ended: the stream closes with the spec's closing response
            closing = await stream.next()
            assert closing["id"] == stream.request_id
            assert closing["result"]["_meta"][SUBSCRIPTION_ID] == stream.request_id
            assert closing["result"]["_meta"][CLOSE_REASON_META] == "done"
            assert closing["result"]["resultType"] == "complete"
    for frame in stream.frames:
        assert frame.get("method") not in ("notifications/progress", "notifications/message")
        assert frame.get("method") != "notifications/tasks/status"
        meta = frame["params"]["_meta"] if "method" in frame else frame["result"]["_meta"]
        assert meta[SUBSCRIPTION_ID] == stream.request_id


async def test_input_required_is_pushed_with_its_requests_and_the_answer_resumes() -> None:
    host = HostApp()
    async with running(host) as (url, raw):
        task_id = await start(raw, "ask", {"filename": "a.txt"})
        async with listen(url, {"taskIds": [task_id]}) as stream:
            await stream.next()  # ack
            pushed = task_frames([await stream.next()])[0]
            while pushed["status"] != "input_required":
                pushed = task_frames([await stream.next()])[0]
            (key,) = pushed["inputRequests"]
            assert pushed["inputRequests"][key]["method"] == "elicitation/create"
            answer = {"action": "accept", "content": {"confirm": True}}
            await raw.send("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
            while pushed["status"] not in ("completed", "failed"):
                pushed = task_frames([await stream.next()])[0]
            assert pushed["result"]["content"][0]["text"] == "deleted a.txt"
            assert without_meta(pushed) == as_notification(await raw.get(task_id))


async def test_listening_for_tasks_without_the_extension_is_minus_32021() -> None:
    host = HostApp()
    async with running(host) as (url, raw):
        task_id = await start(raw, "gated", {"label": "x"})
        async with listen(url, {"taskIds": [task_id]}, capabilities={}) as stream:
            answer = await stream.until_result()
        host.release("x")
    assert stream.status == 400
    assert answer["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert answer["error"]["data"] == {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}


@pytest.mark.parametrize("task_ids", ["abc", [1, 2], [None]])
async def test_malformed_task_ids_are_invalid_params(task_ids: Any) -> None:
    host = HostApp()
    async with running(host) as (url, _raw), listen(url, {"taskIds": task_ids}) as stream:
        answer = await stream.until_result()
    assert answer["error"]["code"] == INVALID_PARAMS
    assert "taskIds" in answer["error"]["message"]


async def test_no_live_task_acknowledges_none_and_closes_at_once() -> None:
    host = HostApp()
    async with running(host) as (url, _raw), listen(url, {"taskIds": ["unknown"]}) as stream:
        ack = await stream.next()
        closing = await stream.next()
    assert ack["params"]["notifications"] == {"taskIds": []}
    assert closing["id"] == stream.request_id
    assert closing["result"]["_meta"][SUBSCRIPTION_ID] == stream.request_id


async def test_core_kinds_keep_working_on_the_same_stream() -> None:
    host = HostApp()

    @host.app.tool()
    async def change_tools(ctx: Context) -> str:
        """Announce a tools list change."""
        await ctx.notify_tools_changed()
        return "announced"

    async with running(host) as (url, raw):
        task_id = await start(raw, "gated", {"label": "both"})
        async with listen(url, {"toolsListChanged": True, "taskIds": [task_id]}) as stream:
            ack = await stream.next()
            assert ack["method"] == ACK
            assert ack["params"]["notifications"] == {"toolsListChanged": True, "taskIds": [task_id]}
            first = await stream.next()
            assert first["method"] == TASKS
            await raw.call("change_tools", {})
            changed = await stream.next()
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"][SUBSCRIPTION_ID] == stream.request_id
            host.release("both")
            final = await stream.next()
            assert final["method"] == TASKS
            assert final["params"]["status"] == "completed"
            # the tools part is still subscribed: the stream stays open after the task ended
            await raw.call("change_tools", {})
            again = await stream.next()
            assert again["method"] == "notifications/tools/list_changed"


async def test_listen_without_task_ids_is_the_sdks_own() -> None:
    host = HostApp()
    async with running(host) as (url, _raw), listen(url, {"toolsListChanged": True}) as stream:
        ack = await stream.next()
    assert ack["params"]["notifications"] == {"toolsListChanged": True}


async def test_tasks_of_another_principal_are_left_out() -> None:
    host = HostApp(
        token_verifier=StaticTokens("alice", "bob"),
        auth=AuthSettings(
            issuer_url="http://127.0.0.1:9/",
            resource_server_url="http://127.0.0.1:9/mcp",
            validate_token_resource=False,
        ),
    )
    alice = {"Authorization": "Bearer alice"}
    bob = {"Authorization": "Bearer bob"}
    async with serve_http(host.app.streamable_http_app()) as url:
        async with httpx2.AsyncClient(timeout=TIMEOUT, headers=alice) as http:
            task_id = (await RawClient(http, url).call("gated", {"label": "mine"})).result["taskId"]
        async with listen(url, {"taskIds": [task_id]}, headers=bob) as stream:
            assert (await stream.next())["params"]["notifications"] == {"taskIds": []}
        async with listen(url, {"taskIds": [task_id]}, headers=alice) as stream:
            assert (await stream.next())["params"]["notifications"] == {"taskIds": [task_id]}
            assert (await stream.next())["params"]["taskId"] == task_id
        host.release("mine")


async def test_many_changes_while_the_listener_reads_nothing_are_coalesced() -> None:
    host = HostApp()

    @host.app.task_tool(poll_interval=0.05)
    async def chatty(count: int):
        """Wait for the gate, change the status `count` times in a burst, then finish."""
        yield "ready"
        await host.gate("chatty").wait()
        for i in range(count):
            yield f"step {i}"
        yield "finished"

    async with running(host) as (url, raw):
        task_id = await start(raw, "chatty", {"count": 500})
        async with listen(url, {"taskIds": [task_id]}) as stream:
            await stream.next()  # ack
            while task_frames([await stream.next()])[0].get("statusMessage") != "ready":
                pass
            host.release("chatty")  # the burst starts while the stream is open
            states = []
            while not states or states[-1]["status"] != "completed":
                states.extend(task_frames([await stream.next()]))
        # the newest state always arrives; a burst never queues one frame per change
        assert states[-1]["statusMessage"] == "finished"
        assert len(states) < 500
        messages = [s["statusMessage"] for s in states]
        assert len(messages) == len(set(messages)), "a state is never sent twice"


async def test_a_client_closing_the_stream_unsubscribes() -> None:
    host = HostApp()
    push = host.app.extension.push
    assert push is not None
    async with running(host) as (url, raw):
        task_id = await start(raw, "gated", {"label": "bye"})
        async with listen(url, {"taskIds": [task_id]}) as stream:
            await stream.next()
            await stream.next()
            assert push.feed.watching(task_id)
        await poll(lambda: _watching(push, task_id), lambda watched: not watched, what="the unsubscribe")
        host.release("bye")
        assert (await raw.finish(task_id))["status"] == "completed"


async def _watching(push: Any, task_id: str) -> bool:
    return bool(push.feed.watching(task_id))


async def test_keepalive_comments_at_the_configured_interval() -> None:
    from mcp.server import _streamable_http_modern as modern  # the SDK detail set_sse_keepalive sets

    default = modern._SSE_PING_INTERVAL
    assert isinstance(default, float)
    host = HostApp(keepalive=0.2)
    try:
        assert modern._SSE_PING_INTERVAL == 0.2
        async with running(host) as (url, raw):
            task_id = await start(raw, "gated", {"label": "quiet"})
            async with listen(url, {"taskIds": [task_id]}) as stream:
                await stream.next()
                await stream.next()
                assert await stream.next_comment() == ": ping"
                assert await stream.next_comment() == ": ping"
            host.release("quiet")
    finally:
        set_sse_keepalive(default)
    with pytest.raises(ValueError, match="positive"):
        set_sse_keepalive(0)


async def test_server_shutdown_ends_listen_streams_with_the_closing_response(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with serving_http("tests/replica_app.py", port=port, log=tmp_path / "server.log") as process:
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            task_id = await start(RawClient(http, url), "work", {"seconds": 600})
        async with listen(url, {"taskIds": [task_id]}) as stream:
            await stream.next()
            await stream.next()
            process.send_signal(signal.SIGTERM)
            closing = await stream.until_result()  # after any states already on the way
        # uvicorn re-raises the signal once its graceful shutdown is over
        assert await anyio.to_thread.run_sync(lambda: process.wait(timeout=TIMEOUT)) in (0, -signal.SIGTERM)
    assert closing["id"] == stream.request_id
    assert closing["result"]["_meta"][CLOSE_REASON_META] == "shutdown"
    assert closing["result"]["_meta"][SUBSCRIPTION_ID] == stream.request_id


def _limited(max_streams: int, per_owner: int | None = None, **options: Any) -> HostApp:
    limits = Limits(max_listen_streams=max_streams, max_listen_streams_per_owner=per_owner)
    return HostApp(limits=limits, **options)


async def _open_streams(url: str, task_id: str, count: int, headers: dict[str, str]) -> list[dict[str, Any]]:
    """Open `count` listens at once and hold each until all answered; their first frames."""
    firsts: list[dict[str, Any]] = []
    answered = anyio.Event()

    async def one() -> None:
        async with listen(url, {"taskIds": [task_id]}, headers=headers) as stream:
            firsts.append(await stream.next())
            if len(firsts) == count:
                answered.set()
            await answered.wait()  # keep the stream open until every listen has its answer

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one)
    return firsts


async def test_a_burst_of_listens_beyond_the_limit_opens_exactly_the_limit() -> None:
    host = _limited(8, 8)
    push = host.app.extension.push
    assert push is not None
    async with running(host) as (url, raw):
        task_id = await start(raw, "gated", {"label": "burst"})
        firsts = await _open_streams(url, task_id, 20, {})
        acks = [frame for frame in firsts if frame.get("method") == ACK]
        refusals = [frame["error"] for frame in firsts if "error" in frame]
        assert (len(acks), len(refusals)) == (8, 12)
        assert {error["message"] for error in refusals} == {
            "Subscription limit reached: server limit of 8 task listen streams reached; retry later"
        }
        await poll(lambda: _open(push), lambda count: count == 0, what="the streams' release")
        async with listen(url, {"taskIds": [task_id]}) as stream:  # the slots are free again
            assert (await stream.next())["method"] == ACK
        host.release("burst")


async def _open(push: Any) -> int:
    return int(push.open_streams)


async def test_one_owner_filling_its_share_does_not_stop_another() -> None:
    host = _limited(
        8,
        3,
        token_verifier=StaticTokens("alice", "bob"),
        auth=AuthSettings(
            issuer_url="http://127.0.0.1:9/",
            resource_server_url="http://127.0.0.1:9/mcp",
            validate_token_resource=False,
        ),
    )
    push = host.app.extension.push
    assert push is not None
    alice = {"Authorization": "Bearer alice"}
    bob = {"Authorization": "Bearer bob"}
    async with serve_http(host.app.streamable_http_app()) as url:
        ids = {}
        for name, headers in (("alice", alice), ("bob", bob)):
            async with httpx2.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
                ids[name] = (await RawClient(http, url).call("gated", {"label": name})).result["taskId"]
        firsts = await _open_streams(url, ids["alice"], 5, alice)
        assert sum(frame.get("method") == ACK for frame in firsts) == 3
        assert {frame["error"]["message"] for frame in firsts if "error" in frame} == {
            "Subscription limit reached: per-owner limit of 3 task listen streams reached; close one or retry later"
        }
        async with AsyncExitStack() as held:
            streams = [
                await held.enter_async_context(listen(url, {"taskIds": [ids["alice"]]}, headers=alice))
                for _ in range(3)
            ]
            assert [(await stream.next())["method"] for stream in streams] == [ACK] * 3
            assert push.open_streams == 3
            refused = await held.enter_async_context(listen(url, {"taskIds": [ids["alice"]]}, headers=alice))
            assert "per-owner limit of 3" in (await refused.next())["error"]["message"]
            # bob listens on his own task while alice holds all of her share
            mine = await held.enter_async_context(listen(url, {"taskIds": [ids["bob"]]}, headers=bob))
            ack = await mine.next()
            assert ack["params"]["notifications"] == {"taskIds": [ids["bob"]]}
            assert (await mine.next())["params"]["taskId"] == ids["bob"]
        await poll(lambda: _open(push), lambda count: count == 0, what="the streams' release")
        for name in ("alice", "bob"):
            host.release(name)
