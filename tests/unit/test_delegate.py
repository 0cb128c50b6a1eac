"""`yield Delegate(helper(...))`: a helper generator's statuses and questions become the body's."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest
from helpers import Client, accept, serve, text_of, wait_for

from mcptasks import Accepted, Answer, Delegate, Elicit, Result, task_tool

pytestmark = pytest.mark.anyio


async def ask_name(prompt: str) -> AsyncGenerator[Any, Any]:
    """A helper: reports progress, asks a question, returns the answer's name."""
    yield f"asking {prompt}"
    answer: Answer[dict[str, Any]] = yield Elicit(prompt)
    yield Result(answer.data["name"] if isinstance(answer, Accepted) else None)


async def test_helper_status_and_question_go_through_and_its_result_comes_back() -> None:
    @task_tool
    async def greet():
        name = yield Delegate(ask_name("Who?"))
        yield Result(f"hello {name}")

    async with serve(greet) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("greet")
        requests = await client.input(task_id, count=1)
        task = await client.get(task_id)
        (request,) = requests.values()
        await client.answer_only(task_id, accept({"name": "Ada"}))
        final = await client.finish(task_id)
    assert task["statusMessage"] == "asking Who?"
    assert request["params"]["message"] == "Who?"
    assert text_of(final["result"]) == "hello Ada"


async def test_a_helper_that_just_ends_gives_none() -> None:
    seen: list[Any] = []

    async def quiet() -> AsyncGenerator[str, None]:
        yield "step"

    @task_tool
    async def tool():
        seen.append((yield Delegate(quiet())))
        yield Result("done")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert seen == [None]
    assert final["statusMessage"] == "step"


async def test_nested_helpers_each_get_their_own_answer() -> None:
    async def pair() -> AsyncGenerator[Any, Any]:
        first = yield Delegate(ask_name("First?"))
        second = yield Delegate(ask_name("Second?"))
        yield Result([first, second])

    @task_tool
    async def tool():
        names = yield Delegate(pair())
        yield Result(names)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        first = await client.answer_only(task_id, accept({"name": "A"}))
        await client.answer_only(task_id, accept({"name": "B"}), excluding=[first])
        final = await client.finish(task_id)
    assert final["result"]["structuredContent"] == {"result": ["A", "B"]}


async def test_an_exception_in_the_helper_is_raised_at_the_callers_yield() -> None:
    closed = anyio.Event()

    async def broken() -> AsyncGenerator[Any, Any]:
        try:
            yield "about to fail"
            raise LookupError("no such thing")
        finally:
            closed.set()

    @task_tool
    async def tool():
        try:
            yield Delegate(broken())
        except LookupError as exc:
            yield Result(f"caught {exc}")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert closed.is_set()
    assert text_of(final["result"]) == "caught no such thing"


async def test_an_uncaught_helper_exception_fails_the_body_as_a_tool_error() -> None:
    async def broken() -> AsyncGenerator[Any, Any]:
        raise ValueError("bad input")
        yield  # pragma: no cover

    @task_tool
    async def tool():
        yield Delegate(broken())
        yield Result("unreachable")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "completed"
    assert final["result"]["isError"] is True
    assert text_of(final["result"]) == "bad input"


async def test_cancelling_while_the_helper_waits_for_input_closes_helper_and_body() -> None:
    helper_closed = anyio.Event()
    body_closed = anyio.Event()

    async def waiting() -> AsyncGenerator[Any, Any]:
        try:
            yield Elicit("Wait?")
        finally:
            helper_closed.set()

    @task_tool
    async def tool():
        try:
            yield Delegate(waiting())
            yield Result("unreachable")
        finally:
            body_closed.set()

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.input(task_id, count=1)
        await client.cancel(task_id)
        with anyio.fail_after(10):
            await helper_closed.wait()
            await body_closed.wait()
        final = await wait_for(protocol, task_id, lambda t: t["status"] == "cancelled", what="cancelled")
    assert final["status"] == "cancelled"


def test_delegate_takes_an_async_generator() -> None:
    async def helper() -> AsyncGenerator[None, None]:
        yield None

    with pytest.raises(TypeError, match=r"helper\(\.\.\.\)"):
        Delegate(helper)  # type: ignore[arg-type]
