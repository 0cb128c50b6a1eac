"""Every fixture the official conformance suite's 2026-07-28 server scenarios call, on one server.

Run it:  mcptasks serve examples/everything_server.py --transport http --port 8000

- The tasks scenarios' tools are the ones of `conformance_server.py` (task tools, served here too).
- The `input-required-result-*` tools are mcptasks task tools called *without* the tasks
  extension: their `yield Elicit/Sample/ListRoots` become synchronous `input_required` rounds
  (MRTR) with a signed `requestState`, exactly as for any optional task tool.
- Two input fixtures are plain SDK handlers because what they test is outside a tool body:
  `test_input_required_result_capabilities` picks its questions from the request's client
  capabilities, and `test_input_required_result_prompt` asks for input on `prompts/get`.
- Everything else (content types, progress, logging, resources, prompts, completions, the
  `Mcp-Param-*` header tool, the list-changed triggers) is an ordinary tool, resource or prompt of
  the underlying SDK server, `app.mcp`.

docs/conformance.md shows what passes on which store; tests/interop/test_conformance.py runs it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from typing import Annotated, Any, Literal

import anyio
import conformance_server as tasks_fixtures
from mcp.server.mcpserver import Context, RequestStateSecurity, UserMessage
from mcp_types import (
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

from mcptasks import Accepted, Elicit, Inputs, ListRoots, Result, Sample, TaskServer, task_tool
from mcptasks.authoring import Roots

# A 1x1 PNG and a tiny WAV header: the suite checks the content type, not the pixels.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# Replicas behind one URL share both request-state keys (docs: how-to/scaling, "Shared secrets"):
# MCPTASKS_SECRET (read by mcptasks itself) and the SDK's, here from MCP_REQUEST_STATE_KEY.
STATE_KEY = os.environ.get("MCP_REQUEST_STATE_KEY")
app = TaskServer(
    "mcptasks-everything",
    version="1.0.0",
    request_state_security=RequestStateSecurity(keys=[STATE_KEY]) if STATE_KEY else None,
)
mcp = app.mcp

# -- the tasks scenarios (greet first: a scenario calls the first listed tool with no arguments) --

app.tool()(tasks_fixtures.greet)
for task_fixture in (
    tasks_fixtures.slow_compute,
    tasks_fixtures.failing_job,
    tasks_fixtures.protocol_error_job,
    tasks_fixtures.confirm_delete,
    tasks_fixtures.multi_input,
    tasks_fixtures.test_tool_with_task,
):
    app.add_task_tool(task_fixture)


# -- tools: content types, errors, progress, logging ------------------------------------------------


@app.tool()
def test_simple_text() -> str:
    """Return one text block."""
    return "This is a simple text response for testing."


@app.tool()
def test_image_content() -> list[ImageContent]:
    """Return one image block (PNG)."""
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@app.tool()
def test_audio_content() -> list[AudioContent]:
    """Return one audio block (WAV)."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@app.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Return one embedded text resource."""
    resource = TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return [EmbeddedResource(type="resource", resource=resource)]


@app.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Return text, an image and an embedded resource together."""
    resource = TextResourceContents(
        uri="test://mixed-content-resource",
        mime_type="application/json",
        text='{"test": "data", "value": 123}',
    )
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=resource),
    ]


@app.tool()
def test_error_handling() -> str:
    """Always fail (a tool error: `isError: true`)."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50 and 100 of 100 to the request's progress token."""
    for done in (0, 50, 100):
        await ctx.report_progress(progress=done, total=100, message=f"Completed step {done} of 100")
        await anyio.sleep(0.05)
    return "Progress reported"


@app.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Log three messages (sent only when the request asked for a log level)."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
    return "Tool with logging executed successfully"


@app.tool()
def test_custom_header(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
) -> str:
    """Echo `region`; the client mirrors it into the `Mcp-Param-Region` header."""
    return f"region: {region}"


def test_dynamic_tool() -> str:
    """Present only while `test_trigger_tool_change` has switched it on."""
    return "dynamic"


def test_dynamic_prompt() -> list[UserMessage]:
    """Present only while `test_trigger_prompt_change` has switched it on."""
    return [UserMessage("dynamic")]


@app.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Add or remove `test_dynamic_tool`, then tell `subscriptions/listen` streams."""
    listed = {tool.name for tool in await mcp.list_tools()}
    if "test_dynamic_tool" in listed:
        mcp.remove_tool("test_dynamic_tool")
    else:
        mcp.add_tool(test_dynamic_tool)
    await ctx.notify_tools_changed()
    return "tools changed"


@app.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Add or remove `test_dynamic_prompt`, then tell `subscriptions/listen` streams."""
    listed = {prompt.name for prompt in await mcp.list_prompts()}
    if "test_dynamic_prompt" in listed:
        mcp.remove_prompt("test_dynamic_prompt")
    else:
        mcp.prompt()(test_dynamic_prompt)
    await ctx.notify_prompts_changed()
    return "prompts changed"


# The schema `tools/list` must show verbatim (JSON Schema 2020-12 keywords a signature cannot
# express); the function's own signature still validates the arguments.
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@task_tool(name="json_schema_2020_12_tool", description="Tool with JSON Schema 2020-12 features")
async def contact(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: Literal["phone", "email"] | None = None,
    phone: str | None = None,
    email: str | None = None,
):
    """Say how `name` will be contacted."""
    how = phone if contactMethod == "phone" else email
    yield Result(f"{name or 'someone'}: {contactMethod or 'email'} {how or '(none given)'}")


app.add_task_tool(dataclasses.replace(contact, input_schema=SCHEMA_2020_12))


# -- input before any task: MRTR rounds on tools/call (mcptasks task tools, no tasks extension) ---


class Name(BaseModel):
    name: str


class Ok(BaseModel):
    ok: bool


class Color(BaseModel):
    color: str


async def greet_by_name():
    """Ask for a name (key `user_name`), then greet."""
    answer = yield Elicit("What is your name?", schema=Name, key="user_name")
    yield Result(f"Hello, {answer.data.name}!" if isinstance(answer, Accepted) else "Hello, stranger!")


# Three scenarios call the same question under different names: the basic round trip, a tampered
# requestState (it fails its signature check), and a response stream that must carry no request.
for fixture in (
    "test_input_required_result_elicitation",
    "test_input_required_result_tampered_state",
    "test_streaming_elicitation",
):
    app.task_tool(name=fixture)(greet_by_name)


@app.task_tool
async def test_input_required_result_sampling():
    """Ask the client's model a question and return its answer."""
    answer = yield Sample("What is the capital of France?", max_tokens=100, key="capital_question")
    yield Result(f"The model said: {answer.text}")


@app.task_tool
async def test_input_required_result_list_roots():
    """Ask the client for its roots and list them."""
    answer = yield ListRoots(key="client_roots")
    roots = answer.roots if isinstance(answer, Roots) else []
    yield Result("Roots: " + ", ".join(root.uri for root in roots) if roots else "No roots")


@app.task_tool
async def test_input_required_result_request_state():
    """Ask for a confirmation; the answer comes back with the signed requestState."""
    answer = yield Elicit("Please confirm", schema=Ok, key="confirm")
    confirmed = isinstance(answer, Accepted) and answer.data.ok
    yield Result(f"state-ok: confirmed={confirmed}")


@app.task_tool
async def test_input_required_result_multiple_inputs():
    """Ask three kinds of question at once."""
    name, sampled, roots = yield Inputs(
        Elicit("What is your name?", schema=Name, key="user_name"),
        Sample("Say hello.", max_tokens=50, key="greeting"),
        ListRoots(key="client_roots"),
    )
    who = name.data.name if isinstance(name, Accepted) else "someone"
    yield Result(f"{who}; the model said {sampled.text!r}; {len(roots)} root(s)")


@app.task_tool
async def test_input_required_result_multi_round():
    """Ask two questions one after the other (two input_required rounds)."""
    name = yield Elicit("Step 1: What is your name?", schema=Name, key="step1")
    color = yield Elicit("Step 2: What is your favorite color?", schema=Color, key="step2")
    who = name.data.name if isinstance(name, Accepted) else "someone"
    likes = color.data.color if isinstance(color, Accepted) else "no color"
    yield Result(f"{who} likes {likes}")


@app.task_tool(input_before_task=True, required_capabilities=["sampling"])
async def test_missing_capability():
    """Needs sampling before any work: a client that did not declare it gets -32021."""
    answer = yield Sample("Summarise the capabilities test.", max_tokens=50, key="summary", before_task=True)
    yield Result(answer.text)


@app.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str | InputRequiredResult:
    """Ask only what the client declared it can answer (sampling and/or elicitation)."""
    if ctx.input_responses:
        return f"answered: {', '.join(sorted(ctx.input_responses))}"
    declared = ctx.client_capabilities
    requests: dict[str, Any] = {}
    if declared is not None and declared.sampling is not None:
        requests["question"] = {
            "method": "sampling/createMessage",
            "params": {"messages": [_user_text("What is 2 + 2?")], "maxTokens": 20},
        }
    if declared is not None and declared.elicitation is not None:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        requests["user_name"] = {
            "method": "elicitation/create",
            "params": {"message": "What is your name?", "requestedSchema": schema},
        }
    if not requests:
        return "nothing to ask: the client declared neither sampling nor elicitation"
    return InputRequiredResult(input_requests=requests)


def _user_text(text: str) -> dict[str, Any]:
    return {"role": "user", "content": {"type": "text", "text": text}}


# -- resources --------------------------------------------------------------------------------------


@mcp.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a PNG image)."""
    return base64.b64decode(PNG)


@mcp.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:
    """A resource template: the id is substituted into the content."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# -- prompts ----------------------------------------------------------------------------------------


@mcp.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [UserMessage("This is a simple prompt for testing.")]


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that embeds the resource named by `resourceUri`."""
    resource = TextResourceContents(
        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
    )
    return [
        UserMessage(EmbeddedResource(type="resource", resource=resource)),
        UserMessage("Please process the embedded resource above."),
    ]


@mcp.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    return [
        UserMessage(ImageContent(type="image", data=PNG, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


@mcp.prompt()
def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """A prompt that asks the user for context first (prompts/get with input_required)."""
    answer = (ctx.input_responses or {}).get("user_context")
    content = answer.content if isinstance(answer, ElicitResult) and answer.action == "accept" else None
    if not content or not isinstance(content.get("context"), str):
        schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
        request = {
            "method": "elicitation/create",
            "params": {"message": "What context should the prompt use?", "requestedSchema": schema},
        }
        return InputRequiredResult(input_requests={"user_context": request})
    return [UserMessage(f"Use this context: {content['context']}")]


# -- completions ------------------------------------------------------------------------------------

SUGGESTIONS = ["paris", "park", "party", "test", "testing"]


@mcp.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    """Suggest values starting with what the user typed so far."""
    values = [value for value in SUGGESTIONS if value.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


if __name__ == "__main__":
    app.run()
