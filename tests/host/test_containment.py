"""Hostile task bodies against real `mcptasks serve` processes (memory and SQLite stores).

After each hostile body: the task it ran in ends with a readable status, a control task started
before it is still readable and finishes, a plain tool call and `server/discover` work, and the
process is alive. One server process per store serves the whole module.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from processes import free_port, serving_http
from sdk_helpers import TIMEOUT, RawClient, accept, poll, tasks_extension, text, the_input_request

from mcptasks.wire import EXTENSION_ID, TERMINAL_STATUSES

APP = Path(__file__).resolve().parents[1] / "hostile_app.py"

pytestmark = pytest.mark.anyio


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp(f"hostile-{request.param}")
    store = "memory://" if request.param == "memory" else f"sqlite:///{folder / 'tasks.db'}"
    port = free_port()
    log = folder / "server.log"
    with serving_http(APP, port=port, log=log, extra=("--store", store)) as process:
        yield Server(f"http://127.0.0.1:{port}/mcp", process, log)
        assert process.poll() is None, log.read_text()


@asynccontextmanager
async def raw(server: Server) -> AsyncIterator[RawClient]:
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        yield RawClient(http, server.url)


async def start(client: RawClient, tool: str, arguments: dict[str, Any] | None = None) -> str:
    response = await client.call(tool, arguments or {})
    assert response.status == 200, response.message
    created = response.result
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def finish(client: RawClient, task_id: str) -> dict[str, Any]:
    return await client.finish(task_id)


async def hostile(server: Server, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Start a control task, run the hostile tool to its end, check the server is unharmed;
    return the hostile task's final `tasks/get`."""
    async with raw(server) as client:
        control_id = await start(client, "control", {"label": tool})
        control = await poll(
            lambda: client.get(control_id), lambda t: t["status"] == "input_required", what="control input"
        )
        task_id = await start(client, tool, arguments)
        ended = await finish(client, task_id)
        # The control task is still readable, and finishes once answered.
        control = await client.get(control_id)
        assert control["status"] == "input_required", control
        key, _ = the_input_request(control)
        assert (
            await client.send("tasks/update", {"taskId": control_id, "inputResponses": {key: accept()}})
        ).status == 200
        done = await finish(client, control_id)
        assert done["status"] == "completed" and text(done["result"]) == f"{tool} done (accept)", done
        discovered = await client.send("server/discover")
        assert discovered.status == 200
        assert discovered.result["capabilities"]["extensions"] == {EXTENSION_ID: {}}
    async with Client(server.url, extensions=[tasks_extension()]) as sdk:
        pong = await sdk.call_tool("ping", {})
        assert pong.content[0].text == "pong"  # type: ignore[union-attr]
    assert server.process.poll() is None, server.log.read_text()
    return ended


def failed_with(task: dict[str, Any], reason: str, *fragments: str) -> None:
    assert task["status"] == "failed", task
    assert task["error"]["data"]["reason"] == reason, task
    for fragment in fragments:
        assert fragment in task["error"]["message"], task


def tool_error(task: dict[str, Any], *fragments: str) -> None:
    assert task["status"] == "completed" and task["result"]["isError"] is True, task
    for fragment in fragments:
        assert fragment in text(task["result"]), task


async def test_a_child_of_the_bodys_task_group_fails_while_it_waits_at_a_yield(server: Server) -> None:
    task = await hostile(server, "child_fails_while_parked")
    tool_error(task, "the child task failed")


async def test_awaiting_a_cancelled_asyncio_helper(server: Server) -> None:
    task = await hostile(server, "cancels_a_helper")
    failed_with(task, "aborted", "cancelled by something other than mcptasks")


async def test_a_body_cancelling_its_own_task(server: Server) -> None:
    task = await hostile(server, "cancels_itself")
    failed_with(task, "aborted", "cancelled by something other than mcptasks")


async def test_a_body_leaving_its_own_cancellation_requested(server: Server) -> None:
    task = await hostile(server, "cancels_itself_and_returns")
    assert task["status"] == "completed" and text(task["result"]) == "returned anyway", task


@pytest.mark.parametrize(
    ("kind", "fragment"),
    [
        ("GeneratorExit", "raised GeneratorExit"),
        ("cancelled", "cancelled by something other than mcptasks"),
        ("KeyboardInterrupt", "raised KeyboardInterrupt"),
        ("SystemExit", "raised SystemExit"),
        ("SystemExit3", "raised SystemExit: 3"),
        ("BaseExceptionGroup", "raised BaseExceptionGroup: mixed"),
    ],
)
async def test_base_exceptions_fail_only_their_task(server: Server, kind: str, fragment: str) -> None:
    task = await hostile(server, "raises", {"kind": kind})
    failed_with(task, "aborted", fragment, "'raises'")
    assert task["statusMessage"] == f"Failed: {task['error']['data']['exception']}"


async def test_an_exception_group_is_a_tool_error_naming_its_members(server: Server) -> None:
    task = await hostile(server, "raises", {"kind": "ExceptionGroup"})
    tool_error(task, "two failures", "ValueError: a", "KeyError: 'b'")


async def test_a_huge_exception_message_is_cut(server: Server) -> None:
    task = await hostile(server, "raises", {"kind": "huge"})
    tool_error(task, "(5000000 characters)")
    assert len(text(task["result"])) < 5000


async def test_a_coroutine_body_raising_system_exit(server: Server) -> None:
    task = await hostile(server, "coroutine_raises")
    failed_with(task, "aborted", "raised SystemExit: 0")


@pytest.mark.parametrize(
    ("kind", "reason", "fragment"),
    [
        ("result", "invalid_result", "result.content[0].text is of type object"),
        ("status", "invalid_value", "Status message is of type object"),
        ("input", "invalid_value", "elicitation/create params.extra is of type object"),
        ("nan", "invalid_result", "nan: JSON has no NaN or Infinity"),
        ("block", "invalid_result", "content[0] (image): data"),
        ("too_big", "result_too_large", "over the limit of 100000 bytes"),
        ("inputs", "invalid_value", "at most 4 input requests outstanding"),
    ],
)
async def test_values_that_cannot_be_sent_fail_their_task(
    server: Server, kind: str, reason: str, fragment: str
) -> None:
    task = await hostile(server, "bad_value", {"kind": kind})
    failed_with(task, reason, fragment)


async def test_a_status_flood_is_coalesced_and_cut(server: Server) -> None:
    task = await hostile(server, "status_flood", {"count": 100_000})
    assert task["status"] == "completed" and text(task["result"]) == "flooded 100000", task


async def test_an_async_body_blocking_the_loop_is_named_in_the_log(server: Server) -> None:
    task = await hostile(server, "blocks_the_loop", {"seconds": 1.0})
    assert task["status"] == "completed", task
    log = server.log.read_text()
    assert "task tool 'blocks_the_loop'" in log and "has blocked the event loop" in log, log


async def test_a_def_body_runs_in_a_thread_and_sees_cancellation(server: Server) -> None:
    task = await hostile(server, "sleeps_in_a_thread", {"seconds": 0.2})
    assert task["status"] == "completed" and text(task["result"]) == "slept 0.2 s", task
    async with raw(server) as client:
        task_id = await start(client, "sleeps_in_a_thread", {"seconds": 600})
        # While the body blocks its thread, the server answers (and the body is still running).
        async with Client(server.url, extensions=[tasks_extension()]) as sdk:
            assert (await sdk.call_tool("ping", {})).content[0].text == "pong"  # type: ignore[union-attr]
        assert (await client.get(task_id))["status"] == "working"
        assert (await client.send("tasks/cancel", {"taskId": task_id})).status == 200
        assert (await client.get(task_id))["status"] == "cancelled"


async def test_an_anonymous_client_creating_tasks_in_a_loop_is_refused_past_the_limit(server: Server) -> None:
    async with raw(server) as client:
        ids = [await start(client, "control", {"label": f"flood {i}"}) for i in range(200)]
        refused = await client.call("control", {"label": "one too many"})
        assert refused.status == 200
        error = refused.message["error"]
        assert error["code"] == -32000
        assert "Too many active tasks" in error["message"]
        assert error["data"] == {
            "reason": "too_many_tasks",
            "retryAfterMs": 5000,
            "limit": 200,
            "scope": "owner",
        }
        for task_id in ids:
            await client.send("tasks/cancel", {"taskId": task_id})
        await poll(lambda: client.call("ping_task"), lambda r: "error" not in r.message, what="room again")


async def test_a_def_generator_asks_from_a_thread(server: Server) -> None:
    async with raw(server) as client:
        task_id = await start(client, "asks_from_a_thread", {"who": "ann"})
        waiting = await poll(
            lambda: client.get(task_id), lambda t: t["status"] == "input_required", what="input"
        )
        assert waiting["statusMessage"] == "asking ann"
        key, request = the_input_request(waiting)
        assert request["params"]["message"] == "hello ann?"
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": {key: accept()}})
        done = await finish(client, task_id)
    assert text(done["result"]) == "ann: accept"


async def test_a_body_ignoring_cancellation_is_logged(server: Server) -> None:
    async with raw(server) as client:
        task_id = await start(client, "ignores_cancellation", {"seconds": 3.0})
        await poll(lambda: client.get(task_id), lambda t: t["statusMessage"] == "spinning", what="spinning")
        await client.send("tasks/cancel", {"taskId": task_id})
        assert (await client.get(task_id))["status"] == "cancelled"
    await poll(
        lambda: anyio.to_thread.run_sync(server.log.read_text),
        lambda log: "'ignores_cancellation'" in log and "ignores cancellation" in log,
        what="the ignored-cancellation warning",
    )


async def test_a_yield_inside_the_bodys_own_cancel_scope(server: Server) -> None:
    task = await hostile(server, "yields_in_own_scope")
    assert task["status"] == "completed" and text(task["result"]) == "moved on", task


@pytest.mark.parametrize(
    ("tool", "check"),
    [
        ("never_yields", lambda t: t["status"] == "completed" and t["result"]["content"] == []),
        ("yields_after_result", lambda t: t["status"] == "completed" and text(t["result"]) == "first"),
        ("closes_itself", lambda t: t["status"] == "completed" and "already running" in text(t["result"])),
        ("recurses", lambda t: t["status"] == "completed" and "recursion" in text(t["result"])),
    ],
)
async def test_odd_generators(server: Server, tool: str, check: Any) -> None:
    task = await hostile(server, tool)
    assert task["status"] in TERMINAL_STATUSES
    assert check(task), task


async def test_shutdown_does_not_wait_forever_for_a_body_ignoring_cancellation(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with serving_http(APP, port=port, log=log) as process:
        server = Server(f"http://127.0.0.1:{port}/mcp", process, log)
        async with raw(server) as client:
            task_id = await start(client, "ignores_cancellation", {"seconds": 3600.0})
            await poll(
                lambda: client.get(task_id), lambda t: t["statusMessage"] == "spinning", what="spinning"
            )
        process.send_signal(signal.SIGTERM)
        # Limits.cancel_grace is 0.5 s in the app; the wait below is only an upper bound.
        code = await anyio.to_thread.run_sync(lambda: process.wait(timeout=60))
    assert code == 1
    output = log.read_text()
    assert "ignore cancellation" in output and "'ignores_cancellation'" in output, output
    assert "exiting without waiting for 1 task bodies" in output, output
