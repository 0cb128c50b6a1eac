"""How a body's end becomes the task's outcome: `Result` conversions, return values and errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers import Client, serve, text_of
from pydantic import BaseModel, ConfigDict, Field

from mcptasks import ProtocolError, Result, ToolError, task_tool
from mcptasks.lowlevel import TaskEngine

pytestmark = pytest.mark.anyio


class Report(BaseModel):
    passed: int
    failed: int


class FakeCallToolResult(BaseModel):
    """Shaped like the SDK's `CallToolResult` model (a `content` list and `is_error`)."""

    model_config = ConfigDict(populate_by_name=True)

    content: list[dict[str, Any]]
    is_error: bool = Field(default=False, alias="isError")
    structured_content: dict[str, Any] | None = Field(default=None, alias="structuredContent")


@dataclasses.dataclass
class Pair:
    a: int
    b: str


IMAGE = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}

CASES: list[tuple[str, Any, dict[str, Any]]] = [
    ("none", None, {"content": [], "isError": False}),
    ("str", "hello", {"content": [{"type": "text", "text": "hello"}], "isError": False}),
    (
        "dict",
        {"a": 1, "b": [True, None]},
        {
            "content": [{"type": "text", "text": '{"a":1,"b":[true,null]}'}],
            "structuredContent": {"a": 1, "b": [True, None]},
            "isError": False,
        },
    ),
    (
        "pydantic",
        Report(passed=3, failed=0),
        {
            "content": [{"type": "text", "text": '{"passed":3,"failed":0}'}],
            "structuredContent": {"passed": 3, "failed": 0},
            "isError": False,
        },
    ),
    (
        "call_tool_result_dict",
        {"content": [{"type": "text", "text": "raw"}], "isError": True, "_meta": {"k": "v"}},
        {"content": [{"type": "text", "text": "raw"}], "isError": True, "_meta": {"k": "v"}},
    ),
    (
        "call_tool_result_dict_without_is_error",
        {"content": [{"type": "text", "text": "raw"}], "resultType": "complete"},
        {"content": [{"type": "text", "text": "raw"}], "isError": False},
    ),
    (
        "call_tool_result_model",
        FakeCallToolResult(content=[{"type": "text", "text": "m"}], structured_content={"x": 1}),
        {"content": [{"type": "text", "text": "m"}], "isError": False, "structuredContent": {"x": 1}},
    ),
    (
        "content_blocks",
        [{"type": "text", "text": "a"}, IMAGE],
        {"content": [{"type": "text", "text": "a"}, IMAGE], "isError": False},
    ),
    ("single_content_block", IMAGE, {"content": [IMAGE], "isError": False}),
    (
        "int",
        7,
        {"content": [{"type": "text", "text": "7"}], "structuredContent": {"result": 7}, "isError": False},
    ),
    (
        "plain_list",
        [1, "two"],
        {
            "content": [{"type": "text", "text": '[1, "two"]'}],
            "structuredContent": {"result": [1, "two"]},
            "isError": False,
        },
    ),
    (
        "dataclass",
        Pair(1, "x"),
        {
            "content": [{"type": "text", "text": '{"a":1,"b":"x"}'}],
            "structuredContent": {"a": 1, "b": "x"},
            "isError": False,
        },
    ),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_result_value_becomes_the_task_result(value: Any, expected: dict[str, Any]) -> None:
    @task_tool
    async def tool():
        yield "working on it"
        yield Result(value)

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "completed"
    assert final["result"] == {"resultType": "complete", **expected}
    assert "error" not in final


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_coroutine_return_value_converts_like_result(value: Any, expected: dict[str, Any]) -> None:
    @task_tool
    async def tool() -> Any:
        return value

    outcome = await TaskEngine().run_inline(tool, {}, owner="o")
    assert outcome.status == "completed"
    assert outcome.result == expected


async def test_generator_ending_without_result_completes_with_empty_content() -> None:
    @task_tool
    async def tool():
        yield "only a status"

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "completed"
    assert final["result"] == {"resultType": "complete", "content": [], "isError": False}


async def test_code_after_result_does_not_run_but_finally_does() -> None:
    ran: list[str] = []

    @task_tool
    async def tool():
        try:
            yield Result("first")
            ran.append("after")
            yield Result("second")
        finally:
            ran.append("finally")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert text_of(final["result"]) == "first"
    assert ran == ["finally"]


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [ValueError("disk is full"), ToolError("disk is full")], ids=["plain", "tool"]
)
async def test_exception_completes_the_task_with_is_error(error: Exception) -> None:
    @task_tool
    async def tool():
        yield "about to fail"
        raise error

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "completed"
    assert final["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "disk is full"}],
        "isError": True,
    }
    assert "error" not in final
    assert "Traceback" not in repr(final)


async def test_exception_without_message_reports_its_type() -> None:
    @task_tool
    async def tool():
        yield "x"
        raise KeyboardInterruptLike

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["result"]["isError"] is True
    assert text_of(final["result"]) == "KeyboardInterruptLike"


class KeyboardInterruptLike(Exception):
    pass


async def test_protocol_error_fails_the_task_with_that_error() -> None:
    @task_tool
    async def tool():
        yield "about to fail"
        raise ProtocolError(-32042, "upstream refused", {"retry": False})

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        final = await client.finish(await client.start("tool"))
    assert final["status"] == "failed"
    assert final["error"] == {"code": -32042, "message": "upstream refused", "data": {"retry": False}}
    assert "result" not in final


async def test_coroutine_errors_map_the_same_way() -> None:
    @task_tool
    async def tool_error() -> None:
        raise ToolError("bad input file")

    @task_tool
    async def protocol_error() -> None:
        raise ProtocolError(-32000, "nope")

    async with serve(tool_error, protocol_error) as (_, protocol):
        client = Client(protocol)
        first = await client.finish(await client.start("tool_error"))
        second = await client.finish(await client.start("protocol_error"))
    assert (first["status"], first["result"]["isError"], text_of(first["result"])) == (
        "completed",
        True,
        "bad input file",
    )
    assert (second["status"], second["error"]) == ("failed", {"code": -32000, "message": "nope"})


async def test_engine_start_exception_before_first_yield_is_a_tool_error() -> None:
    @task_tool
    async def tool():
        raise ValueError("broken before anything")
        yield Result(None)  # pragma: no cover

    async with serve(tool) as (engine, protocol):
        record = await engine.start(tool, {}, owner="anonymous")
        final = await Client(protocol).finish(record.task_id)
    assert final["status"] == "completed"
    assert final["result"]["isError"] is True
    assert text_of(final["result"]) == "broken before anything"
