"""`@task_tool`: options, input schema from type hints, validation, `definition()`, context injection."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from mcptasks import Result, TaskContext, ToolError, task_tool
from mcptasks.authoring import TaskTool
from mcptasks.errors import InvalidArguments
from mcptasks.lowlevel import TaskEngine
from mcptasks.wire import EXTENSION_ID


class Point(BaseModel):
    x: int
    y: int = 0


# -- naming and options ----------------------------------------------------------------------


def test_bare_decorator_uses_function_name_and_docstring() -> None:
    @task_tool
    async def build_image(tag: str):
        """Build the image.

        Takes a while.
        """
        yield Result(tag)

    assert isinstance(build_image, TaskTool)
    assert build_image.name == "build_image"
    assert build_image.description == "Build the image.\n\nTakes a while."
    assert build_image.is_generator


def test_function_without_docstring_has_empty_description() -> None:
    @task_tool
    async def nodoc():
        yield Result(None)

    assert nodoc.description == ""


def test_options_override_name_description_and_set_title_annotations_meta() -> None:
    @task_tool(
        name="ci.run-pipeline",
        title="Run pipeline",
        description="Explicit description.",
        annotations={"readOnlyHint": False},
        meta={"example.com/owner": "ci"},
    )
    async def run(kind: str):
        """Docstring ignored."""
        yield Result(kind)

    definition = run.definition()
    assert definition["name"] == "ci.run-pipeline"
    assert definition["title"] == "Run pipeline"
    assert definition["description"] == "Explicit description."
    assert definition["annotations"] == {"readOnlyHint": False}
    assert definition["_meta"]["example.com/owner"] == "ci"
    assert definition["_meta"][EXTENSION_ID] == {"taskSupport": "optional"}


def test_definition_shape_of_a_required_tool() -> None:
    @task_tool(task_support="required")
    async def must_be_task(n: int):
        """Doc."""
        yield Result(n)

    definition = must_be_task.definition()
    assert set(definition) == {"name", "description", "inputSchema", "_meta"}
    assert definition["_meta"] == {EXTENSION_ID: {"taskSupport": "required"}}
    assert definition["inputSchema"]["type"] == "object"


def test_ttl_and_poll_interval_are_converted_to_milliseconds() -> None:
    @task_tool(ttl=timedelta(minutes=2), poll_interval=0.25)
    async def a():
        yield Result(None)

    @task_tool(ttl=None, timeout=timedelta(minutes=2), poll_interval=timedelta(seconds=3))
    async def b():
        yield Result(None)

    @task_tool
    async def c():
        yield Result(None)

    assert (a.ttl_ms, a.poll_interval_ms) == (120_000, 250)
    assert (b.ttl_ms, b.poll_interval_ms) == (None, 3000)
    assert (c.ttl_ms, c.poll_interval_ms) == (3_600_000, 1000)
    assert (a.timeout_ms, b.timeout_ms, c.timeout_ms) == (None, 120_000, None)  # no deadline by default
    assert c.task_support == "optional"


@pytest.mark.parametrize("option", ["ttl", "timeout", "poll_interval"])
@pytest.mark.parametrize("value", [0, -1, -0.5, "10", True, timedelta(0), timedelta(seconds=-3)])
def test_bad_ttl_or_poll_interval_is_rejected_naming_the_option(option: str, value: Any) -> None:
    with pytest.raises((ValueError, TypeError), match=option):

        @task_tool(**{option: value})
        async def tool():
            yield Result(None)


@pytest.mark.parametrize("option", ["ttl", "timeout", "poll_interval"])
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_non_finite_ttl_or_poll_interval_is_rejected_naming_the_option(option: str, value: float) -> None:
    with pytest.raises((ValueError, TypeError), match=option):

        @task_tool(**{option: value})
        async def tool():
            yield Result(None)


def test_poll_interval_none_is_rejected() -> None:
    with pytest.raises(ValueError, match="poll_interval"):

        @task_tool(poll_interval=None)  # type: ignore[arg-type]
        async def tool():
            yield Result(None)


def test_bad_task_support_is_rejected() -> None:
    with pytest.raises(ValueError, match="task_support"):

        @task_tool(task_support="forbidden")  # type: ignore[arg-type]
        async def tool():
            yield Result(None)


@pytest.mark.parametrize("name", ["", "has space", "x" * 129, "slash/name", "ünï"])
def test_bad_tool_name_is_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="tool name"):

        @task_tool(name=name)
        async def tool():
            yield Result(None)


def test_def_function_and_def_generator_are_threaded_bodies() -> None:
    def plain(x: int) -> int:
        return x

    def sync_gen():
        yield Result(1)

    assert task_tool(plain).threaded and not task_tool(plain).is_generator
    assert task_tool(sync_gen).threaded and task_tool(sync_gen).is_generator


def test_callable_object_is_rejected() -> None:
    class Body:
        def __call__(self) -> None: ...

    with pytest.raises(TypeError, match="async def' or 'def'"):
        task_tool(Body())


def test_decorating_a_task_tool_again_is_rejected() -> None:
    @task_tool
    async def once():
        yield Result(None)

    with pytest.raises(TypeError, match="already a task tool"):
        task_tool(once)


def test_var_args_are_rejected() -> None:
    async def star(*items: int):
        yield Result(items)

    with pytest.raises(TypeError, match=r"\*args"):
        task_tool(star)


def test_coroutine_is_accepted_as_non_generator() -> None:
    @task_tool
    async def plain(n: int) -> int:
        return n

    assert not plain.is_generator
    assert plain.input_schema["required"] == ["n"]


# -- input schema ----------------------------------------------------------------------------


def test_schema_types_defaults_and_required() -> None:
    @task_tool
    async def tool(name: str, count: int = 3, ratio: float = 0.5, flags: list[str] | None = None):
        yield Result(None)

    schema = tool.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    props = schema["properties"]
    assert props["name"]["type"] == "string"
    assert props["count"] == {**props["count"], "type": "integer", "default": 3}
    assert props["ratio"]["type"] == "number"
    assert props["ratio"]["default"] == 0.5
    assert props["flags"]["default"] is None
    assert {"type": "null"} in props["flags"]["anyOf"]


def test_schema_optional_is_nullable() -> None:
    @task_tool
    async def tool(limit: Optional[int] = None):  # noqa: UP045 - the point is typing.Optional
        yield Result(None)

    prop = tool.input_schema["properties"]["limit"]
    assert {"type": "integer"} in prop["anyOf"]
    assert {"type": "null"} in prop["anyOf"]
    assert "required" not in tool.input_schema


def test_schema_literal_becomes_enum() -> None:
    @task_tool
    async def tool(kind: Literal["test", "build"]):
        yield Result(None)

    assert tool.input_schema["properties"]["kind"]["enum"] == ["test", "build"]


def test_schema_annotated_field_description() -> None:
    @task_tool
    async def tool(path: Annotated[str, Field(description="File to process")]):
        yield Result(None)

    assert tool.input_schema["properties"]["path"]["description"] == "File to process"


def test_schema_pydantic_model_parameter() -> None:
    @task_tool
    async def tool(point: Point):
        yield Result(None)

    schema = tool.input_schema
    ref = schema["properties"]["point"]["$ref"]
    name = ref.rsplit("/", 1)[-1]
    assert schema["$defs"][name]["properties"]["x"]["type"] == "integer"
    assert schema["required"] == ["point"]


def test_no_parameters_gives_empty_object_schema() -> None:
    @task_tool
    async def tool():
        yield Result(None)

    assert tool.input_schema == {"type": "object", "properties": {}}


@pytest.mark.parametrize("annotation", [TaskContext, Optional[TaskContext], TaskContext | None])  # noqa: UP045
def test_context_parameter_is_not_in_schema(annotation: Any) -> None:
    async def tool(n: int, ctx=None):  # type: ignore[no-untyped-def]
        yield Result(n)

    tool.__annotations__ = {"n": int, "ctx": annotation}
    built = task_tool(tool)
    assert built.context_parameter == "ctx"
    assert set(built.input_schema["properties"]) == {"n"}
    assert built.input_schema["required"] == ["n"]


# -- argument validation ---------------------------------------------------------------------


def test_validate_arguments_applies_defaults_and_coerces() -> None:
    @task_tool
    async def tool(name: str, count: int = 3, point: Point | None = None):
        yield Result(None)

    args = tool.validate_arguments({"name": "a", "point": {"x": "5"}, "unknown": 1})
    assert args == {"name": "a", "count": 3, "point": Point(x=5)}
    assert isinstance(args["point"], Point)


def test_validate_arguments_names_the_missing_field() -> None:
    @task_tool
    async def tool(name: str, count: int = 3):
        yield Result(None)

    with pytest.raises(InvalidArguments, match="name") as info:
        tool.validate_arguments({"count": 1})
    assert "tool" in str(info.value)
    assert isinstance(info.value, ToolError)


def test_validate_arguments_names_the_wrongly_typed_field() -> None:
    @task_tool
    async def tool(count: int, kind: Literal["a", "b"] = "a"):
        yield Result(None)

    with pytest.raises(InvalidArguments, match="count"):
        tool.validate_arguments({"count": "many"})
    with pytest.raises(InvalidArguments, match="kind"):
        tool.validate_arguments({"count": 1, "kind": "c"})


def test_validate_arguments_names_nested_model_field() -> None:
    @task_tool
    async def tool(point: Point):
        yield Result(None)

    with pytest.raises(InvalidArguments, match=r"point\.x"):
        tool.validate_arguments({"point": {"y": 1}})


def test_validate_arguments_rejects_non_object() -> None:
    @task_tool
    async def tool(n: int = 1):
        yield Result(None)

    with pytest.raises(InvalidArguments, match="must be an object"):
        tool.validate_arguments(["n", 1])  # type: ignore[arg-type]
    assert tool.validate_arguments(None) == {"n": 1}


def test_context_argument_from_the_client_is_ignored() -> None:
    @task_tool
    async def tool(ctx: TaskContext, n: int = 1):
        yield Result(n)

    assert tool.validate_arguments({"ctx": "forged", "n": 2}) == {"n": 2}


# -- context injection -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_context_is_injected_into_a_generator_body() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool(n: int, context: TaskContext):
        seen.append(context)
        yield Result(n * 2)

    outcome = await TaskEngine().run_inline(tool, tool.validate_arguments({"n": 21}), owner="alice")
    assert outcome.status == "completed"
    assert outcome.result is not None and outcome.result["content"][0]["text"] == "42"
    (context,) = seen
    assert isinstance(context, TaskContext)
    assert (context.owner, context.tool, context.task_id) == ("alice", "tool", None)


@pytest.mark.anyio
async def test_context_is_injected_into_a_coroutine_body() -> None:
    @task_tool
    async def tool(ctx: TaskContext) -> str:
        return f"{ctx.tool}:{ctx.owner}"

    outcome = await TaskEngine().run_inline(tool, {}, owner="bob")
    assert outcome.result is not None
    assert outcome.result["content"] == [{"type": "text", "text": "tool:bob"}]


def test_calling_the_tool_object_calls_the_function() -> None:
    @task_tool
    async def add(a: int, b: int) -> int:
        return a + b

    coroutine = add(1, 2)
    try:
        with pytest.raises(StopIteration) as info:
            coroutine.send(None)
        assert info.value.value == 3
    finally:
        coroutine.close()


def test_unknown_option_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match="bogus"):
        task_tool(bogus=1)  # type: ignore[call-overload]


def test_calling_a_task_tool_calls_the_function() -> None:
    @task_tool
    def double(n: int) -> int:
        return 2 * n

    assert double(4) == 8
    assert double.fn(5) == 10
