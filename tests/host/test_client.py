"""`mcptasks.client`: the SDK client extension, the task handle, resume by id, and the ledger.

Servers are real: the conformance example in process (`Client(app.mcp, ...)`), served over HTTP
by `mcptasks serve` in a subprocess, and over stdio; plus small apps built here for behaviours
the example cannot show (a server that lists an answered key again, flaky `tasks/get`, a task
that never moves). Nothing synchronises by sleeping: waits watch observable state (events set
by the tools, the task's status) under generous `anyio.fail_after` deadlines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from fresh_modules import load_fresh
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp_types import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    ListRootsResult,
    Root,
    TextContent,
)
from processes import clean_env, free_port, serving_http
from pydantic import BaseModel

from mcptasks import Accepted, Elicit, ListRoots, ProtocolError, Result, Sample, TaskServer, Unsupported
from mcptasks.authoring import InputRequest
from mcptasks.client import (
    CreateTaskResult,
    DetailedTask,
    TaskCancelled,
    TaskFailed,
    TaskHandle,
    TaskInputError,
    TaskLedger,
    TaskPolicy,
    TasksClient,
    TaskStuck,
    TaskUnreachable,
    server_identity,
    start_tool_call,
)
from mcptasks.errors import MCPTasksError, TaskError, TaskNotFound

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "examples" / "conformance_server.py"
TIMEOUT = 60.0
"""Upper bound of every wait (a loaded 2-core machine only makes a test slower)."""

pytestmark = pytest.mark.anyio


def conformance_app() -> TaskServer:
    """A fresh copy of `examples/conformance_server.py`'s app (its own engine and store)."""
    app = load_fresh(CONFORMANCE).app
    assert isinstance(app, TaskServer)
    return app


class Elicitations:
    """An elicitation callback that answers from a table and records every call."""

    def __init__(self, answers: Mapping[str, ElicitResult] | None = None) -> None:
        self.answers = dict(answers or {})
        self.calls: list[tuple[str, str]] = []
        """(request id = input key, message) per invocation."""

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        self.calls.append((str(context.request_id), params.message))
        for fragment, answer in self.answers.items():
            if fragment in params.message:
                return answer
        return ElicitResult(action="decline")


def text_of(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


# -- transparent call_tool -------------------------------------------------------------------------


async def test_call_tool_follows_a_task_to_its_result() -> None:
    seen: list[DetailedTask] = []
    extension = TasksClient(on_status=seen.append)
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[extension]) as client:
            result = await client.call_tool("slow_compute", {"seconds": 0.6, "label": "sum"})
    assert text_of(result) == "sum: finished after 0.6 s"
    assert result.is_error is False
    assert seen[0].status == "working"
    assert seen[-1].status == "completed"
    assert any((task.status_message or "").startswith("sum: ") for task in seen)
    assert len({task.task_id for task in seen}) == 1


async def test_call_tool_of_an_ordinary_tool_is_untouched() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            result = await client.call_tool("greet", {"name": "Ada"})
    assert text_of(result) == "Hello, Ada!"


async def test_a_tool_error_stays_a_result() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            result = await client.call_tool("failing_job", {})
    assert result.is_error is True
    assert text_of(result) == "the job failed: disk quota exceeded"


async def test_a_failed_task_raises_task_failed_with_the_json_rpc_error() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            with pytest.raises(TaskFailed) as caught:
                await client.call_tool("protocol_error_job", {})
    failure = caught.value
    assert isinstance(failure, MCPError)  # code that catches MCPError for inline calls still works
    assert isinstance(failure, MCPTasksError)
    assert (failure.code, failure.message, failure.data) == (
        -32603,
        "backend unavailable",
        {"retryable": True},
    )
    assert failure.task is not None and failure.task.status == "failed"
    assert failure.task_id == failure.task.task_id


async def test_elicitation_is_answered_through_the_clients_callback() -> None:
    confirm = Elicitations({"Delete": ElicitResult(action="accept", content={"confirm": True})})
    decline = Elicitations()
    with anyio.fail_after(TIMEOUT):
        app = conformance_app()
        async with Client(app.mcp, extensions=[TasksClient()], elicitation_callback=confirm) as client:
            assert text_of(await client.call_tool("confirm_delete", {"filename": "a.txt"})) == "deleted a.txt"
        async with Client(app.mcp, extensions=[TasksClient()], elicitation_callback=decline) as client:
            assert text_of(await client.call_tool("confirm_delete", {"filename": "b.txt"})) == "kept b.txt"
    assert [message for _, message in confirm.calls] == ["Delete a.txt?"]
    assert [message for _, message in decline.calls] == ["Delete b.txt?"]


async def test_without_an_elicitation_callback_the_answer_is_cancel() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            result = await client.call_tool("confirm_delete", {"filename": "c.txt"})
    assert text_of(result) == "kept c.txt"


async def test_two_outstanding_keys_are_each_answered_once() -> None:
    answers = Elicitations(
        {
            "name": ElicitResult(action="accept", content={"name": "Ada"}),
            "Go ahead": ElicitResult(action="accept", content={"confirm": True}),
        }
    )
    with anyio.fail_after(TIMEOUT):
        async with Client(
            conformance_app().mcp, extensions=[TasksClient()], elicitation_callback=answers
        ) as client:
            result = await client.call_tool("multi_input", {})
    assert text_of(result) == "Ada says go"
    assert sorted(message for _, message in answers.calls) == ["Go ahead?", "Your name?"]
    assert len({key for key, _ in answers.calls}) == 2


async def test_input_before_the_task_exists_then_the_task() -> None:
    answers = Elicitations({"name": ElicitResult(action="accept", content={"name": "Lin"})})
    with anyio.fail_after(TIMEOUT):
        async with Client(
            conformance_app().mcp, extensions=[TasksClient()], elicitation_callback=answers
        ) as client:
            outcome = await start_tool_call(client, "test_tool_with_task")
            assert text_of(await outcome.result()) == "Hello, Lin!"
    assert answers.calls == [("user_name", "What is your name?")]


# -- the explicit handle ---------------------------------------------------------------------------


async def test_handle_status_watch_wait_and_result() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            handle = await start_tool_call(client, "slow_compute", {"seconds": 1.5, "label": "job"})
            assert handle.tool == "slow_compute"
            first = await handle.status()
            assert first.task_id == handle.task_id
            assert first.status == "working"
            messages: list[str | None] = []
            statuses: list[str] = []
            async with handle.watch() as updates:
                async for task in updates:
                    statuses.append(task.status)
                    messages.append(task.status_message)
            assert statuses[-1] == "completed"
            assert set(statuses[:-1]) == {"working"}
            progress = [None, "job: started", "job: 0.5/1.5 s", "job: 1.0/1.5 s", "job: 1.5/1.5 s"]
            assert messages == sorted(messages, key=progress.index)  # in order
            assert len(set(zip(statuses, messages, strict=True))) == len(messages)  # one yield per change
            assert messages[-1] == "job: 1.5/1.5 s"
            final = await handle.wait()
            assert final.terminal and final.status == "completed"
            assert final.result is not None
            result = await handle.result()
    assert text_of(result) == "job: finished after 1.5 s"


async def test_start_tool_call_returns_the_result_of_an_ordinary_tool() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            handle = await start_tool_call(client, "greet", {"name": "Bo"})
            assert handle.task_id is None and handle.last is None
            assert repr(handle) == "TaskHandle(task_id=None, tool='greet', status='completed')"
            async with handle.watch() as updates:
                assert [task async for task in updates] == []  # no task, so no state
            await handle.cancel()  # nothing to cancel
            result = await handle.result()
            with pytest.raises(ValueError, match="answered this call at once"):
                await handle.status()
    assert text_of(result) == "Hello, Bo!"


async def test_an_idempotency_key_returns_the_same_task() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            first = await start_tool_call(client, "slow_compute", {"seconds": 30}, idempotency_key="k-1")
            again = await start_tool_call(client, "slow_compute", {"seconds": 30}, idempotency_key="k-1")
            other = await start_tool_call(client, "slow_compute", {"seconds": 30}, idempotency_key="k-2")
            assert first.task_id == again.task_id != other.task_id
            for handle in (first, other):
                await handle.cancel()


async def test_start_tool_call_needs_the_extension() -> None:
    async with Client(conformance_app().mcp) as client:
        with pytest.raises(ValueError, match="TasksClient"):
            await start_tool_call(client, "slow_compute")


async def test_cancel_then_result_raises_task_cancelled() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            handle = await start_tool_call(client, "slow_compute", {"seconds": 60})
            async with handle.watch() as updates:
                async for task in updates:
                    if task.status_message is not None and task.status == "working":
                        await handle.cancel()
            assert handle.last is not None and handle.last.status == "cancelled"
            with pytest.raises(TaskCancelled) as caught:
                await handle.result()
            assert caught.value.task_id == handle.task_id
            await handle.cancel()  # cancelling a finished task is fine
            assert (await handle.status()).status == "cancelled"


async def test_watch_without_answering_and_respond_by_hand() -> None:
    callback = Elicitations({"Delete": ElicitResult(action="accept", content={"confirm": False})})
    with anyio.fail_after(TIMEOUT):
        async with Client(
            conformance_app().mcp, extensions=[TasksClient()], elicitation_callback=callback
        ) as client:
            handle = await start_tool_call(client, "confirm_delete", {"filename": "d.txt"})
            async with handle.watch(answer_inputs=False) as updates:
                async for task in updates:
                    if task.status == "input_required":
                        assert task.input_requests is not None
                        ((key, request),) = task.input_requests.items()
                        assert request["method"] == "elicitation/create"
                        assert request["params"]["message"] == "Delete d.txt?"
                        await handle.respond({key: ElicitResult(action="accept", content={"confirm": True})})
                        await handle.respond({key: {"action": "decline"}})  # already answered: not sent
                        assert handle.answered == {key}
            assert text_of(await handle.result()) == "deleted d.txt"
    assert callback.calls == []


async def test_an_unknown_task_id_raises_task_not_found() -> None:
    async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
        handle = TaskHandle.resume(client, "no-such-task")
        with pytest.raises(TaskNotFound) as caught:
            await handle.status()
    assert caught.value.code == -32602
    assert caught.value.task_id == "no-such-task"
    assert isinstance(caught.value, TaskError) and isinstance(caught.value, MCPTasksError)


async def test_a_watch_left_early_or_cancelled_can_be_watched_again() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient()]) as client:
            handle = await start_tool_call(client, "slow_compute", {"seconds": 1.0, "label": "again"})
            async with handle.watch() as updates:
                first = await updates.__anext__()  # leaving after one state needs no closing
            assert first.status == "working"
            with anyio.CancelScope() as scope:
                async with handle.watch() as updates:
                    async for task in updates:
                        if task.status_message is not None:
                            scope.cancel()  # cancelled while waiting for the next state
            assert scope.cancelled_caught
            statuses = []
            async with handle.watch() as updates:
                async for task in updates:
                    statuses.append(task.status)
                async for _task in updates:
                    statuses.append("after the end")  # an ended watch stays ended
            assert statuses[-1] == "completed" and "after the end" not in statuses
            assert text_of(await handle.result()) == "again: finished after 1 s"


# -- small apps for the hard cases -----------------------------------------------------------------


class Confirm(BaseModel):
    confirm: bool


def relisting_app(relists: int) -> tuple[TaskServer, dict[str, Any]]:
    """A server whose `tasks/get` keeps listing the answered input key `relists` more times.

    The tool finishes only after those stale listings were served, so the client must poll
    through them; `stats["updates"]` counts the `tasks/update` calls that carried each key.
    """
    app = TaskServer("relisting")
    served_stale = anyio.Event()
    stats: dict[str, Any] = {"updates": {}, "stale": 0, "listed": {}}

    @app.task_tool(poll_interval=0.05)
    async def proceed():
        answer = yield Elicit("Proceed?", schema=Confirm, key="proceed")
        yield "answer received"
        await served_stale.wait()
        yield Result(f"proceed={isinstance(answer, Accepted) and answer.data.confirm}")

    protocol = app.extension.protocol
    original = protocol.handle

    async def handle(method: str, params: Mapping[str, Any] | None, **kwargs: Any) -> dict[str, Any]:
        result = await original(method, params, **kwargs)
        if method == "tasks/update" and params is not None:
            for key in params["inputResponses"]:
                stats["updates"][key] = stats["updates"].get(key, 0) + 1
        if method == "tasks/get":
            if result.get("inputRequests"):
                stats["listed"].update(result["inputRequests"])
            elif stats["updates"] and stats["stale"] < relists and result["status"] == "working":
                stats["stale"] += 1
                result = {**result, "status": "input_required", "inputRequests": dict(stats["listed"])}
                if stats["stale"] == relists:
                    served_stale.set()
        return result

    protocol.handle = handle  # type: ignore[method-assign]
    return app, stats


async def test_a_key_the_server_lists_again_is_not_answered_again() -> None:
    app, stats = relisting_app(relists=3)
    answers = Elicitations({"Proceed": ElicitResult(action="accept", content={"confirm": True})})
    with anyio.fail_after(TIMEOUT):
        # push=False: this server misbehaves on tasks/get, which only polling exercises
        async with Client(
            app.mcp, extensions=[TasksClient(push=False)], elicitation_callback=answers
        ) as client:
            result = await client.call_tool("proceed", {})
    assert text_of(result) == "proceed=True"
    assert stats["stale"] == 3
    (key,) = stats["listed"]
    assert key.startswith("proceed")
    assert answers.calls == [(key, "Proceed?")]
    assert stats["updates"] == {key: 1}


async def test_an_invalid_answer_is_asked_again_under_a_fresh_key() -> None:
    attempts: list[str] = []

    async def answer(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        attempts.append(str(context.request_id))
        if len(attempts) == 1:
            return ElicitResult(action="accept", content={"confirm": "perhaps"})
        return ElicitResult(action="accept", content={"confirm": True})

    with anyio.fail_after(TIMEOUT):
        async with Client(
            conformance_app().mcp, extensions=[TasksClient()], elicitation_callback=answer
        ) as client:
            result = await client.call_tool("confirm_delete", {"filename": "e.txt"})
    assert text_of(result) == "deleted e.txt"
    assert len(attempts) == 2 and attempts[0] != attempts[1]


async def test_a_task_created_already_finished_is_fetched_for_its_result() -> None:
    app = TaskServer("finished-at-creation")
    done = anyio.Event()

    @app.task_tool(poll_interval=0.05)
    async def instant():
        yield "working"
        await anyio.sleep(0.01)
        yield Result("instant result")

    protocol = app.extension.protocol
    original = protocol.call_tool

    async def call_tool(name: str, arguments: Mapping[str, Any] | None, **kwargs: Any) -> dict[str, Any]:
        created = await original(name, arguments, **kwargs)
        if created.get("resultType") == "task":  # answer only once the task has finished
            while (await protocol.engine.get(created["taskId"], owner="anonymous")).status != "completed":  # noqa: ASYNC110
                await anyio.sleep(0.01)  # polls the server's own record (bounded by fail_after)
            done.set()
            created = {**created, "status": "completed"}
        return created

    protocol.call_tool = call_tool  # type: ignore[method-assign]
    with anyio.fail_after(TIMEOUT):
        async with Client(app.mcp, extensions=[TasksClient()]) as client:
            result = await client.call_tool("instant", {})
    assert done.is_set()
    assert text_of(result) == "instant result"


def flaky_app(failures: int | None) -> tuple[TaskServer, dict[str, int]]:
    """`tasks/get` fails with -32603 the first `failures` times (always when None)."""
    app = TaskServer("flaky")
    counts = {"get": 0, "failed": 0}

    @app.task_tool(poll_interval=0.05)
    async def quick():
        yield "working"
        await anyio.sleep(0.01)  # suspend once, so the call is answered with a task
        yield Result("done")

    protocol = app.extension.protocol
    original = protocol.handle

    async def handle(method: str, params: Mapping[str, Any] | None, **kwargs: Any) -> dict[str, Any]:
        if method == "tasks/get":
            counts["get"] += 1
            if failures is None or counts["failed"] < failures:
                counts["failed"] += 1
                raise ProtocolError(-32603, "database is restarting")
        return await original(method, params, **kwargs)

    protocol.handle = handle  # type: ignore[method-assign]
    return app, counts


async def test_transient_errors_are_retried() -> None:
    app, counts = flaky_app(failures=3)
    extension = TasksClient(retry_backoff=0.01, max_retries=3, push=False)  # tasks/get is what fails
    with anyio.fail_after(TIMEOUT):
        async with Client(app.mcp, extensions=[extension]) as client:
            result = await client.call_tool("quick", {})
    assert text_of(result) == "done"
    assert counts["failed"] == 3


async def test_persistent_errors_end_in_task_unreachable() -> None:
    app, counts = flaky_app(failures=None)
    extension = TasksClient(retry_backoff=0.01, max_retries=2, push=False)  # tasks/get is what fails
    with anyio.fail_after(TIMEOUT):
        async with Client(app.mcp, extensions=[extension]) as client:
            with pytest.raises(TaskUnreachable) as caught:
                await client.call_tool("quick", {})
    assert caught.value.code == -32603
    assert caught.value.attempts == 3
    assert counts["get"] == 3


def gated_app() -> tuple[TaskServer, anyio.Event]:
    """`stall` says one thing and then waits for a gate that only the test opens."""
    app = TaskServer("gated")
    gate = anyio.Event()

    @app.task_tool(poll_interval=0.05)
    async def stall():
        yield "stalling"
        await gate.wait()
        yield Result("released")

    return app, gate


async def test_a_task_without_progress_is_stuck_and_cancelled() -> None:
    app, _ = gated_app()
    seen: list[DetailedTask] = []
    extension = TasksClient(stuck_after=0.5, on_status=seen.append)
    with anyio.fail_after(TIMEOUT):
        async with Client(app.mcp, extensions=[extension]) as client:
            started = time.monotonic()
            with pytest.raises(TaskStuck) as caught:
                await client.call_tool("stall", {})
            assert time.monotonic() - started >= 0.5
            assert caught.value.cancelled is True
            status = await TaskHandle.resume(client, caught.value.task_id).status()
    assert status.status == "cancelled"
    assert seen[-1].status == "working"


async def test_stuck_without_cancelling() -> None:
    app, gate = gated_app()
    extension = TasksClient(stuck_after=0.3, cancel_on_stuck=False)
    with anyio.fail_after(TIMEOUT):
        async with Client(app.mcp, extensions=[extension]) as client:
            with pytest.raises(TaskStuck) as caught:
                await client.call_tool("stall", {})
            assert caught.value.cancelled is False
            handle = TaskHandle.resume(
                client, caught.value.task_id, policy=TaskPolicy(min_poll_interval=0.01)
            )
            assert (await handle.status()).status == "working"
            gate.set()
            assert text_of(await handle.result()) == "released"


async def test_an_abandoned_call_cancels_its_task() -> None:
    app, _ = gated_app()
    seen: list[DetailedTask] = []
    stalling = anyio.Event()

    def observe(task: DetailedTask) -> None:
        seen.append(task)
        if task.status_message == "stalling":
            stalling.set()

    with anyio.fail_after(TIMEOUT):
        async with Client(app.mcp, extensions=[TasksClient(on_status=observe)]) as client:
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await client.call_tool("stall", {})

                group.start_soon(call)
                await stalling.wait()
                group.cancel_scope.cancel()
            status = await TaskHandle.resume(client, seen[0].task_id).status()
    assert status.status == "cancelled"


def inputs_app() -> TaskServer:
    """Tools that ask the client's model and the client's roots."""
    app = TaskServer("inputs")

    @app.task_tool(poll_interval=0.05)
    async def summarize(topic: str):
        reply = yield Sample(f"Summarize {topic}", max_tokens=20)
        roots = (yield ListRoots()).roots
        yield Result(f"{reply.text} / {', '.join(root.uri for root in roots)}")

    @app.task_tool(poll_interval=0.05)
    async def ask_model():
        reply = yield Sample("Say hi", max_tokens=5)
        yield Result("not asked" if isinstance(reply, Unsupported) else reply.text)

    @app.task_tool(poll_interval=0.05)
    async def custom():
        yield InputRequest("x-example/pick", {"from": ["a", "b"]})
        yield Result("never")

    return app


async def test_sampling_and_roots_go_to_the_clients_callbacks() -> None:
    async def sample(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        assert params.max_tokens == 20
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="short"), model="test-model"
        )

    async def roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root.model_validate({"uri": "file:///work"})])

    with anyio.fail_after(TIMEOUT):
        async with Client(
            inputs_app().mcp, extensions=[TasksClient()], sampling_callback=sample, list_roots_callback=roots
        ) as client:
            result = await client.call_tool("summarize", {"topic": "tasks"})
    assert text_of(result) == "short / file:///work"


async def test_sampling_without_a_callback_is_never_asked() -> None:
    # No sampling callback: the client does not declare `sampling`, so the server never asks.
    with anyio.fail_after(TIMEOUT):
        async with Client(inputs_app().mcp, extensions=[TasksClient()]) as client:
            result = await client.call_tool("ask_model", {})
    assert text_of(result) == "not asked"


async def test_an_input_request_the_client_cannot_answer_cancels_the_task() -> None:
    with anyio.fail_after(TIMEOUT):
        async with Client(inputs_app().mcp, extensions=[TasksClient()]) as client:
            with pytest.raises(TaskInputError) as caught:
                await client.call_tool("custom", {})
            failure = caught.value
            assert failure.method == "x-example/pick"
            assert failure.cancelled is True
            assert "unsupported input request" in str(failure)
            status = await TaskHandle.resume(client, failure.task_id).status()
    assert status.status == "cancelled"


# -- policy ----------------------------------------------------------------------------------------


def task(**fields: Any) -> DetailedTask:
    return DetailedTask.model_validate({"taskId": "t", "status": "working", **fields})


def test_poll_interval_follows_the_server_with_a_floor_and_a_ceiling() -> None:
    policy = TaskPolicy(poll_interval=1.0, min_poll_interval=0.05)
    assert policy.interval(task()) == 1.0
    assert policy.interval(task(pollIntervalMs=2500)) == 2.5
    assert policy.interval(task(pollIntervalMs=1)) == 0.05
    assert TaskPolicy(max_poll_interval=2.0).interval(task(pollIntervalMs=60_000)) == 2.0


def test_backoff_doubles_up_to_the_cap_and_honours_retry_after() -> None:
    policy = TaskPolicy(retry_backoff=0.5, max_retry_backoff=3.0)
    error = MCPError(-32603, "boom")
    assert [policy.backoff(n, error) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    too_fast = MCPError(-32000, "Polling too fast", {"retryAfterMs": 1500})
    assert policy.backoff(1, too_fast) == 1.5


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        TaskPolicy(min_poll_interval=-1)
    with pytest.raises(ValueError):
        TaskPolicy(stuck_after=0)
    with pytest.raises(ValueError):
        TaskPolicy(max_retries=-1)


def test_tasks_client_keywords_override_the_policy() -> None:
    extension = TasksClient(TaskPolicy(poll_interval=3.0), stuck_after=9.0)
    assert extension.policy.poll_interval == 3.0
    assert extension.policy.stuck_after == 9.0
    assert extension.identifier == "io.modelcontextprotocol/tasks"
    assert extension.settings() == {}


def test_detailed_task_shapes() -> None:
    created = CreateTaskResult.model_validate(
        {
            "resultType": "task",
            "taskId": "t1",
            "status": "working",
            "createdAt": "2026-07-28T10:00:00.000Z",
            "lastUpdatedAt": "2026-07-28T10:00:00.000Z",
            "ttlMs": None,
            "pollIntervalMs": 500,
            "x-extra": {"kept": True},
        }
    )
    detailed = DetailedTask.from_created(created)
    assert detailed.poll_interval_ms == 500 and not detailed.terminal
    assert detailed.to_wire()["x-extra"] == {"kept": True}
    assert detailed.created_at_epoch() == pytest.approx(1785232800.0)
    completed = task(
        status="completed", result={"content": [{"type": "text", "text": "ok"}], "isError": False}
    )
    assert completed.terminal and text_of(completed.call_tool_result()) == "ok"
    with pytest.raises(ValueError):
        task().call_tool_result()


def test_server_identity() -> None:
    assert server_identity("https://user:pw@example.com/mcp") == "https://example.com/mcp"
    assert server_identity("http://127.0.0.1:8000/mcp") == "http://127.0.0.1:8000/mcp"
    params = StdioServerParameters(command="python", args=["-m", "mcptasks", "serve", "my app.py"])
    assert server_identity(params) == "stdio:python -m mcptasks serve 'my app.py'"
    assert server_identity(conformance_app().mcp) == "inprocess:mcptasks-conformance"


# -- the ledger ------------------------------------------------------------------------------------


def test_ledger_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "state" / "ledger.db"
    ledger = TaskLedger(path)
    first = ledger.record("http://a/mcp", "t1", tool="build", created_at=100.0)
    ledger.record("http://a/mcp", "t2", tool="test", status="input_required", created_at=200.0)
    ledger.record("stdio:srv", "t3", tool="lint", created_at=300.0)
    assert first.pending and first.tool == "build" and first.created_at == 100.0
    again = TaskLedger(path)  # another process, same file
    assert [e.task_id for e in again.pending()] == ["t1", "t2", "t3"]
    assert [e.task_id for e in again.pending("http://a/mcp")] == ["t1", "t2"]
    again.update("http://a/mcp", "t1", "completed")
    again.update("http://a/mcp", "missing", "completed")  # ignored
    assert [e.task_id for e in ledger.pending("http://a/mcp")] == ["t2"]
    entry = ledger.get("http://a/mcp", "t1")
    assert entry is not None and entry.status == "completed" and not entry.pending
    ledger.record("http://a/mcp", "t1", status="working")  # re-record keeps tool and created_at
    entry = ledger.get("http://a/mcp", "t1")
    assert entry is not None and (entry.tool, entry.created_at, entry.status) == ("build", 100.0, "working")
    ledger.forget("stdio:srv", "t3")
    assert [e.task_id for e in ledger.entries()] == ["t1", "t2"]
    assert ledger.get("stdio:srv", "t3") is None


async def test_the_ledger_follows_a_task_from_start_to_end(tmp_path: Path) -> None:
    ledger = TaskLedger(tmp_path / "ledger.db")
    with anyio.fail_after(TIMEOUT):
        async with Client(conformance_app().mcp, extensions=[TasksClient(ledger=ledger)]) as client:
            handle = await start_tool_call(client, "slow_compute", {"seconds": 0.2})
            (pending,) = ledger.pending()
            assert (pending.server, pending.task_id, pending.tool) == (
                "inprocess:mcptasks-conformance",
                handle.task_id,
                "slow_compute",
            )
            await handle.result()
            # A transparent call is recorded too (under the extension's server id, else "unknown").
            await client.call_tool("slow_compute", {"seconds": 0.1})
    assert ledger.pending() == []
    entries = ledger.entries()
    assert [(e.server, e.status) for e in entries] == [
        ("inprocess:mcptasks-conformance", "completed"),
        ("unknown", "completed"),
    ]


# -- real transports -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcptasks serve examples/conformance_server.py` over HTTP on 127.0.0.1 (one per module)."""
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with serving_http(CONFORMANCE, port=port, log=log):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_over_http_call_tool_input_and_routing_headers(http_url: str) -> None:
    # The server refuses tasks/* over HTTP without `Mcp-Name: <taskId>`: polling working at all
    # shows the header is sent.
    answers = Elicitations({"Delete": ElicitResult(action="accept", content={"confirm": True})})
    with anyio.fail_after(TIMEOUT):
        async with Client(http_url, extensions=[TasksClient()], elicitation_callback=answers) as client:
            assert (
                text_of(await client.call_tool("slow_compute", {"seconds": 0.3}))
                == "compute: finished after 0.3 s"
            )
            assert text_of(await client.call_tool("confirm_delete", {"filename": "h.txt"})) == "deleted h.txt"
            with pytest.raises(TaskFailed):
                await client.call_tool("protocol_error_job", {})
    assert len(answers.calls) == 1


async def test_resume_by_id_with_a_new_client_after_a_restart(http_url: str, tmp_path: Path) -> None:
    ledger_path = tmp_path / "ledger.db"
    with anyio.fail_after(TIMEOUT):
        # The first "process": start the task, record it, and throw the client away.
        async with Client(http_url, extensions=[TasksClient(ledger=TaskLedger(ledger_path))]) as client:
            handle = await start_tool_call(client, "slow_compute", {"seconds": 1.0, "label": "resumed"})
            task_id = handle.task_id
        del client, handle
        # The second: find the pending task in the ledger and follow it with a brand-new client.
        ledger = TaskLedger(ledger_path)
        (entry,) = ledger.pending(http_url)
        assert (entry.task_id, entry.tool) == (task_id, "slow_compute")
        async with Client(http_url, extensions=[TasksClient(ledger=ledger)]) as client:
            resumed = TaskHandle.resume(client, entry.task_id, tool=entry.tool)
            assert resumed.server_id == http_url
            result = await resumed.result()
    assert text_of(result) == "resumed: finished after 1 s"
    assert ledger.pending() == []


async def test_over_stdio() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcptasks", "serve", str(CONFORMANCE)],
        cwd=str(ROOT),
        env=clean_env(),
    )
    answers = Elicitations(
        {
            "name": ElicitResult(action="accept", content={"name": "Io"}),
            "Go ahead": ElicitResult(action="decline"),
        }
    )
    with anyio.fail_after(TIMEOUT):
        async with Client(params, extensions=[TasksClient()], elicitation_callback=answers) as client:
            assert (
                text_of(await client.call_tool("slow_compute", {"seconds": 0.2}))
                == "compute: finished after 0.2 s"
            )
            assert text_of(await client.call_tool("multi_input", {})) == "Io says stop"
            handle = await start_tool_call(client, "slow_compute", {"seconds": 30})
            assert handle.server_id is not None and handle.server_id.startswith("stdio:")
            await handle.cancel()
            with pytest.raises(TaskCancelled):
                await handle.result()
