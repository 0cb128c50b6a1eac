"""Input only through the client capabilities a request declared, on every path: a task (also when
another engine runs it), the fallback tools mode, inline calls, legacy connections."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import Client, accept, serve, text_of, wait_for, wait_for_input

from mcptasks import (
    Accepted,
    Elicit,
    EngineConfig,
    Inputs,
    ListRoots,
    MemoryTaskStore,
    ProtocolError,
    Result,
    Sample,
    TaskContext,
    Unsupported,
    task_tool,
)
from mcptasks.authoring import Roots
from mcptasks.lowlevel import TaskEngine, TasksProtocol
from mcptasks.wire import CLIENT_CAPABILITIES_META, EXTENSION_ID, MISSING_REQUIRED_CLIENT_CAPABILITY

pytestmark = pytest.mark.anyio


def meta(*capabilities: str, tasks: bool = True, **values: Any) -> dict[str, Any]:
    """A request `_meta` declaring `capabilities` (as `{}`, or `values[name]`) and the extension."""
    declared: dict[str, Any] = {name: values.get(name, {}) for name in capabilities}
    if tasks:
        declared["extensions"] = {EXTENSION_ID: {}}
    return {CLIENT_CAPABILITIES_META: declared}


async def raises(awaitable: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        await awaitable
    return info.value


@task_tool(poll_interval=0.05)
async def approve():
    """An approval gate."""
    answer = yield Elicit("Publish?")
    if isinstance(answer, Unsupported):
        yield Result(f"unsupported: {answer.capability} for {answer.method}")
    yield Result("published" if isinstance(answer, Accepted) else "not published")


@task_tool(poll_interval=0.05)
async def must_ask():
    """An approval that cannot be skipped."""
    answer = yield Elicit("Really?", required=True)
    yield Result(answer.action)


@task_tool(poll_interval=0.05)
async def mixed():
    """Elicitation and sampling at once."""
    confirm, sample = yield Inputs(Elicit("Go?"), Sample("Say hi"))
    yield Result([confirm.action, isinstance(sample, Unsupported)])


@task_tool(poll_interval=0.05)
async def asks_then_samples():
    """A declared question, then, once it is answered, an undeclared one."""
    confirm = yield Elicit("Go?")
    sample = yield Sample("Say hi")
    yield Result([confirm.action, isinstance(sample, Unsupported)])


@task_tool(poll_interval=0.05)
async def imperative(ctx: TaskContext) -> str:
    """The same rule through `TaskContext`."""
    roots = await ctx.list_roots()
    sample = await ctx.sample("hi")
    return f"{type(roots).__name__} {type(sample).__name__}"


RAN: list[str] = []


@task_tool(poll_interval=0.05, required_capabilities=["sampling", "elicitation"])
async def needs_sampling():
    """Declares its capabilities up front."""
    RAN.append("needs_sampling")
    reply = yield Sample("hi")
    yield Result(reply.text)


TOOLS = (approve, must_ask, mixed, asks_then_samples, imperative, needs_sampling)


async def finish(protocol: TasksProtocol, task_id: str) -> dict[str, Any]:
    return await wait_for(protocol, task_id, lambda t: t["status"] not in ("working", "input_required"))


# -- tasks ---------------------------------------------------------------------------------------


async def test_undeclared_elicitation_is_never_sent_and_reads_as_unsupported() -> None:
    async with serve(*TOOLS) as (engine, protocol):
        created = await protocol.call_tool("approve", {}, meta=meta())
        done = await finish(protocol, created["taskId"])
        record = await engine.get(created["taskId"], owner="anonymous")
    assert done["status"] == "completed"
    assert text_of(done["result"]) == "unsupported: elicitation for elicitation/create"
    assert record.client_capabilities == {}
    assert record.input_key_counter == 0  # no request was ever issued


async def test_declared_elicitation_is_asked_and_remembered_with_the_task() -> None:
    async with serve(*TOOLS) as (engine, protocol):
        created = await protocol.call_tool(
            "approve", {}, meta=meta("elicitation", "sampling", "roots", roots={"listChanged": True})
        )
        record = await engine.get(created["taskId"], owner="anonymous")
        waiting = await wait_for_input(protocol, created["taskId"], count=1)
        (key,) = waiting["inputRequests"]
        await Client(protocol).update(created["taskId"], {key: accept({})})
        done = await finish(protocol, created["taskId"])
    assert record.client_capabilities == {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
    assert text_of(done["result"]) == "published"


async def test_url_only_elicitation_does_not_cover_a_form() -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("approve", {}, meta=meta("elicitation", elicitation={"url": {}}))
        done = await finish(protocol, created["taskId"])
    assert text_of(done["result"]).startswith("unsupported")


async def test_a_required_request_fails_the_task_with_32021_naming_the_capability() -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("must_ask", {}, meta=meta("sampling"))
        done = await finish(protocol, created["taskId"])
    assert done["status"] == "failed"
    assert done["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert done["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}
    assert "must_ask" in done["error"]["message"]


async def test_only_the_declared_requests_of_several_are_sent() -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("mixed", {}, meta=meta("elicitation"))
        waiting = await wait_for_input(protocol, created["taskId"], count=1)
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        await Client(protocol).update(created["taskId"], {key: {"action": "decline"}})
        done = await finish(protocol, created["taskId"])
    assert done["result"]["structuredContent"] == {"result": ["decline", True]}


async def test_the_capabilities_still_apply_after_the_body_waited_for_an_answer() -> None:
    # The body waits for the first answer without its task; resumed, it is still gated.
    async with serve(*TOOLS) as (engine, protocol):
        created = await protocol.call_tool("asks_then_samples", {}, meta=meta("elicitation"))
        waiting = await wait_for_input(protocol, created["taskId"], count=1)
        (key,) = waiting["inputRequests"]
        await Client(protocol).update(created["taskId"], {key: accept({})})
        done = await finish(protocol, created["taskId"])
        record = await engine.get(created["taskId"], owner="anonymous")
    assert done["result"]["structuredContent"] == {"result": ["accept", True]}
    assert record.input_key_counter == 1  # the sampling request was never issued


async def test_task_context_helpers_get_unsupported_too() -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("imperative", {}, meta=meta("elicitation"))
        done = await finish(protocol, created["taskId"])
    assert text_of(done["result"]) == "Unsupported Unsupported"


async def test_a_worker_running_the_task_applies_the_capabilities_of_the_creating_call() -> None:
    store = MemoryTaskStore()
    serving = TaskEngine(store, config=EngineConfig(run_tasks=False, immediate_results=False))
    worker = TaskEngine(store, tools=[approve], config=EngineConfig(claim_interval=0.05))
    protocol = TasksProtocol(serving, [approve])
    async with serving, worker:
        without = await protocol.call_tool("approve", {}, meta=meta())
        with_it = await protocol.call_tool("approve", {}, meta=meta("elicitation"))
        done = await finish(protocol, without["taskId"])
        assert (await serving.get(without["taskId"], owner="anonymous")).runner == worker.instance_id
        waiting = await wait_for_input(protocol, with_it["taskId"], count=1)
        await protocol.engine.cancel(with_it["taskId"], owner="anonymous")
    assert text_of(done["result"]).startswith("unsupported")
    (request,) = waiting["inputRequests"].values()
    assert request["method"] == "elicitation/create"


async def test_tasks_created_without_capability_information_are_not_restricted() -> None:
    # engine.start without client_capabilities (embedding code, records from 0.1): asked as before.
    async with serve(*TOOLS) as (engine, protocol):
        record = await engine.start(approve, {}, owner="anonymous")
        assert record.client_capabilities is None
        waiting = await wait_for_input(protocol, record.task_id, count=1)
        await engine.cancel(record.task_id, owner="anonymous")
    assert len(waiting["inputRequests"]) == 1


@task_tool(input_before_task=True, poll_interval=0.05)
async def confirm_first():
    """Input before the task: a required question, then an optional one."""
    must = yield Elicit("Start?", before_task=True, required=True, key="start")
    maybe = yield Sample("hint?", before_task=True, key="hint")
    yield Result([must.action, isinstance(maybe, Unsupported)])


async def test_before_task_rounds_follow_the_same_rule() -> None:
    store = MemoryTaskStore()
    async with serve(confirm_first, store=store) as (_, protocol):
        refused = await raises(protocol.call_tool("confirm_first", {}, meta=meta("sampling")))
        assert len(store) == 0
        first = await protocol.call_tool("confirm_first", {}, meta=meta("elicitation"))
        assert list(first["inputRequests"]) == ["start"]  # the sampling question is not sent
        created = await protocol.call_tool(
            "confirm_first",
            {},
            meta=meta("elicitation"),
            input_responses={"start": accept({})},
            request_state=first["requestState"],
        )
        done = await finish(protocol, created["taskId"])
    assert refused.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.data == {"requiredCapabilities": {"elicitation": {}}}
    assert done["result"]["structuredContent"] == {"result": ["accept", True]}


# -- required capabilities declared by the tool ------------------------------------------------


@pytest.mark.parametrize("tasks", [True, False])
async def test_required_capabilities_refuse_the_call_before_any_work(tasks: bool) -> None:
    RAN.clear()
    store = MemoryTaskStore()
    async with serve(*TOOLS, store=store) as (_, protocol):
        error = await raises(protocol.call_tool("needs_sampling", {}, meta=meta("sampling", tasks=tasks)))
    assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"elicitation": {}}}
    assert "'elicitation'" in error.message
    assert RAN == []
    assert len(store) == 0


async def test_required_capabilities_declared_let_the_call_run() -> None:
    async with serve(*TOOLS) as (_, protocol):
        created = await protocol.call_tool("needs_sampling", {}, meta=meta("sampling", "elicitation"))
        assert created["resultType"] == "task"
        await wait_for_input(protocol, created["taskId"], count=1)
        await protocol.engine.cancel(created["taskId"], owner="anonymous")


async def test_required_capabilities_on_a_legacy_connection_are_32021() -> None:
    async with serve(*TOOLS) as (_, protocol):
        error = await raises(protocol.call_tool("needs_sampling", {}, meta=None, tasks_allowed=False))
    assert error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"sampling": {}, "elicitation": {}}}


def test_required_capabilities_are_validated() -> None:
    with pytest.raises(ValueError, match="required_capabilities"):

        @task_tool(required_capabilities=["telepathy"])  # type: ignore[list-item]
        async def bad():
            yield Result(None)


# -- the fallback tools mode: the model answers ------------------------------------------------


async def test_fallback_tools_tasks_may_ask_anything() -> None:
    engine = TaskEngine(MemoryTaskStore(), config=EngineConfig(fallback="tools"))
    protocol = TasksProtocol(engine, [approve, needs_sampling])
    async with engine:
        started = await protocol.call_tool("approve", {}, meta=None)
        task_id = started["structuredContent"]["taskId"]
        record = await engine.get(task_id, owner="anonymous")
        status = await wait_for(engine, task_id, lambda r: r.status == "input_required", what="the question")
        required = await protocol.call_tool("needs_sampling", {}, meta=None)
        await engine.cancel(task_id, owner="anonymous")
        await engine.cancel(required["structuredContent"]["taskId"], owner="anonymous")
    assert record.client_capabilities is None
    assert [r["method"] for r in status.input_requests.values()] == ["elicitation/create"]


# -- inline and legacy -----------------------------------------------------------------------


async def test_inline_without_the_capability_is_unsupported() -> None:
    async with serve(*TOOLS) as (_, protocol):
        result = await protocol.call_tool("approve", {}, meta=meta("sampling", tasks=False))
    assert text_of(result) == "unsupported: elicitation for elicitation/create"


async def test_inline_required_request_without_the_capability_is_32021() -> None:
    async with serve(*TOOLS) as (_, protocol):
        error = await raises(protocol.call_tool("must_ask", {}, meta=meta(tasks=False)))
        legacy = await raises(protocol.call_tool("must_ask", {}, meta=None, tasks_allowed=False))
    for refused in (error, legacy):
        assert refused.code == MISSING_REQUIRED_CLIENT_CAPABILITY
        assert refused.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_a_raw_request_of_another_method_is_still_a_tool_error_inline() -> None:
    from mcptasks.authoring import InputRequest

    @task_tool
    async def custom():
        yield InputRequest("x-example/pick")
        yield Result("never")

    async with serve(custom) as (_, protocol):
        result = await protocol.call_tool("custom", {}, meta=meta("elicitation", tasks=False))
    assert result["isError"] is True
    assert "x-example/pick" in text_of(result)


async def test_roots_unsupported_inline() -> None:
    @task_tool
    async def roots():
        listed = yield ListRoots()
        yield Result(isinstance(listed, Roots))

    async with serve(roots) as (_, protocol):
        result = await protocol.call_tool("roots", {}, meta=meta(tasks=False))
    assert result["structuredContent"] == {"result": False}


def test_unsupported_answer_shape() -> None:
    answer = Unsupported("elicitation/create", "elicitation")
    assert answer.action == "unsupported"
    assert not hasattr(answer, "data")  # only `Accepted` has data: narrow first
    match answer:
        case Unsupported(method, capability):
            assert (method, capability) == ("elicitation/create", "elicitation")
    assert answer == Unsupported("elicitation/create", "elicitation")
