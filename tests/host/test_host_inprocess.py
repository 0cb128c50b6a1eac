"""The SDK hosts (`TaskServer`, `TasksExtension`) driven by the official `mcp.Client`, in process.

`Client(server)` takes the SDK's direct 2026-07-28 path (or the initialize handshake with
`mode="legacy"`), so everything here runs through the SDK's real dispatch, validation and
serialization, without a network.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    ListRootsResult,
    RequestParams,
    Root,
    TextContent,
)
from sdk_helpers import (
    BY_HAND,
    PROTOCOL_ERROR_CODE,
    AnyResult,
    HostApp,
    ListTasksRequest,
    ResultTaskRequest,
    TaskIdParams,
    Tasks,
    accept,
    connect,
    mcp_error,
    poll,
    tasks_extension,
    text,
    texts,
)

from mcptasks import EngineConfig, Result, TaskServer, TasksExtension, task_tool
from mcptasks._runtime.recovery import SHUTDOWN_MESSAGE
from mcptasks.wire import EXTENSION_ID, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY

pytestmark = pytest.mark.anyio

ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"
CREATE_KEYS = {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
MISSING_TASKS_DATA = {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}


# -- discovery and listing ----------------------------------------------------------------------


async def test_discover_advertises_the_extension_and_no_tasks_capability() -> None:
    host = HostApp()
    async with Client(host.mcp) as client:
        assert client.protocol_version == "2026-07-28"
        discover = client.session.discover_result
        assert discover is not None
        capabilities = discover.model_dump(by_alias=True, mode="json", exclude_none=True)["capabilities"]
        assert capabilities["extensions"] == {EXTENSION_ID: {}}
        assert "tasks" not in capabilities
        assert client.server_capabilities.extensions == {EXTENSION_ID: {}}


async def test_tools_list_shows_task_tools_next_to_ordinary_tools_with_exact_schemas() -> None:
    host = HostApp()
    async with Client(host.mcp) as client:
        listed = {
            tool.name: tool.model_dump(by_alias=True, mode="json", exclude_none=True)
            for tool in (await client.list_tools()).tools
        }
    assert {"greet", "gated", "quick", "required_job", "ask", "two_keys", "before"} <= set(listed)
    assert EXTENSION_ID not in listed["greet"].get("_meta", {})

    gated = listed["gated"]
    assert gated["inputSchema"] == {
        "type": "object",
        "properties": {"label": {"title": "Label", "type": "string"}},
        "required": ["label"],
    }
    assert gated["_meta"] == {"io.example/owner": "host-tests", EXTENSION_ID: {"taskSupport": "optional"}}
    assert gated["title"] == "Gated job"
    assert gated["annotations"] == {"readOnlyHint": True}
    assert gated["description"] == "Wait until the test releases `label`."
    assert listed["quick"]["inputSchema"] == {
        "type": "object",
        "properties": {"n": {"default": 1, "title": "N", "type": "integer"}},
    }
    assert listed["required_job"]["inputSchema"] == {"type": "object", "properties": {}}
    assert listed["required_job"]["_meta"] == {EXTENSION_ID: {"taskSupport": "required"}}
    # The TaskContext parameter is not part of the schema.
    assert listed["with_context"]["inputSchema"]["properties"] == {
        "topic": {"title": "Topic", "type": "string"}
    }
    for name, tool in host.app.extension.task_tools.items():
        assert listed[name]["inputSchema"] == tool.input_schema


# -- the task lifecycle -------------------------------------------------------------------------


async def test_create_poll_and_inlined_result_with_status_while_working() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        created = await tasks.start("gated", {"label": "alpha"})
        assert set(created) - {"statusMessage"} == CREATE_KEYS
        assert created["status"] == "working"
        assert created["ttlMs"] == 600_000
        assert created["pollIntervalMs"] == 50
        for key in ("createdAt", "lastUpdatedAt"):
            assert isinstance(created[key], str)
            assert re.match(ISO, created[key])
        task_id = created["taskId"]
        assert len(task_id) >= 22

        # Durable create: readable at once, with the body's status while it waits on the gate.
        working = await tasks.wait(task_id, lambda t: t.get("statusMessage") == "alpha: waiting")
        assert working["status"] == "working"
        assert working["resultType"] == "complete"
        assert not {"result", "error", "inputRequests", "requestState"} & set(working)

        host.release("alpha")
        done = await tasks.finish(task_id)
        assert done["status"] == "completed"
        assert done["taskId"] == task_id
        assert done["result"]["resultType"] == "complete"
        assert done["result"]["isError"] is False
        assert text(done["result"]) == "alpha: done"
        assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})
        assert "error" not in done and "inputRequests" not in done


async def test_elicitation_through_tasks_update() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("ask", {"filename": "a.txt"}))["taskId"]
        waiting = await tasks.wait_input(task_id, count=1)
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Delete a.txt?"
        assert request["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"

        assert await tasks.update(task_id, {key: accept(confirm=True)}) == {"resultType": "complete"}
        done = await tasks.finish(task_id)
        assert done["status"] == "completed"
        assert text(done["result"]) == "deleted a.txt"


async def test_two_keys_at_once_with_partial_answers() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("two_keys"))["taskId"]
        waiting = await tasks.wait_input(task_id, count=2)
        by_message = {r["params"]["message"]: key for key, r in waiting["inputRequests"].items()}
        name_key, go_key = by_message["Your name?"], by_message["Go ahead?"]

        # Unknown keys are ignored (acked); the task keeps waiting.
        assert await tasks.update(task_id, {"no-such-key": {"ignored": True}}) == {"resultType": "complete"}
        assert set((await tasks.get(task_id))["inputRequests"]) == {name_key, go_key}

        assert await tasks.update(task_id, {name_key: accept(name="Ada")}) == {"resultType": "complete"}
        partial = await tasks.get(task_id)
        assert partial["status"] == "input_required"
        assert set(partial["inputRequests"]) == {go_key}

        # An answered key cannot be answered again: only go_key counts.
        await tasks.update(task_id, {name_key: accept(name="Eve"), go_key: accept(confirm=True)})
        done = await tasks.finish(task_id)
        assert text(done["result"]) == "Ada says go"


async def test_an_invalid_answer_is_asked_again_under_a_fresh_key() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("two_keys"))["taskId"]
        waiting = await tasks.wait_input(task_id, count=2)
        keys = {r["params"]["message"]: key for key, r in waiting["inputRequests"].items()}
        await tasks.update(
            task_id,
            {
                keys["Your name?"]: accept(name=["not", "a", "string"]),
                keys["Go ahead?"]: accept(confirm=True),
            },
        )
        again = await tasks.wait(
            task_id,
            lambda t: t["status"] == "input_required" and keys["Your name?"] not in t["inputRequests"],
            what="the name asked again",
        )
        ((fresh, request),) = again["inputRequests"].items()
        assert fresh not in keys.values()
        assert request["params"]["message"].startswith("Your name?\n\n(Previous answer rejected:")
        await tasks.update(task_id, {fresh: accept(name="Noor")})
        assert text((await tasks.finish(task_id))["result"]) == "Noor says go"


async def test_sampling_and_roots_through_tasks_update() -> None:
    host = HostApp()
    async with connect(host, **BY_HAND) as tasks:
        task_id = (await tasks.start("summarize", {"topic": "logs"}))["taskId"]
        ((key, request),) = (await tasks.wait_input(task_id, count=1))["inputRequests"].items()
        assert request == {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize logs"}}],
                "maxTokens": 50,
            },
        }
        sampled = {
            "role": "assistant",
            "content": {"type": "text", "text": "all quiet"},
            "model": "m-2",
            "stopReason": "maxTokens",
        }
        await tasks.update(task_id, {key: sampled})
        roots = await tasks.wait(
            task_id,
            lambda t: t["status"] == "input_required" and key not in t["inputRequests"],
            what="roots/list",
        )
        ((roots_key, roots_request),) = roots["inputRequests"].items()
        assert roots_request == {"method": "roots/list", "params": {}}
        await tasks.update(task_id, {roots_key: {"roots": [{"uri": "file:///srv", "name": "srv"}]}})
        done = await tasks.finish(task_id)
        assert done["result"]["structuredContent"] == {
            "summary": "all quiet",
            "model": "m-2",
            "stopReason": "maxTokens",
            "roots": ["file:///srv"],
        }


async def test_invalid_arguments_are_a_tool_error_and_create_no_task() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        for arguments in ({}, {"label": 5}):
            refused = await tasks.call("gated", arguments)
            assert refused["resultType"] == "complete"
            assert refused["isError"] is True
            assert "taskId" not in refused
            assert "Invalid arguments for tool 'gated'" in text(refused)


async def test_a_task_running_when_the_server_stops_is_failed_not_left_working() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("gated", {"label": "orphan"}))["taskId"]
        await tasks.wait(task_id, lambda t: t.get("statusMessage") == "orphan: waiting")
    # Leaving the client ran the server's lifespan exit; the memory store outlives it.
    assert host.stopped("orphan").is_set()
    async with connect(host) as tasks:
        failed = await tasks.get(task_id)
    assert failed["status"] == "failed"
    assert failed["error"]["message"] == SHUTDOWN_MESSAGE


async def test_coroutine_body_with_task_context() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("with_context", {"topic": "post"}))["taskId"]
        waiting = await tasks.wait_input(task_id, count=1)
        assert waiting["statusMessage"] == "post: asking"
        (key,) = waiting["inputRequests"]
        await tasks.update(task_id, {key: accept(confirm=True)})
        done = await tasks.finish(task_id)
        assert text(done["result"]) == "post published (task True)"


async def test_cancel_a_running_task_stops_its_body_and_is_idempotent() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("gated", {"label": "long"}))["taskId"]
        await tasks.wait(task_id, lambda t: t.get("statusMessage") == "long: waiting")

        assert await tasks.cancel(task_id) == {"resultType": "complete"}
        with anyio.fail_after(20):
            await host.stopped("long").wait()
        cancelled = await tasks.get(task_id)
        assert cancelled["status"] == "cancelled"
        assert "result" not in cancelled and "error" not in cancelled

        assert await tasks.cancel(task_id) == {"resultType": "complete"}
        assert (await tasks.get(task_id))["status"] == "cancelled"


async def test_cancel_while_input_required() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("ask", {"filename": "b.txt"}))["taskId"]
        (key,) = (await tasks.wait_input(task_id))["inputRequests"]
        assert await tasks.cancel(task_id) == {"resultType": "complete"}
        cancelled = await tasks.get(task_id)
        assert cancelled["status"] == "cancelled"
        assert "inputRequests" not in cancelled
        # A late answer is acked and changes nothing.
        assert await tasks.update(task_id, {key: accept(confirm=True)}) == {"resultType": "complete"}
        assert (await tasks.get(task_id))["status"] == "cancelled"


async def test_cancel_of_a_completed_task_is_an_ack_and_changes_nothing() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("quick", {"n": 3}))["taskId"]
        done = await tasks.finish(task_id)
        assert done["status"] == "completed"
        assert await tasks.cancel(task_id) == {"resultType": "complete"}
        again = await tasks.get(task_id)
        assert again["status"] == "completed"
        assert text(again["result"]) == "counted to 3"


async def test_protocol_error_fails_the_task_with_the_error() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("protocol_error"))["taskId"]
        failed = await tasks.finish(task_id)
        assert failed["status"] == "failed"
        assert failed["error"] == {
            "code": PROTOCOL_ERROR_CODE,
            "message": "backend unavailable",
            "data": {"retryable": True},
        }
        assert "result" not in failed


async def test_tool_error_completes_the_task_with_is_error() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        task_id = (await tasks.start("tool_error"))["taskId"]
        done = await tasks.finish(task_id)
        assert done["status"] == "completed"
        assert done["result"]["isError"] is True
        assert text(done["result"]) == "disk quota exceeded"
        assert "error" not in done


async def test_no_progress_or_log_notifications_for_a_task() -> None:
    host = HostApp()
    seen: list[Any] = []

    async def collect(message: Any) -> None:
        seen.append(message)

    async with connect(host, message_handler=collect, log_level="debug") as tasks:
        task_id = (await tasks.start("gated", {"label": "quiet"}))["taskId"]
        await tasks.wait(task_id, lambda t: t.get("statusMessage") == "quiet: waiting")
        host.release("quiet")
        await tasks.finish(task_id)
    assert seen == []


# -- errors -------------------------------------------------------------------------------------


async def test_required_tool_without_opt_in_is_32021_with_required_capabilities() -> None:
    host = HostApp()
    async with Client(host.mcp) as client:
        error = await mcp_error(client.call_tool("required_job", {}))
    assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.error.data == MISSING_TASKS_DATA
    # The message says what the caller can do, and what the server's operator can.
    message = error.error.message
    assert message.startswith("Tool 'required_job' requires the client capability "), message
    assert "declare that extension in the request's client capabilities" in message
    assert "`claude -p`, declares none: use its interactive mode" in message
    assert 'EngineConfig(fallback="tools") or MCPTASKS_FALLBACK=tools' in message
    assert "lists task_status, task_answer and task_cancel" in message


async def test_tasks_methods_without_opt_in_are_32021_before_any_lookup() -> None:
    host = HostApp()
    async with Client(host.mcp) as plain:
        tasks = Tasks(plain)
        for attempt in (
            lambda: tasks.get("gate-test"),
            lambda: tasks.update("gate-test", {}),
            lambda: tasks.cancel("gate-test"),
        ):
            error = await mcp_error(attempt())
            assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            assert error.error.data == MISSING_TASKS_DATA


async def test_two_concurrent_in_process_clients_share_the_server() -> None:
    host = HostApp()
    async with connect(host) as owner:
        task_id = (await owner.start("gated", {"label": "shared"}))["taskId"]
        async with Client(host.mcp) as plain:
            error = await mcp_error(Tasks(plain).get(task_id))
            assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        # The refused request changed nothing, and the first client's task still runs.
        assert (await owner.get(task_id))["status"] == "working"
        host.release("shared")
        assert (await owner.finish(task_id))["status"] == "completed"


async def test_unknown_task_id_is_32602() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        for attempt in (
            lambda: tasks.get("tasks-nonexistent-12345"),
            lambda: tasks.update("tasks-nonexistent-12345", {"k": {}}),
            lambda: tasks.cancel("tasks-nonexistent-12345"),
        ):
            assert (await mcp_error(attempt())).code == INVALID_PARAMS


async def test_tasks_list_and_tasks_result_are_method_not_found() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        for request in (
            ListTasksRequest(params=RequestParams()),
            ResultTaskRequest(params=TaskIdParams(task_id="tasks-isolation-probe")),
        ):
            error = await mcp_error(tasks.session.send_request(request, AnyResult))
            assert error.code == METHOD_NOT_FOUND


# -- without the extension: inline, MRTR, legacy ------------------------------------------------


async def test_optional_tool_without_the_extension_runs_inline() -> None:
    host = HostApp()
    async with Client(host.mcp) as client:
        result = await client.call_tool("quick", {"n": 2})
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert dumped["resultType"] == "complete"
    assert "taskId" not in dumped
    assert result.is_error is False
    assert texts(result) == ["counted to 2"]


async def test_inline_elicitation_is_driven_by_the_sdk_clients_mrtr_loop() -> None:
    host = HostApp()
    asked: list[str] = []

    async def on_elicit(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    async with Client(host.mcp, elicitation_callback=on_elicit) as client:
        result = await client.call_tool("ask", {"filename": "inline.txt"})
        assert texts(result) == ["deleted inline.txt"]
        assert asked == ["Delete inline.txt?"]

    # Two questions in one round; the coroutine form too.
    asked.clear()

    async def both(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        content = {"name": "Lin"} if params.message == "Your name?" else {"confirm": False}
        return ElicitResult(action="accept", content=content)

    async with Client(host.mcp, elicitation_callback=both) as client:
        result = await client.call_tool("two_keys", {})
        assert texts(result) == ["Lin says stop"]
        assert sorted(asked) == ["Go ahead?", "Your name?"]
        asked.clear()
        result = await client.call_tool("with_context", {"topic": "memo"})
        assert texts(result) == ["memo held (task False)"]
        assert asked == ["Publish memo?"]


async def test_inline_sampling_and_roots_are_driven_by_the_sdk_client() -> None:
    host = HostApp()
    prompts: list[Any] = []

    async def sample(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        prompts.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text="brief"),
            model="m-1",
            stop_reason="endTurn",
        )

    async def roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///work", name="work")])

    async with Client(host.mcp, sampling_callback=sample, list_roots_callback=roots) as client:
        result = await client.call_tool("summarize", {"topic": "news"})
    assert result.structured_content == {
        "summary": "brief",
        "model": "m-1",
        "stopReason": "endTurn",
        "roots": ["file:///work"],
    }
    assert prompts == [
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize news"}}],
            "maxTokens": 50,
        }
    ]


async def test_inline_errors_keep_their_kind() -> None:
    host = HostApp()
    async with Client(host.mcp) as client:
        error = await mcp_error(client.call_tool("protocol_error", {}))
        assert (error.code, error.message, error.error.data) == (
            PROTOCOL_ERROR_CODE,
            "backend unavailable",
            {"retryable": True},
        )
        tool_error = await client.call_tool("tool_error", {})
        assert tool_error.is_error is True
        assert texts(tool_error) == ["disk quota exceeded"]


async def test_inline_elicitation_without_the_client_capability_is_unsupported() -> None:
    # Never sent: the yield evaluates to Unsupported, which reads as a decline.
    host = HostApp()
    async with Client(host.mcp) as client:
        result = await client.call_tool("ask", {"filename": "x"})
    assert result.is_error is False
    assert texts(result) == ["kept x"]


async def test_legacy_connection_never_sees_tasks() -> None:
    host = HostApp()
    async with Client(host.mcp, mode="legacy", extensions=[tasks_extension()]) as client:
        assert client.protocol_version == "2025-11-25"
        tasks = Tasks(client)
        assert (await mcp_error(tasks.get("whatever"))).code == METHOD_NOT_FOUND
        assert (await mcp_error(tasks.cancel("whatever"))).code == METHOD_NOT_FOUND

        inline = await tasks.call("quick", {"n": 5})
        assert "taskId" not in inline
        assert text(inline) == "counted to 5"

        error = await mcp_error(client.call_tool("required_job", {}))
        assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert error.error.data == MISSING_TASKS_DATA

        # No MRTR on a legacy connection: no question reaches the client; the answer is Unsupported.
        unsupported = await client.call_tool("ask", {"filename": "legacy.txt"})
        assert unsupported.is_error is False
        assert texts(unsupported) == ["kept legacy.txt"]


# -- fallback tools and idempotency keys ----------------------------------------------------------

IDEMPOTENCY_KEY = "io.github.mcptasks/idempotencyKey"


async def test_fallback_tools_serve_a_host_that_does_not_speak_the_extension() -> None:
    host = HostApp(fallback="tools")
    async with Client(host.mcp, mode="legacy") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert {"task_status", "task_answer", "task_cancel"} <= listed

        started = await client.call_tool("ask", {"filename": "f.txt"})
        assert started.structured_content is not None
        task_id = started.structured_content["taskId"]
        assert started.structured_content["status"] == "working"
        assert task_id in texts(started)[0]

        async def status() -> Any:
            return await client.call_tool("task_status", {"taskId": task_id})

        waiting = await poll(status, lambda r: r.structured_content["status"] == "input_required")
        (key,) = waiting.structured_content["inputRequests"]
        answered = await client.call_tool(
            "task_answer", {"taskId": task_id, "key": key, "answer": {"confirm": True}}
        )
        assert answered.is_error is False
        done = await poll(status, lambda r: r.structured_content["status"] == "completed")
        assert texts(done)[-1] == "deleted f.txt"
        assert (await client.call_tool("task_cancel", {"taskId": task_id})).is_error is False

        # "required" tools start tasks too in this mode; an unknown id is a tool error, not a crash.
        required = await client.call_tool("required_job", {})
        assert required.structured_content is not None and "taskId" in required.structured_content
        unknown = await client.call_tool("task_status", {"taskId": "no-such-task"})
        assert unknown.is_error is True

    # A client that opts in still gets real tasks.
    async with connect(host) as tasks:
        assert (await tasks.call("quick"))["resultType"] == "task"


def shown_by_a_structured_host(result: CallToolResult) -> Any:
    """What a host that prefers `structuredContent` (Claude Code) hands the model: only that, when
    the result has it; else the content blocks."""
    if result.structured_content is not None:
        return result.structured_content
    return [block.model_dump(mode="json", exclude_none=True) for block in result.content]


def strings_in(value: Any) -> set[str]:
    """Every string anywhere in a JSON value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*(strings_in(item) for item in value))
    return set()


def guidance_reaches_a_structured_host(result: CallToolResult) -> str:
    """Check that every text block of `result` also reaches a host that shows only the
    `structuredContent`, all of them in its `guidance`; return the guidance (the text blocks)."""
    shown = strings_in(shown_by_a_structured_host(result))
    for block in texts(result):
        assert any(block in string for string in shown), (block, result.structured_content)
    guidance = "\n".join(texts(result))
    if result.structured_content is not None:
        assert result.structured_content["guidance"] == guidance
    return guidance


async def test_fallback_guidance_reaches_a_host_that_shows_only_structured_content() -> None:
    host = HostApp(fallback="tools")
    async with Client(host.mcp, mode="legacy") as client:

        async def start(tool: str, arguments: dict[str, Any]) -> str:
            started = await client.call_tool(tool, arguments)
            assert "Call task_status with" in guidance_reaches_a_structured_host(started)
            assert started.structured_content is not None
            return str(started.structured_content["taskId"])

        async def status_until(task_id: str, wanted: str) -> str:
            async def status() -> CallToolResult:
                return await client.call_tool("task_status", {"taskId": task_id})

            reached = await poll(status, lambda r: r.structured_content["status"] == wanted, what=wanted)
            return guidance_reaches_a_structured_host(reached)

        gated = await start("gated", {"label": "structured"})
        assert "Check again with task_status" in await status_until(gated, "working")
        cancelled = await client.call_tool("task_cancel", {"taskId": gated})
        assert "is cancelled" in guidance_reaches_a_structured_host(cancelled)
        assert cancelled.structured_content is None  # text only: nothing machine-readable to add
        assert "is cancelled" in await status_until(gated, "cancelled")

        asking = await start("ask", {"filename": "s.txt"})
        question = await status_until(asking, "input_required")
        assert '- key "input-1": Delete s.txt?' in question
        answered = await client.call_tool(
            "task_answer", {"taskId": asking, "key": "input-1", "answer": {"confirm": True}}
        )
        assert "Answer recorded" in guidance_reaches_a_structured_host(answered)
        assert answered.structured_content is None
        # the result's text reaches the model in the guidance itself
        assert (await status_until(asking, "completed")).endswith("Its result follows.\ndeleted s.txt")

        assert "error" in await status_until(await start("tool_error", {}), "completed")
        assert "backend unavailable" in await status_until(await start("protocol_error", {}), "failed")

        for tool, arguments in (
            ("task_status", {"taskId": "no-such-task"}),
            ("task_answer", {"taskId": asking, "key": "input-9", "answer": True}),
            ("task_cancel", {}),
        ):
            mistake = await client.call_tool(tool, arguments)
            assert mistake.is_error is True
            assert guidance_reaches_a_structured_host(mistake)
            assert mistake.structured_content is None


async def test_fallback_reject_refuses_calls_without_the_extension() -> None:
    host = HostApp(fallback="reject")
    async with Client(host.mcp) as client:
        error = await mcp_error(client.call_tool("quick", {}))
    assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.error.data == MISSING_TASKS_DATA


async def test_an_idempotency_key_in_meta_returns_the_task_it_created() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        first = await tasks.start("gated", {"label": "once"}, meta={IDEMPOTENCY_KEY: "deploy-42"})
        retry = await tasks.start("gated", {"label": "once"}, meta={IDEMPOTENCY_KEY: "deploy-42"})
        other = await tasks.start("gated", {"label": "once"}, meta={IDEMPOTENCY_KEY: "deploy-43"})
        assert retry["taskId"] == first["taskId"]
        assert other["taskId"] != first["taskId"]
        bad = await mcp_error(tasks.call("quick", meta={IDEMPOTENCY_KEY: ""}))
        assert bad.code == INVALID_PARAMS
        host.release("once")
        for task_id in (first["taskId"], other["taskId"]):
            assert text((await tasks.finish(task_id))["result"]) == "once: done"


async def test_an_idempotency_key_reused_for_a_different_call_is_not_merged() -> None:
    host = HostApp()
    async with connect(host) as tasks:
        first = await tasks.start("quick", {"n": 1}, meta={IDEMPOTENCY_KEY: "k"})
        for name, arguments in (("quick", {"n": 9}), ("required_job", {})):
            try:
                again = await tasks.call(name, arguments, meta={IDEMPOTENCY_KEY: "k"})
            except MCPError:
                continue  # refusing the conflicting reuse is fine
            assert again.get("taskId") != first["taskId"], (name, arguments)


# -- MRTR before the task ------------------------------------------------------------------------


async def test_mrtr_rounds_before_the_task_then_a_create_task_result() -> None:
    host = HostApp()

    async def never(context: ClientRequestContext, params: ElicitRequestParams) -> ErrorData:
        raise AssertionError("the test answers by hand")

    async with connect(host, elicitation_callback=never) as tasks:
        first = await tasks.call("before")
        assert first["resultType"] == "input_required"
        assert "taskId" not in first
        assert set(first["inputRequests"]) == {"user_name"}
        assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
        state = first["requestState"]
        assert isinstance(state, str) and state

        created = await tasks.call(
            "before", input_responses={"user_name": accept(name="Alice")}, request_state=state
        )
        assert created["resultType"] == "task"
        assert "requestState" not in created and "inputRequests" not in created
        done = await tasks.finish(created["taskId"])
        assert done["status"] == "completed"
        assert text(done["result"]) == "Hello, Alice!"
        assert done["statusMessage"] == "greeting Alice"


async def test_mrtr_before_the_task_without_the_elicitation_capability_is_unsupported() -> None:
    host = HostApp()
    async with connect(host, elicitation_callback=None) as tasks:
        created = await tasks.call("before")
        assert created["resultType"] == "task"
        done = await tasks.finish(created["taskId"])
    assert text(done["result"]) == "Hello, stranger!"


# -- TasksExtension on a plain MCPServer ---------------------------------------------------------


async def test_tasks_extension_on_a_plain_mcpserver_keeps_the_user_lifespan() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def user_lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, str]]:
        events.append("enter")
        yield {"db": "connected"}
        events.append("exit")

    @task_tool(poll_interval=0.05)
    async def report(title: str):
        """Write a report."""
        yield f"writing {title}"
        yield Result(f"report {title!r} written")

    ext = TasksExtension(tools=[report], config=EngineConfig(immediate_results=False))
    server = MCPServer("plain", extensions=[ext], lifespan=ext.lifespan(user_lifespan))  # all it takes

    @ext.task_tool(task_support="required")
    async def archive() -> str:
        """Registered after the server was built: listed all the same."""
        return "archived"

    @server.tool()
    def database(ctx: Context) -> str:
        """An ordinary tool reading the user's lifespan state."""
        return str(ctx.request_context.lifespan_context["db"])

    async with Client(server, extensions=[tasks_extension()]) as client:
        assert events == ["enter"]
        assert client.server_capabilities.extensions == {EXTENSION_ID: {}}
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"report", "archive", "database"} <= set(listed)
        assert (listed["archive"].meta or {})[EXTENSION_ID] == {"taskSupport": "required"}

        plain = await client.call_tool("database", {})
        assert texts(plain) == ["connected"]

        tasks = Tasks(client)
        task_id = (await tasks.start("report", {"title": "Q3"}))["taskId"]
        done = await tasks.finish(task_id)
        assert text(done["result"]) == "report 'Q3' written"
        archived = await tasks.finish((await tasks.start("archive"))["taskId"])
        assert text(archived["result"]) == "archived"
    assert events == ["enter", "exit"]


async def test_task_server_runs_the_user_lifespan_around_the_engine() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def user_lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, int]]:
        events.append("enter")
        yield {"answer": 42}
        events.append("exit")

    app = TaskServer("with-lifespan", lifespan=user_lifespan, config=EngineConfig(immediate_results=False))

    @app.tool()
    def answer(ctx: Context) -> int:
        """Read the lifespan state."""
        return int(ctx.request_context.lifespan_context["answer"])

    @app.task_tool(poll_interval=0.05)
    async def double(n: int) -> int:
        """Double `n` in a task."""
        return n * 2

    async with Client(app.mcp, extensions=[tasks_extension()]) as client:
        assert (await client.call_tool("answer", {})).structured_content == {"result": 42}
        tasks = Tasks(client)
        done = await tasks.finish((await tasks.start("double", {"n": 21}))["taskId"])
        assert done["result"]["structuredContent"] == {"result": 42}
    assert events == ["enter", "exit"]
