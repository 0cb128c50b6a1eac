"""`mcptasks.testing.run_tool`: a body run alone behaves as it does in a task."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest
from pydantic import BaseModel

from mcptasks import Accepted, Answer, Delegate, Elicit, Result, TaskContext, Unsupported, task_tool
from mcptasks.authoring import InputRequest
from mcptasks.testing import run_tool

pytestmark = pytest.mark.anyio


class Confirm(BaseModel):
    confirm: bool


async def ask(prompt: str) -> AsyncGenerator[Any, Any]:
    yield f"asking {prompt}"
    answer: Answer[Confirm] = yield Elicit(prompt, Confirm)
    yield Result(isinstance(answer, Accepted) and answer.data.confirm)


@task_tool
async def gate(name: str):
    """Two questions through a helper."""
    first = yield Delegate(ask(f"{name} one?"))
    second = yield Delegate(ask(f"{name} two?"))
    yield Result({"first": first, "second": second})


async def test_answers_statuses_and_result() -> None:
    def answer(request: InputRequest) -> dict[str, Any]:
        return {"action": "accept", "content": {"confirm": "one" in request.params["message"]}}

    run = await run_tool(gate, {"name": "x"}, answer=answer)
    assert run.statuses == ["asking x one?", "asking x two?"]
    assert [r.params["message"] for r in run.asked] == ["x one?", "x two?"]
    assert run.result["structuredContent"] == {"first": True, "second": False}


async def test_an_async_answer_is_awaited() -> None:
    async def answer(request: InputRequest) -> dict[str, Any]:
        return {"action": "decline"}

    run = await run_tool(gate, {"name": "x"}, answer=answer)
    assert run.result["structuredContent"] == {"first": False, "second": False}


async def test_without_answer_every_question_is_unsupported() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool(ctx: TaskContext) -> str:
        seen.append(await ctx.elicit("?"))
        return "done"

    run = await run_tool(tool)
    assert seen == [Unsupported("elicitation/create", "elicitation")]
    assert run.asked == []
    assert run.result["content"] == [{"type": "text", "text": "done"}]


async def test_invalid_arguments_and_failures() -> None:
    with pytest.raises(Exception, match="name"):
        await run_tool(gate, {})

    @task_tool
    async def required():
        yield Elicit("?", required=True)

    run = await run_tool(required)
    assert run.outcome.status == "failed"
    with pytest.raises(AssertionError, match="failed"):
        run.result  # noqa: B018
