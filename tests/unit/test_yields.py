"""Every kind of `yield` a task body can make, driven end to end through `tasks/get` and `tasks/update`."""

from __future__ import annotations

import copy
import json
from typing import Any

import anyio
import pytest
from helpers import Client, accept, serve, text_of, wait_for
from pydantic import BaseModel

from mcptasks import (
    Accepted,
    Answer,
    Cancelled,
    Declined,
    Elicit,
    Inputs,
    ListRoots,
    Result,
    Sample,
    TaskContext,
    task_tool,
)
from mcptasks.authoring import InputRequest, Root, Roots, Sampled, Status
from mcptasks.errors import InvalidAnswer

pytestmark = pytest.mark.anyio


class Confirm(BaseModel):
    confirm: bool
    note: str = ""


SAMPLE_ANSWER = {
    "role": "assistant",
    "content": {"type": "text", "text": "forty-two"},
    "model": "test-model",
    "stopReason": "endTurn",
}


# -- status ----------------------------------------------------------------------------------


async def test_str_and_status_yields_set_status_message() -> None:
    gate = anyio.Event()
    second = anyio.Event()

    @task_tool
    async def tool():
        yield "first"
        await gate.wait()
        yield Status("second")
        await second.wait()
        yield Result("done")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await _wait_message(client, task_id, "first")
        gate.set()
        await _wait_message(client, task_id, "second")
        second.set()
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    assert final["statusMessage"] == "second"


async def _wait_message(client: Client, task_id: str, message: str) -> None:
    await wait_for(client.protocol, task_id, lambda t: t.get("statusMessage") == message, what=message)


async def test_status_yield_evaluates_to_none() -> None:
    sent: list[Any] = []

    @task_tool
    async def tool():
        sent.append((yield "x"))
        sent.append((yield Status("y")))
        yield Result(None)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        await client.finish(await client.start("tool"))
    assert sent == [None, None]


# -- Elicit ----------------------------------------------------------------------------------


@task_tool
async def confirm_tool():
    answer: Answer[Confirm] = yield Elicit("Proceed?", schema=Confirm)
    match answer:
        case Accepted(data=data):
            yield Result({"action": answer.action, "data": data.model_dump()})
        case _:
            yield Result({"action": answer.action, "data": None})


async def test_elicit_request_on_the_wire() -> None:
    async with serve(confirm_tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("confirm_tool")
        (request,) = (await client.input(task_id, count=1)).values()
        await client.cancel(task_id)
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Proceed?"
    schema = request["params"]["requestedSchema"]
    assert schema["type"] == "object"
    assert schema["properties"]["confirm"]["type"] == "boolean"
    assert schema["required"] == ["confirm"]
    assert "title" not in schema


async def test_elicit_accept_gives_validated_model_instance() -> None:
    seen: list[Answer[Confirm]] = []

    @task_tool
    async def tool():
        answer = yield Elicit("Proceed?", schema=Confirm)
        seen.append(answer)
        yield Result("ok")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.answer_only(task_id, accept({"confirm": "true", "note": "hi"}))
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    (answer,) = seen
    assert isinstance(answer, Accepted)
    assert answer.action == "accept"
    assert isinstance(answer.data, Confirm)
    assert answer.data == Confirm(confirm=True, note="hi")
    assert answer.content == {"confirm": "true", "note": "hi"}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicit_decline_and_cancel(action: str) -> None:
    async with serve(confirm_tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("confirm_tool")
        await client.answer_only(task_id, {"action": action})
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    assert final["result"]["structuredContent"] == {"action": action, "data": None}


async def test_elicit_invalid_content_is_asked_again_under_a_new_key_with_the_reason() -> None:
    async with serve(confirm_tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("confirm_tool")
        first = await client.answer_only(task_id, accept({"confirm": "not-a-bool"}))
        retry = await client.input(task_id, count=1, excluding=[first])
        (second,) = retry
        message = retry[second]["params"]["message"]
        assert second != first
        assert message.startswith("Proceed?")
        assert "confirm" in message and "boolean" in message
        await client.update(task_id, {second: accept({"confirm": False})})
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {
        "action": "accept",
        "data": {"confirm": False, "note": ""},
    }


async def test_elicit_unknown_action_is_asked_again() -> None:
    async with serve(confirm_tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("confirm_tool")
        first = await client.answer_only(task_id, {"action": "maybe"})
        retry = await client.input(task_id, count=1, excluding=[first])
        (message,) = (r["params"]["message"] for r in retry.values())
        assert "maybe" in message
        await client.cancel(task_id)


async def test_repeated_rejections_do_not_stack_reasons() -> None:
    async with serve(confirm_tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("confirm_tool")
        seen: list[str] = []
        for _ in range(2):
            seen.append(await client.answer_only(task_id, accept({}), excluding=seen))
        retry = await client.input(task_id, count=1, excluding=seen)
        (message,) = (r["params"]["message"] for r in retry.values())
        await client.cancel(task_id)
    assert message.count("Previous answer rejected") == 1


async def test_a_question_answered_invalidly_three_times_fails_the_task() -> None:
    async with serve(confirm_tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("confirm_tool")
        seen: list[str] = []
        for _ in range(3):
            seen.append(await client.answer_only(task_id, accept({}), excluding=seen))
        done = await client.finish(task_id)
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32602
    assert "3 times" in done["error"]["message"]


async def test_elicit_with_dict_schema_gives_raw_content() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    seen: list[Any] = []

    @task_tool
    async def tool():
        answer = yield Elicit("Name?", schema=schema)
        seen.append(answer)
        yield Result(None)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (request,) = (await client.input(task_id, count=1)).values()
        assert request["params"]["requestedSchema"] == schema
        await client.answer_only(task_id, accept({"name": "Ada"}))
        await client.finish(task_id)
    assert seen == [Accepted(data={"name": "Ada"}, content={"name": "Ada"})]


def test_elicit_rejects_non_object_schema() -> None:
    with pytest.raises(ValueError, match="object"):
        Elicit("x", schema={"type": "string"})
    with pytest.raises(TypeError, match="schema"):
        Elicit("x", schema=int)  # type: ignore[arg-type]


def test_elicitations_of_one_model_share_one_read_only_schema() -> None:
    first, second = Elicit("a?", schema=Confirm), Elicit("b?", schema=Confirm)
    schema = first.params["requestedSchema"]
    assert second.params["requestedSchema"] is schema
    assert Elicit("c?").params["requestedSchema"] is Elicit("d?").params["requestedSchema"]
    assert json.loads(json.dumps(first.params)) == {
        "message": "a?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "confirm": {"title": "Confirm", "type": "boolean"},
                "note": {"default": "", "title": "Note", "type": "string"},
            },
            "required": ["confirm"],
        },
    }
    with pytest.raises(TypeError, match="shared"):
        schema["properties"]["note"]["default"] = "x"
    with pytest.raises(TypeError, match="shared"):
        schema["required"].append("note")
    mine = copy.deepcopy(schema)
    mine["required"].append("note")
    assert type(mine) is dict and type(mine["required"]) is list
    assert schema["required"] == ["confirm"]
    assert Elicit("e?", schema=Confirm).params["requestedSchema"]["required"] == ["confirm"]


def test_elicit_parse_unit() -> None:
    request = Elicit("Proceed?", schema=Confirm)
    assert request.parse({"action": "accept", "content": {"confirm": True}}).data == Confirm(confirm=True)
    assert request.parse({"action": "decline"}) == Declined()
    assert request.parse({"action": "cancel"}) == Cancelled()
    with pytest.raises(InvalidAnswer, match="confirm"):
        request.parse({"action": "accept", "content": {}})
    with pytest.raises(InvalidAnswer):
        request.parse("yes")
    with pytest.raises(InvalidAnswer):
        request.parse({"action": "accept", "content": ["x"]})


# -- Sample, ListRoots, raw requests ---------------------------------------------------------


async def test_sample_gives_sample_result_with_text() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool():
        answer = yield Sample("What is six times seven?", max_tokens=50, system_prompt="Be brief.")
        seen.append(answer)
        yield Result(answer.text)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (request,) = (await client.input(task_id, count=1)).values()
        await client.answer_only(task_id, SAMPLE_ANSWER)
        final = await client.finish(task_id)
    assert request == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "What is six times seven?"}}],
            "maxTokens": 50,
            "systemPrompt": "Be brief.",
        },
    }
    (answer,) = seen
    assert isinstance(answer, Sampled)
    assert (answer.text, answer.model, answer.stop_reason) == ("forty-two", "test-model", "endTurn")
    assert text_of(final["result"]) == "forty-two"


def test_sample_result_text_joins_text_blocks() -> None:
    result = Sampled(
        role="assistant",
        content=[{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
    )
    assert result.text == "ab"
    assert Sampled(role="assistant", content={"type": "image", "data": "x"}).text == ""


async def test_sample_invalid_answer_is_asked_again() -> None:
    @task_tool
    async def tool():
        answer = yield Sample("hi")
        yield Result(answer.text)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        first = await client.answer_only(task_id, {"no": "role"})
        await client.answer_only(task_id, SAMPLE_ANSWER, excluding=[first])
        final = await client.finish(task_id)
    assert text_of(final["result"]) == "forty-two"


async def test_list_roots_gives_roots() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool():
        answer = yield ListRoots()
        seen.append(answer)
        yield Result([r.uri for r in answer.roots])

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (request,) = (await client.input(task_id, count=1)).values()
        roots = {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]}
        await client.answer_only(task_id, roots)
        final = await client.finish(task_id)
    assert request == {"method": "roots/list", "params": {}}
    assert seen == [Roots([Root(uri="file:///a", name="A"), Root(uri="file:///b")])]
    assert final["result"]["structuredContent"] == {"result": ["file:///a", "file:///b"]}


async def test_raw_input_request_gives_the_raw_response() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool():
        answer = yield InputRequest("example/ask", {"question": 1}, key="custom")
        seen.append(answer)
        yield Result(None)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        requests = await client.input(task_id, count=1)
        (key,) = requests
        raw = {"anything": [1, {"goes": None}]}
        await client.update(task_id, {key: raw})
        await client.finish(task_id)
    assert requests[key] == {"method": "example/ask", "params": {"question": 1}}
    assert key.startswith("custom")
    assert seen == [raw]


def test_input_request_needs_a_method() -> None:
    with pytest.raises(ValueError, match="method"):
        InputRequest("")


# -- several requests at once ----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["inputs", "tuple", "list"])
async def test_several_requests_are_outstanding_together_and_answered_in_order(shape: str) -> None:
    seen: list[Any] = []

    @task_tool
    async def tool():
        requests = [Elicit("a?"), Sample("b?"), ListRoots()]
        item = Inputs(*requests) if shape == "inputs" else tuple(requests) if shape == "tuple" else requests
        answers = yield item
        seen.append(answers)
        yield Result("done")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        requests = await client.input(task_id, count=3)
        by_method = {r["method"]: k for k, r in requests.items()}
        assert set(by_method) == {"elicitation/create", "sampling/createMessage", "roots/list"}
        # Answer out of order, one at a time.
        await client.update(task_id, {by_method["roots/list"]: {"roots": []}})
        task = await client.get(task_id)
        assert task["status"] == "input_required"
        assert set(task["inputRequests"]) == set(requests) - {by_method["roots/list"]}
        await client.update(task_id, {by_method["sampling/createMessage"]: SAMPLE_ANSWER})
        task = await client.get(task_id)
        assert task["status"] == "input_required"
        assert set(task["inputRequests"]) == {by_method["elicitation/create"]}
        await client.update(task_id, {by_method["elicitation/create"]: accept({"x": 1})})
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    ((elicited, sampled, roots),) = seen
    assert type(seen[0]) is tuple
    assert elicited.data == {"x": 1}
    assert sampled.text == "forty-two"
    assert roots == Roots([])


async def test_only_invalid_member_of_a_group_is_asked_again() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool():
        seen.append((yield Inputs(Elicit("c?", schema=Confirm), Elicit("free?"))))
        yield Result(None)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        requests = await client.input(task_id, count=2)
        strict, free = sorted(requests, key=lambda k: requests[k]["params"]["message"])
        await client.update(task_id, {strict: accept({"confirm": []}), free: accept({"k": "v"})})
        retry = await client.input(task_id, count=1, excluding=requests)
        (again,) = retry
        assert retry[again]["params"]["message"].startswith("c?")
        await client.update(task_id, {again: accept({"confirm": True})})
        await client.finish(task_id)
    ((confirmed, free_answer),) = seen
    assert confirmed.data == Confirm(confirm=True)
    assert free_answer.data == {"k": "v"}


def test_inputs_validation() -> None:
    with pytest.raises(ValueError):
        Inputs()
    with pytest.raises(TypeError):
        Inputs(Elicit("a"), "not a request")  # type: ignore[arg-type]


# -- unsupported yields ----------------------------------------------------------------------


async def test_unsupported_yield_becomes_a_tool_error() -> None:
    @task_tool
    async def tool():
        yield 42
        yield Result("unreachable")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "completed"
    assert final["result"]["isError"] is True
    assert "int" in text_of(final["result"])


async def test_unsupported_yield_is_thrown_into_the_body_as_type_error() -> None:
    @task_tool
    async def tool():
        try:
            yield object()
        except TypeError as exc:
            yield Result(f"caught: {exc}")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["result"]["isError"] is False
    assert text_of(final["result"]).startswith("caught: ")
    assert "object" in text_of(final["result"])


async def test_empty_tuple_is_an_unsupported_yield() -> None:
    @task_tool
    async def tool():
        try:
            yield ()
        except TypeError:
            yield Result("rejected")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert text_of(final["result"]) == "rejected"


async def test_body_that_catches_unsupported_yield_and_ends_completes_normally() -> None:
    @task_tool
    async def tool():
        try:  # noqa: SIM105 - the point is a body catching the TypeError itself
            yield 42
        except TypeError:
            pass

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "completed"
    assert final["result"] == {"resultType": "complete", "content": [], "isError": False}


# -- coroutine bodies with TaskContext -------------------------------------------------------


async def test_coroutine_body_uses_context_for_status_and_input() -> None:
    ids: list[str | None] = []
    release = anyio.Event()

    @task_tool
    async def tool(ctx: TaskContext) -> dict[str, Any]:
        ids.append(ctx.task_id)
        await ctx.status("asking")
        await release.wait()
        first = await ctx.elicit("Confirm?", Confirm)
        a, b = await ctx.inputs(Elicit("a?"), ListRoots())
        assert isinstance(first, Accepted) and isinstance(a, Accepted) and isinstance(b, Roots)
        return {"confirm": first.data.confirm, "a": a.data, "roots": [r.uri for r in b.roots]}

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await wait_for(protocol, task_id, lambda t: t.get("statusMessage") == "asking", what="status")
        release.set()
        first = await client.answer_only(task_id, accept({"confirm": True}))
        pair = await client.input(task_id, count=2, excluding=[first])
        responses = {
            k: (
                accept({"v": 1}) if r["method"] == "elicitation/create" else {"roots": [{"uri": "file:///r"}]}
            )
            for k, r in pair.items()
        }
        await client.update(task_id, responses)
        final = await client.finish(task_id)
    assert ids == [task_id]
    assert final["status"] == "completed"
    assert final["statusMessage"] == "asking"
    assert final["result"]["structuredContent"] == {"confirm": True, "a": {"v": 1}, "roots": ["file:///r"]}


async def test_context_sample_and_list_roots() -> None:
    @task_tool
    async def tool(ctx: TaskContext) -> str:
        sampled = await ctx.sample("hi", max_tokens=5)
        roots = await ctx.list_roots()
        assert isinstance(sampled, Sampled) and isinstance(roots, Roots)
        return f"{sampled.text}/{len(roots.roots)}"

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        first = await client.answer_only(task_id, SAMPLE_ANSWER)
        await client.answer_only(task_id, {"roots": [{"uri": "file:///x"}]}, excluding=[first])
        final = await client.finish(task_id)
    assert text_of(final["result"]) == "forty-two/1"


async def test_context_task_id_is_set_in_a_generator_task_after_its_first_yield() -> None:
    ids: list[str | None] = []

    @task_tool
    async def tool(ctx: TaskContext):
        yield "started"
        ids.append(ctx.task_id)
        yield Result(None)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.finish(task_id)
    assert ids == [task_id]


async def test_context_task_id_is_set_in_a_generator_task_before_its_first_yield() -> None:
    ids: list[str | None] = []

    @task_tool
    async def tool(ctx: TaskContext):
        ids.append(ctx.task_id)
        yield Result(None)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.finish(task_id)
    assert ids == [task_id]
