"""`TasksProtocol`: per-request opt-in, gating, params validation, routing headers and result shapes."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from helpers import OPTED_IN_META, Client, accept, opted_in_meta, parse_iso, serve, text_of, wait_for_input

from mcptasks import Accepted, Answer, Elicit, MemoryTaskStore, ProtocolError, Result, task_tool
from mcptasks.lowlevel import TaskEngine, TasksProtocol
from mcptasks.wire import EXTENSION_ID

pytestmark = pytest.mark.anyio

ACK = {"resultType": "complete"}
MISSING_CAPABILITY_DATA = {"requiredCapabilities": {"extensions": {EXTENSION_ID: {}}}}
TASK_FIELDS = {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
NEVER_IN_CREATE = {"result", "error", "inputRequests", "requestState"}


@task_tool(poll_interval=0.5, ttl=120)
async def optional_tool(n: int = 1):
    """Optional task support."""
    yield f"n={n}"
    yield Result(n)


@task_tool(task_support="required")
async def required_tool():
    yield Result("required ran")


@task_tool
async def asking():
    first = yield Elicit("first?")
    second = yield Elicit("second?")
    yield Result([_data(first), _data(second)])


def _data(answer: Answer[dict[str, Any]]) -> dict[str, Any] | None:
    return answer.data if isinstance(answer, Accepted) else None


@task_tool
async def parked():
    await anyio.sleep_forever()
    yield Result(None)  # pragma: no cover


@task_tool
async def failing():
    yield "failing"
    raise ProtocolError(-32000, "broken")


@task_tool
async def a_few_turns():
    for _ in range(3):
        await anyio.lowlevel.checkpoint()
    yield Result("done")


TOOLS = (optional_tool, required_tool, asking, parked, failing, a_few_turns)


def meta_variants_without_opt_in() -> list[Any]:
    return [
        None,
        {},
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/clientCapabilities": {"extensions": {}}},
        {"io.modelcontextprotocol/clientCapabilities": {"extensions": [EXTENSION_ID]}},
        {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.example/other": {}}}},
        {"io.modelcontextprotocol/clientCapabilities": {"extensions": None}},
        {"io.modelcontextprotocol/clientCapabilities": [EXTENSION_ID]},
        {"extensions": {EXTENSION_ID: {}}},
        {EXTENSION_ID: {}},
    ]


async def raises(awaitable: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        await awaitable
    return info.value


# -- opt-in and gating on tools/call ---------------------------------------------------------


@pytest.mark.parametrize("meta", meta_variants_without_opt_in())
async def test_optional_tool_without_opt_in_runs_inline(meta: Any) -> None:
    store = MemoryTaskStore()
    async with serve(*TOOLS, store=store) as (_, protocol):
        result = await protocol.call_tool("optional_tool", {"n": 5}, meta=meta)
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"result": 5}
    assert len(store) == 0


@pytest.mark.parametrize("meta", meta_variants_without_opt_in())
async def test_required_tool_without_opt_in_is_32021(meta: Any) -> None:
    store = MemoryTaskStore()
    async with serve(*TOOLS, store=store) as (_, protocol):
        error = await raises(protocol.call_tool("required_tool", {}, meta=meta))
    assert error.code == -32021
    assert error.data == MISSING_CAPABILITY_DATA
    assert EXTENSION_ID in error.message
    assert len(store) == 0


async def test_required_tool_with_opt_in_creates_a_task(meta: dict[str, Any]) -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("required_tool", {}, meta=meta)
        assert created["resultType"] == "task"
        final = await Client(protocol).finish(created["taskId"])
    assert text_of(final["result"]) == "required ran"


async def test_opt_in_is_per_request_never_remembered() -> None:
    store = MemoryTaskStore()
    async with serve(*TOOLS, store=store) as (_, protocol):
        created = await protocol.call_tool("optional_tool", {}, meta=opted_in_meta())
        assert created["resultType"] == "task"
        inline = await protocol.call_tool("optional_tool", {}, meta={})
        assert inline["resultType"] == "complete"
        error = await raises(protocol.call_tool("required_tool", {}, meta={}))
        assert error.code == -32021
        error = await raises(protocol.handle("tasks/get", {"taskId": created["taskId"]}))
        assert error.code == -32021
    assert len(store) == 1


async def test_opt_in_meta_with_extra_content_still_counts() -> None:
    meta = {
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {EXTENSION_ID: {"someSetting": True}, "io.example/other": {}},
            "elicitation": {},
        },
        "progressToken": 7,
    }
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("optional_tool", {}, meta=meta)
    assert created["resultType"] == "task"


async def test_tasks_not_allowed_never_creates_tasks() -> None:
    store = MemoryTaskStore()
    async with serve(*TOOLS, store=store) as (_, protocol):
        inline = await protocol.call_tool(
            "optional_tool", {"n": 2}, meta=opted_in_meta(), tasks_allowed=False
        )
        error = await raises(
            protocol.call_tool("required_tool", {}, meta=opted_in_meta(), tasks_allowed=False)
        )
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            refused = await raises(
                protocol.handle(method, {"taskId": "x", "_meta": opted_in_meta()}, tasks_allowed=False)
            )
            assert refused.code == -32601
    assert inline["resultType"] == "complete"
    assert inline["structuredContent"] == {"result": 2}
    assert error.code == -32021
    assert len(store) == 0


async def test_tasks_not_allowed_input_is_unsupported() -> None:
    # A legacy connection has no input_required rounds: no question can reach the client.
    meta = {
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION_ID: {}}, "elicitation": {}}
    }
    async with serve(*TOOLS) as (_, protocol):
        result = await protocol.call_tool("asking", {}, meta=meta, tasks_allowed=False)
    assert result["resultType"] == "complete"
    assert result["isError"] is False
    assert result["structuredContent"] == {"result": [None, None]}


async def test_unknown_tool_is_32602() -> None:
    async with serve(*TOOLS) as (_, protocol):
        error = await raises(protocol.call_tool("nope", {}, meta=opted_in_meta()))
    assert error.code == -32602
    assert "nope" in error.message


@pytest.mark.parametrize("tool", ["optional_tool", "required_tool"])
async def test_invalid_arguments_give_a_tool_error_and_no_task(tool: str) -> None:
    store = MemoryTaskStore()
    async with serve(*TOOLS, store=store) as (_, protocol):
        arguments = {"n": "lots"} if tool == "optional_tool" else []
        result = await protocol.call_tool(tool, arguments, meta=opted_in_meta())  # type: ignore[arg-type]
    assert result["resultType"] == "complete"
    assert result["isError"] is True
    assert ("n" if tool == "optional_tool" else "object") in text_of(result)
    assert len(store) == 0


def test_add_tool_rejects_duplicates_and_non_tools() -> None:
    protocol = TasksProtocol(TaskEngine(), [optional_tool])
    protocol.add_tool(optional_tool)  # the same tool again is fine

    @task_tool(name="optional_tool")
    async def impostor():
        yield Result(None)

    with pytest.raises(ValueError, match="already registered"):
        protocol.add_tool(impostor)
    with pytest.raises(TypeError, match="task_tool"):
        protocol.add_tool(lambda: None)  # type: ignore[arg-type]
    assert protocol.get_tool("optional_tool") is optional_tool
    assert protocol.get_tool("missing") is None


# -- CreateTaskResult ------------------------------------------------------------------------


async def test_create_task_result_has_exactly_the_task_fields(meta: dict[str, Any]) -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("optional_tool", {"n": 1}, meta=meta)
    assert created["resultType"] == "task"
    assert {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"} <= set(created)
    assert set(created) - {"resultType"} <= TASK_FIELDS
    assert not set(created) & NEVER_IN_CREATE
    assert created["status"] == "working"
    assert created["ttlMs"] == 120_000
    assert created["pollIntervalMs"] == 500
    assert parse_iso(created["lastUpdatedAt"]) >= parse_iso(created["createdAt"])


async def test_create_task_result_never_carries_input_or_result() -> None:
    async with serve(*TOOLS) as (_, protocol):
        for name in ("asking", "failing", "optional_tool"):
            created = await protocol.call_tool(name, {}, meta=opted_in_meta())
            assert not set(created) & NEVER_IN_CREATE, created


async def test_created_task_is_readable_by_tasks_get_at_once() -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("parked", {}, meta=opted_in_meta())
        task = await Client(protocol).get(created["taskId"])
    assert task["taskId"] == created["taskId"]
    assert task["createdAt"] == created["createdAt"]
    assert task["ttlMs"] == created["ttlMs"]


async def test_work_before_the_first_yield_does_not_delay_tools_call() -> None:
    release = anyio.Event()

    @task_tool
    async def slow_start():
        await release.wait()
        yield Result("started late")

    async with serve(slow_start) as (_, protocol):
        created: list[dict[str, Any]] = []

        async def call() -> None:
            created.append(await protocol.call_tool("slow_start", {}, meta=opted_in_meta()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            assert len(created) == 1, "tools/call waited for the body"
            release.set()
        final = await Client(protocol).finish(created[0]["taskId"])
    assert text_of(final["result"]) == "started late"


async def test_immediate_result_for_a_body_that_never_suspends(meta: dict[str, Any]) -> None:
    async with serve(*TOOLS, immediate_results=True) as (_, protocol):
        result = await protocol.call_tool("optional_tool", {"n": 4}, meta=meta)
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"result": 4}
    assert result["isError"] is False


async def test_immediate_results_never_wait_for_a_suspended_body(meta: dict[str, Any]) -> None:
    async with serve(*TOOLS, immediate_results=True) as (_, protocol):
        for name in ("parked", "asking"):
            created = await protocol.call_tool(name, {}, meta=meta)
            assert created["resultType"] == "task"
            assert not set(created) & NEVER_IN_CREATE


@task_tool
async def next_tick():
    loop = asyncio.get_running_loop()
    tick = loop.create_future()
    loop.call_soon(tick.set_result, None)
    await tick  # resolved on the loop's very next turn: still waiting on the loop, not a checkpoint
    yield Result("ticked")


async def test_a_body_waiting_on_a_future_is_answered_with_its_task_at_once(
    anyio_backend: str, meta: dict[str, Any]
) -> None:
    # On asyncio the engine sees the body suspend on a future (I/O, a sleep, a thread) and stops
    # waiting for an immediate result then, however soon the future resolves; a bare checkpoint
    # (`a_few_turns`) still gets the window's scheduler turns.
    if anyio_backend != "asyncio":
        pytest.skip("asyncio futures: trio gives such a body the window's scheduler turns")
    async with serve(*TOOLS, next_tick, immediate_results=True) as (_, protocol):
        waiting = await protocol.call_tool("next_tick", {}, meta=meta)
        turns = await protocol.call_tool("a_few_turns", {}, meta=meta)
        final = await Client(protocol).finish(waiting["taskId"])
    assert waiting["resultType"] == "task"
    assert turns["resultType"] == "complete"
    assert text_of(final["result"]) == "ticked"


async def test_immediate_results_are_the_protocol_default(meta: dict[str, Any]) -> None:
    engine = TaskEngine()
    protocol = TasksProtocol(engine, [optional_tool])
    async with engine:
        result = await protocol.call_tool("optional_tool", {"n": 6}, meta=meta)
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"result": 6}


# -- tasks/get shapes ------------------------------------------------------------------------


def check_task_fields(task: dict[str, Any]) -> None:
    assert task["resultType"] == "complete"
    created, updated = parse_iso(task["createdAt"]), parse_iso(task["lastUpdatedAt"])
    assert updated >= created
    assert created.utcoffset() is not None  # the zone is explicit


async def test_tasks_get_working() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        task = await client.get(await client.start("parked"))
    check_task_fields(task)
    assert task["status"] == "working"
    assert set(task) - {"resultType"} <= TASK_FIELDS


async def test_polling_in_a_tight_loop_in_process_does_not_starve_the_body() -> None:
    # `handle` yields to other tasks before reading the store, even on the memory store, which
    # answers without suspending; a request read from a transport need not (`over_transport`).
    async with serve(*TOOLS) as (_, protocol):
        params = {"taskId": await Client(protocol).start("a_few_turns"), "_meta": opted_in_meta()}
        for _ in range(1000):
            task = await protocol.handle("tasks/get", params)
            if task["status"] == "completed":
                break
        assert task["status"] == "completed"
        assert await protocol.handle("tasks/get", params, over_transport=True) == task


async def test_tasks_get_completed_inlines_the_result() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        task = await client.finish(await client.start("optional_tool", {"n": 9}))
    check_task_fields(task)
    assert task["status"] == "completed"
    assert task["result"]["resultType"] == "complete"
    assert task["result"]["structuredContent"] == {"result": 9}
    assert "error" not in task and "inputRequests" not in task


async def test_tasks_get_failed_inlines_the_error() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        task = await client.finish(await client.start("failing"))
    check_task_fields(task)
    assert task["status"] == "failed"
    assert task["error"] == {"code": -32000, "message": "broken"}
    assert "result" not in task and "inputRequests" not in task


async def test_tasks_get_input_required_shows_only_outstanding_requests() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("asking")
        first = await client.answer_only(task_id, accept({"a": 1}))
        task = await wait_for_input(protocol, task_id, excluding=[first])
        await client.cancel(task_id)
    check_task_fields(task)
    (request,) = task["inputRequests"].values()
    assert request["params"]["message"] == "second?"
    assert "result" not in task and "error" not in task


async def test_tasks_get_cancelled_has_no_payload() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("parked")
        assert await client.cancel(task_id) == ACK
        task = await client.get(task_id)
    check_task_fields(task)
    assert task["status"] == "cancelled"
    assert not set(task) & {"result", "error", "inputRequests"}


async def test_acks_are_exactly_result_type_complete() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("asking")
        (key,) = await client.input(task_id, count=1)
        assert await client.update(task_id, {key: accept({})}) == ACK
        assert await client.update(task_id, {}) == ACK
        assert await client.cancel(task_id) == ACK
        assert await client.cancel(task_id) == ACK


# -- tasks/* gating and params ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@pytest.mark.parametrize("meta", meta_variants_without_opt_in())
async def test_tasks_methods_without_opt_in_are_32021_before_the_id_lookup(method: str, meta: Any) -> None:
    params: dict[str, Any] = {"taskId": "no-such-task", "inputResponses": {}}
    if meta is not None:
        params["_meta"] = meta
    async with serve(*TOOLS) as (_, protocol):
        error = await raises(protocol.handle(method, params))
    assert error.code == -32021
    assert error.data == MISSING_CAPABILITY_DATA


async def test_tasks_methods_accept_meta_passed_by_the_host() -> None:
    async with serve(*TOOLS) as (_, protocol):
        task_id = await Client(protocol).start("parked")
        task = await protocol.handle("tasks/get", {"taskId": task_id}, meta=OPTED_IN_META)
    assert task["status"] == "working"


@pytest.mark.parametrize("method", ["tasks/list", "tasks/result", "tasks/delete", "tools/list", "tasks/"])
async def test_removed_and_unknown_methods_are_32601(method: str) -> None:
    async with serve(*TOOLS) as (_, protocol):
        with_opt_in = await raises(protocol.handle(method, {"taskId": "x", "_meta": opted_in_meta()}))
        without = await raises(protocol.handle(method, {"taskId": "x"}))
    assert with_opt_in.code == without.code == -32601
    assert method in with_opt_in.message


MALFORMED = [
    ("tasks/get", {}, "taskId"),
    ("tasks/get", {"taskId": 5}, "taskId"),
    ("tasks/get", {"taskId": None}, "taskId"),
    ("tasks/get", {"taskId": ["id"]}, "taskId"),
    ("tasks/get", {"taskId": ""}, "taskId"),
    ("tasks/cancel", {}, "taskId"),
    ("tasks/cancel", {"taskId": 1.5}, "taskId"),
    ("tasks/update", {"inputResponses": {}}, "taskId"),
    ("tasks/update", {"taskId": "TASK"}, "inputResponses"),
    ("tasks/update", {"taskId": "TASK", "inputResponses": []}, "inputResponses"),
    ("tasks/update", {"taskId": "TASK", "inputResponses": "yes"}, "inputResponses"),
    ("tasks/update", {"taskId": "TASK", "inputResponses": None}, "inputResponses"),
]


@pytest.mark.parametrize(("method", "params", "field"), MALFORMED)
async def test_malformed_params_are_32602_naming_the_field_and_change_nothing(
    method: str, params: dict[str, Any], field: str
) -> None:
    async with serve(*TOOLS) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("asking")
        await client.input(task_id, count=1)
        before = await engine.get(task_id, owner=client.owner)
        filled = {k: (task_id if v == "TASK" else v) for k, v in params.items()}
        error = await raises(protocol.handle(method, {**filled, "_meta": opted_in_meta()}))
        after = await engine.get(task_id, owner=client.owner)
    assert error.code == -32602
    assert field in error.message
    assert after == before


@pytest.mark.parametrize("params", [["taskId", "x"], "taskId=x", 42])
async def test_params_that_are_not_an_object_are_32602(params: Any) -> None:
    async with serve(*TOOLS) as (_, protocol):
        error = await raises(protocol.handle("tasks/get", params))
    assert error.code == -32602
    assert "params" in error.message


async def test_unknown_task_is_32602() -> None:
    async with serve(*TOOLS) as (_, protocol):
        client = Client(protocol)
        for operation in (client.get, client.cancel, lambda t: client.update(t, {})):
            error = await raises(operation("no-such-task"))
            assert error.code == -32602


# -- routing headers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_headers",
    [
        lambda t, m: {"Mcp-Name": t, "Mcp-Method": m},
        lambda t, m: {"mcp-name": t},
        lambda t, m: {"MCP-NAME": t, "MCP-METHOD": m},
        lambda t, m: {"Mcp-Name": f"  {t}\t", "Mcp-Method": f" {m} "},
        lambda t, m: {"Mcp-Name": t, "Content-Type": "application/json"},
    ],
    ids=["canonical", "lower", "upper", "whitespace", "extra"],
)
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_matching_routing_headers_are_accepted(make_headers: Any, method: str) -> None:
    async with serve(*TOOLS) as (_, protocol):
        task_id = await Client(protocol).start("parked")
        params = {"taskId": task_id, "inputResponses": {}, "_meta": opted_in_meta()}
        result = await protocol.handle(method, params, headers=make_headers(task_id, method))
    assert result["resultType"] == "complete"


@pytest.mark.parametrize(
    "make_headers",
    [
        lambda t, m: {"Mcp-Name": t + "x", "Mcp-Method": m},
        lambda t, m: {"Mcp-Name": "", "Mcp-Method": m},
        lambda t, m: {"Mcp-Name": t.upper() if t != t.upper() else t.lower()},
        lambda t, m: {"Mcp-Method": m},
        lambda t, m: {},
        lambda t, m: {"Mcp-Name": t, "Mcp-Method": "tools/call"},
    ],
    ids=["other-id", "empty", "case-changed-id", "missing-name", "no-headers", "wrong-method"],
)
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_mismatched_routing_headers_are_32020_and_change_nothing(
    make_headers: Any, method: str
) -> None:
    async with serve(*TOOLS) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("asking")
        (key,) = await client.input(task_id, count=1)
        before = await engine.get(task_id, owner=client.owner)
        params = {"taskId": task_id, "inputResponses": {key: accept({})}, "_meta": opted_in_meta()}
        error = await raises(protocol.handle(method, params, headers=make_headers(task_id, method)))
        after = await engine.get(task_id, owner=client.owner)
    assert error.code == -32020
    assert after == before


async def test_headers_none_skips_the_check() -> None:
    async with serve(*TOOLS) as (_, protocol):
        task_id = await Client(protocol).start("parked")
        task = await protocol.handle("tasks/get", {"taskId": task_id, "_meta": opted_in_meta()}, headers=None)
    assert task["taskId"] == task_id


async def test_header_mismatch_on_an_unknown_task_is_still_32020() -> None:
    async with serve(*TOOLS) as (_, protocol):
        params = {"taskId": "no-such-task", "_meta": opted_in_meta()}
        mismatch = await raises(protocol.handle("tasks/get", params, headers={"Mcp-Name": "other"}))
        matching = await raises(protocol.handle("tasks/get", params, headers={"Mcp-Name": "no-such-task"}))
    assert (mismatch.code, matching.code) == (-32020, -32602)
