"""The SDK hosts over real transports: Streamable HTTP on 127.0.0.1 (SDK client and raw POSTs) and stdio.

Raw requests carry exactly the headers and `_meta` envelope of the conformance harness, so the
HTTP status and the routing-header rules (`Mcp-Name`, `Mcp-Method`) are visible.
"""

from __future__ import annotations

import base64
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver import RequestStateBoundary
from mcp_types import ElicitRequestParams, ElicitResult
from sdk_helpers import (
    ELICITING,
    PROTOCOL_ERROR_CODE,
    TIMEOUT,
    AnyResult,
    HostApp,
    MisroutedGetTaskRequest,
    MisroutedParams,
    RawClient,
    Tasks,
    accept,
    answered_by_hand,
    mcp_error,
    serve_http,
    tasks_extension,
    text,
    texts,
    wire,
)

from mcptasks import Result
from mcptasks.wire import (
    EXTENSION_ID,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MISSING_TASKS_DATA = {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}


@asynccontextmanager
async def running(host: HostApp) -> AsyncIterator[str]:
    async with serve_http(host.app.streamable_http_app()) as url:
        yield url


@asynccontextmanager
async def raw_client(url: str, **options: Any) -> AsyncIterator[RawClient]:
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        yield RawClient(http, url, **options)


# -- the SDK client over HTTP -------------------------------------------------------------------


async def test_discover_and_tools_list_over_http() -> None:
    host = HostApp()
    async with running(host) as url:
        async with Client(url) as client:
            assert client.protocol_version == "2026-07-28"
            assert client.server_capabilities.extensions == {EXTENSION_ID: {}}
            listed = {
                tool.name: tool.model_dump(by_alias=True, mode="json", exclude_none=True)
                for tool in (await client.list_tools()).tools
            }
        async with raw_client(url, capabilities={}) as raw:
            discovered = await raw.send("server/discover")
    assert discovered.status == 200
    capabilities = discovered.result["capabilities"]
    assert capabilities["extensions"] == {EXTENSION_ID: {}}
    assert "tasks" not in capabilities
    assert discovered.result["resultType"] == "complete"

    assert "greet" in listed
    for name, tool in host.app.extension.task_tools.items():
        assert listed[name]["inputSchema"] == tool.input_schema
        assert listed[name]["_meta"][EXTENSION_ID] == {"taskSupport": tool.task_support}
    assert listed["required_job"]["_meta"][EXTENSION_ID] == {"taskSupport": "required"}


async def test_task_lifecycle_over_http_with_the_sdk_client() -> None:
    host = HostApp()
    async with (
        running(host) as url,
        Client(url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand) as client,
    ):
        tasks = Tasks(client)

        # create -> working with a status -> completed with the inlined result
        task_id = (await tasks.start("gated", {"label": "http"}))["taskId"]
        working = await tasks.wait(task_id, lambda t: t.get("statusMessage") == "http: waiting")
        assert working["status"] == "working"
        host.release("http")
        done = await tasks.finish(task_id)
        assert done["status"] == "completed"
        assert text(done["result"]) == "http: done"

        # input through tasks/update, two keys, partial answers
        task_id = (await tasks.start("two_keys"))["taskId"]
        waiting = await tasks.wait_input(task_id, count=2)
        keys = {r["params"]["message"]: key for key, r in waiting["inputRequests"].items()}
        assert await tasks.update(task_id, {keys["Go ahead?"]: accept(confirm=True)}) == {
            "resultType": "complete"
        }
        partial = await tasks.get(task_id)
        assert partial["status"] == "input_required"
        assert set(partial["inputRequests"]) == {keys["Your name?"]}
        await tasks.update(task_id, {keys["Your name?"]: accept(name="Kim")})
        assert text((await tasks.finish(task_id))["result"]) == "Kim says go"

        # cancel while running (the body really stops), again when terminal
        task_id = (await tasks.start("gated", {"label": "doomed"}))["taskId"]
        await tasks.wait(task_id, lambda t: t.get("statusMessage") == "doomed: waiting")
        assert await tasks.cancel(task_id) == {"resultType": "complete"}
        with anyio.fail_after(TIMEOUT):
            await host.stopped("doomed").wait()
        assert (await tasks.get(task_id))["status"] == "cancelled"
        assert await tasks.cancel(task_id) == {"resultType": "complete"}

        # cancel while input_required
        task_id = (await tasks.start("ask", {"filename": "keep.txt"}))["taskId"]
        await tasks.wait_input(task_id)
        await tasks.cancel(task_id)
        cancelled = await tasks.get(task_id)
        assert cancelled["status"] == "cancelled"
        assert "inputRequests" not in cancelled


async def test_tasks_outlive_the_connection_that_created_them_and_run_concurrently() -> None:
    host = HostApp()
    labels = [f"job-{i}" for i in range(8)]
    created: dict[str, str] = {}
    async with running(host) as url:
        async with Client(
            url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand
        ) as first:
            tasks = Tasks(first)

            async def start(label: str) -> None:
                created[label] = (await tasks.start("gated", {"label": label}))["taskId"]

            async with anyio.create_task_group() as group:
                for label in labels:
                    group.start_soon(start, label)
        assert len(set(created.values())) == len(labels)

        # A new connection sees every task still working, then each finishes with its own result.
        async with Client(
            url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand
        ) as second:
            tasks = Tasks(second)
            for label in labels:
                await tasks.wait(
                    created[label], lambda t, label=label: t.get("statusMessage") == f"{label}: waiting"
                )
            for label in labels:
                host.release(label)
            for label in labels:
                done = await tasks.finish(created[label])
                assert text(done["result"]) == f"{label}: done"


async def test_concurrent_partial_answers_are_both_recorded() -> None:
    host = HostApp()
    async with (
        running(host) as url,
        Client(url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand) as client,
    ):
        tasks = Tasks(client)
        for round_ in range(5):
            task_id = (await tasks.start("two_keys"))["taskId"]
            waiting = await tasks.wait_input(task_id, count=2)
            keys = {r["params"]["message"]: key for key, r in waiting["inputRequests"].items()}
            async with anyio.create_task_group() as group:
                group.start_soon(tasks.update, task_id, {keys["Your name?"]: accept(name=f"n{round_}")})
                group.start_soon(tasks.update, task_id, {keys["Go ahead?"]: accept(confirm=True)})
            assert text((await tasks.finish(task_id))["result"]) == f"n{round_} says go"


async def test_failed_and_tool_error_over_http() -> None:
    host = HostApp()
    async with (
        running(host) as url,
        Client(url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand) as client,
    ):
        tasks = Tasks(client)
        failed = await tasks.finish((await tasks.start("protocol_error"))["taskId"])
        assert failed["status"] == "failed"
        assert failed["error"]["code"] == PROTOCOL_ERROR_CODE
        assert failed["error"]["message"] == "backend unavailable"
        assert "result" not in failed

        done = await tasks.finish((await tasks.start("tool_error"))["taskId"])
        assert done["status"] == "completed"
        assert done["result"]["isError"] is True
        assert "error" not in done


async def test_mcp_name_mismatch_through_the_sdk_client_is_32020() -> None:
    host = HostApp()
    async with (
        running(host) as url,
        Client(url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand) as client,
    ):
        tasks = Tasks(client)
        task_id = (await tasks.start("quick"))["taskId"]
        request = MisroutedGetTaskRequest(params=MisroutedParams(task_id=task_id, routing="some-other-task"))
        error = await mcp_error(client.session.send_request(request, AnyResult))
        assert error.code == HEADER_MISMATCH
        # The SDK sends the matching Mcp-Name itself for the typed requests.
        assert (await tasks.finish(task_id))["status"] == "completed"


async def test_optional_tool_without_the_extension_over_http_inline_and_mrtr() -> None:
    host = HostApp()
    asked: list[str] = []

    async def on_elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": False})

    async with running(host) as url, Client(url, elicitation_callback=on_elicit) as client:
        plain = await client.call_tool("quick", {"n": 4})
        assert wire(plain)["resultType"] == "complete"
        assert texts(plain) == ["counted to 4"]

        asked_result = await client.call_tool("ask", {"filename": "notes.txt"})
        assert texts(asked_result) == ["kept notes.txt"]
        assert asked == ["Delete notes.txt?"]

        error = await mcp_error(client.call_tool("required_job", {}))
        assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert error.error.data == MISSING_TASKS_DATA


async def test_legacy_http_connection_never_sees_tasks() -> None:
    host = HostApp()
    async with running(host) as url, Client(url, mode="legacy", extensions=[tasks_extension()]) as client:
        assert client.protocol_version == "2025-11-25"
        tasks = Tasks(client)
        assert (await mcp_error(tasks.get("anything"))).code == METHOD_NOT_FOUND
        inline = await tasks.call("quick", {"n": 6})
        assert "taskId" not in inline
        assert text(inline) == "counted to 6"
        error = await mcp_error(client.call_tool("required_job", {}))
        assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY


# -- raw HTTP: the wire as the conformance harness sees it ---------------------------------------


async def test_create_task_result_is_flat_and_readable_at_once() -> None:
    host = HostApp()
    async with running(host) as url, raw_client(url) as raw:
        created = await raw.call("gated", {"label": "raw"})
        assert created.status == 200
        assert created.content_type.startswith("application/json")
        result = created.result
        assert result["resultType"] == "task"
        assert set(result) - {"statusMessage", "_meta"} == {
            "resultType",
            "taskId",
            "status",
            "createdAt",
            "lastUpdatedAt",
            "ttlMs",
            "pollIntervalMs",
        }
        # Durable create: an immediate tasks/get (no pause) finds it.
        got = await raw.send("tasks/get", {"taskId": result["taskId"]})
        assert got.status == 200
        assert got.result["taskId"] == result["taskId"]
        assert got.result["resultType"] == "complete"
        host.release("raw")
        done = await raw.finish(result["taskId"])
        assert text(done["result"]) == "raw: done"

        # A synchronous tool with the extension declared is still synchronous.
        greeting = await raw.call("greet", {"name": "sep-2243"})
        assert greeting.result["resultType"] == "complete"
        assert greeting.result["content"][0]["text"] == "Hello, sep-2243!"

        # A v1-style top-level `task` param is ignored: no error, and the opt-in alone decides.
        hint = {"ttl": 60000, "pollInterval": 100}
        plain = await raw.call("greet", {"name": "legacy-hint"}, task=hint)
        assert plain.result["resultType"] == "complete"
        assert "taskId" not in plain.result
        hinted = await raw.call("quick", {"n": 1}, task=hint)
        assert hinted.result["resultType"] == "task"
        assert hinted.result["ttlMs"] == 3_600_000
        inline = await raw.send(
            "tools/call", {"name": "quick", "arguments": {"n": 1}, "task": hint}, capabilities={}
        )
        assert inline.result["resultType"] == "complete"
        assert text(inline.result) == "counted to 1"


async def test_error_codes_and_http_statuses() -> None:
    host = HostApp()
    async with running(host) as url, raw_client(url) as raw:
        task_id = (await raw.call("gated", {"label": "errors"})).result["taskId"]

        # required task tool without the extension
        required = await raw.send("tools/call", {"name": "required_job", "arguments": {}}, capabilities={})
        assert (required.status, required.error["code"]) == (400, MISSING_REQUIRED_CLIENT_CAPABILITY)
        assert required.error["data"] == MISSING_TASKS_DATA

        # tasks/* without the extension in this request (a real id: gating comes first)
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
            ("tasks/cancel", {"taskId": task_id}),
        ):
            refused = await raw.send(method, params, capabilities={})
            assert (refused.status, refused.error["code"]) == (400, MISSING_REQUIRED_CLIENT_CAPABILITY), (
                method
            )
            assert refused.error["data"] == MISSING_TASKS_DATA

        # unknown task id
        for method, params in (
            ("tasks/get", {"taskId": "tasks-conformance-nonexistent-12345"}),
            ("tasks/update", {"taskId": "tasks-conformance-nonexistent-12345", "inputResponses": {}}),
            ("tasks/cancel", {"taskId": "tasks-conformance-nonexistent-12345"}),
        ):
            unknown = await raw.send(method, params)
            assert unknown.error["code"] == INVALID_PARAMS, method
            assert unknown.status == 400

        # removed methods
        for method, params in (("tasks/list", {}), ("tasks/result", {"taskId": task_id})):
            removed = await raw.send(method, params)
            assert (removed.status, removed.error["code"]) == (404, METHOD_NOT_FOUND), method

        # Mcp-Name mismatched or missing on tasks/*
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
            ("tasks/cancel", {"taskId": task_id}),
        ):
            mismatched = await raw.send(
                method, params, headers={"Mcp-Name": "sep-2663-wrong-task-id-for-routing-header-mismatch"}
            )
            assert (mismatched.status, mismatched.error["code"]) == (400, HEADER_MISMATCH), method
            missing = await raw.send(method, params, headers={"Mcp-Name": None})
            assert (missing.status, missing.error["code"]) == (400, HEADER_MISMATCH), method

        # malformed params
        for method, params in (
            ("tasks/update", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": ["not", "an", "object"]}),
            ("tasks/get", {"taskId": 42}),
            ("tasks/cancel", {}),
        ):
            malformed = await raw.send(method, params)
            assert malformed.error["code"] == INVALID_PARAMS, (method, params)

        # Mcp-Method mismatched: a tasks/get body sent as tasks/cancel
        wrong_method = await raw.send(
            "tasks/get", {"taskId": task_id}, headers={"Mcp-Method": "tasks/cancel"}
        )
        assert (wrong_method.status, wrong_method.error["code"]) == (400, HEADER_MISMATCH)

        # Matching routing headers work, header names are case-insensitive; nothing above changed the task.
        fine = await raw.send("tasks/get", {"taskId": task_id}, headers={"mcp-name": task_id})
        assert fine.status == 200
        assert fine.result["status"] == "working"
        host.release("errors")
        assert (await raw.finish(task_id))["status"] == "completed"


async def test_acks_are_bare_and_poll_limit_rejections_carry_retry_after() -> None:
    host = HostApp(poll_limit="reject")

    @host.app.task_tool(poll_interval=60)
    async def patient(label: str):
        """Poll me at most once a minute."""
        yield f"{label}: waiting"
        await host.gate(label).wait()
        yield Result(f"{label}: done")

    async with running(host) as url, raw_client(url) as raw:
        task_id = (await raw.call("patient", {"label": "slow"})).result["taskId"]
        first = await raw.send("tasks/get", {"taskId": task_id})
        assert first.result["pollIntervalMs"] == 60_000
        too_soon = await raw.send("tasks/get", {"taskId": task_id})
        assert too_soon.error["code"] == -32000
        assert 0 < too_soon.error["data"]["retryAfterMs"] <= 30_000

        update = await raw.send("tasks/update", {"taskId": task_id, "inputResponses": {"nothing": {}}})
        assert set(update.result) - {"_meta"} == {"resultType"}
        assert update.result["resultType"] == "complete"
        cancel = await raw.send("tasks/cancel", {"taskId": task_id})
        assert set(cancel.result) - {"_meta"} == {"resultType"}
        # Terminal tasks are never throttled.
        assert (await raw.send("tasks/get", {"taskId": task_id})).result["status"] == "cancelled"
        assert (await raw.send("tasks/get", {"taskId": task_id})).result["status"] == "cancelled"


async def test_mrtr_before_the_task_over_raw_http() -> None:
    host = HostApp()
    async with running(host) as url, raw_client(url, capabilities=ELICITING) as raw:
        first = await raw.call("before")
        assert first.status == 200
        round1 = first.result
        assert round1["resultType"] == "input_required"
        assert "taskId" not in round1
        assert round1["inputRequests"]["user_name"]["method"] == "elicitation/create"
        state = round1["requestState"]
        assert isinstance(state, str) and state
        answers = {"user_name": accept(name="Alice")}

        tampered = await raw.call("before", inputResponses=answers, requestState=state + "-TAMPERED")
        assert "error" in tampered.message and "result" not in tampered.message

        other_tool = await raw.call("required_job", inputResponses=answers, requestState=state)
        assert "error" in other_tool.message

        second = await raw.call("before", inputResponses=answers, requestState=state)
        created = second.result
        assert created["resultType"] == "task"
        assert "requestState" not in created and "inputRequests" not in created
        done = await raw.finish(created["taskId"])
        assert text(done["result"]) == "Hello, Alice!"


async def test_mcptasks_rejects_a_tampered_request_state_when_the_sdk_does_not_seal_it() -> None:
    host = HostApp()
    # Without the SDK's sealing boundary, mcptasks' own signed state travels as is.
    host.mcp.middleware[:] = [m for m in host.mcp.middleware if not isinstance(m, RequestStateBoundary)]
    async with running(host) as url, raw_client(url, capabilities=ELICITING) as raw:
        state = (await raw.call("before")).result["requestState"]
        assert not state.startswith("v1.")
        body, signature = state.split(".")
        answers = {"user_name": accept(name="Mallory")}

        forged = await raw.call("before", inputResponses=answers, requestState=f"{body}x.{signature}")
        assert forged.error["code"] == INVALID_PARAMS
        assert forged.status == 400

        # The state is bound to the tool and its exact arguments.
        replayed = await raw.call("before", {"extra": 1}, inputResponses=answers, requestState=state)
        assert replayed.error["code"] == INVALID_PARAMS

        created = (await raw.call("before", inputResponses=answers, requestState=state)).result
        assert created["resultType"] == "task"
        assert text((await raw.finish(created["taskId"]))["result"]) == "Hello, Mallory!"


async def test_a_base64_wrapped_mcp_name_is_decoded_on_tasks_methods() -> None:
    host = HostApp()
    async with running(host) as url:
        async with raw_client(url) as raw:
            task_id = (await raw.call("quick")).result["taskId"]
            wrapped = "=?base64?" + base64.b64encode(task_id.encode()).decode("ascii") + "?="
            got = await raw.send("tasks/get", {"taskId": task_id}, headers={"Mcp-Name": wrapped})
            assert got.status == 200, got.message
            assert got.result["taskId"] == task_id
        # The SDK client wraps a non-ASCII id itself: the answer must be "unknown task", not a header error.
        async with Client(
            url, extensions=[tasks_extension()], elicitation_callback=answered_by_hand
        ) as client:
            error = await mcp_error(Tasks(client).get("tâche-inconnue"))
            assert error.code == INVALID_PARAMS


# -- stdio ------------------------------------------------------------------------------------


async def test_stdio_cli_serves_the_conformance_example_to_completion() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcptasks", "serve", "examples/conformance_server.py"],
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as errlog:
        with anyio.fail_after(60):
            async with Client(
                stdio_client(params, errlog=errlog),
                extensions=[tasks_extension()],
                elicitation_callback=answered_by_hand,
            ) as client:
                assert client.protocol_version == "2026-07-28"
                assert client.server_capabilities.extensions == {EXTENSION_ID: {}}
                tasks = Tasks(client)
                task_id = (await tasks.start("confirm_delete", {"filename": "stdio.txt"}))["taskId"]
                (key,) = (await tasks.wait_input(task_id, count=1))["inputRequests"]
                assert await tasks.update(task_id, {key: accept(confirm=True)}) == {"resultType": "complete"}
                done = await tasks.finish(task_id)
                assert done["status"] == "completed"
                assert text(done["result"]) == "deleted stdio.txt"
        errlog.seek(0)
        assert "Traceback" not in errlog.read()
