# --8<-- [start:head]
"""Testing task tools with pytest, in process: the server under test is the tutorial's ci.py.

Put this file next to ci.py and run:  pytest test_my_tools.py
"""

from __future__ import annotations

import importlib
from typing import Any

import ci
import pytest
from ci import run_pipeline
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from mcptasks import TaskServer
from mcptasks.client import TasksClient, start_tool_call
from mcptasks.testing import run_tool

pytestmark = pytest.mark.anyio
# --8<-- [end:head]


# --8<-- [start:fixtures]
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def app() -> TaskServer:
    """A fresh server for every test: a new engine and an empty memory store."""
    return importlib.reload(ci).app


@pytest.fixture
def fast() -> TasksClient:
    """Poll every 10-50 ms whatever pollIntervalMs the tool advertises: tests stay quick."""
    return TasksClient(min_poll_interval=0.01, max_poll_interval=0.05)


# --8<-- [end:fixtures]


# --8<-- [start:transparent]
def answering(publish: bool) -> Any:
    async def callback(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"publish": publish})

    return callback


async def test_publishes_when_approved(app: TaskServer, fast: TasksClient) -> None:
    async with Client(app.mcp, extensions=[fast], elicitation_callback=answering(True)) as client:
        result = await client.call_tool("run_pipeline", {"kind": "build"})
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["published"] is True


# --8<-- [end:transparent]


# --8<-- [start:step-by-step]
async def test_asks_before_publishing(app: TaskServer, fast: TasksClient) -> None:
    # The callback declares `elicitation` (the server asks only clients that declared it);
    # `answer_inputs=False` leaves the answering to the test.
    async with Client(app.mcp, extensions=[fast], elicitation_callback=answering(True)) as client:
        handle = await start_tool_call(client, "run_pipeline", {"kind": "test"})
        asked = []
        async with handle.watch(answer_inputs=False) as updates:  # see the question, answer it yourself
            async for task in updates:
                if task.status == "input_required":
                    ((key, request),) = (task.input_requests or {}).items()
                    asked.append(request["params"]["message"])
                    await handle.respond({key: {"action": "decline"}})
        result = await handle.result()
    assert asked == ["The test pipeline passed. Publish the artifacts?"]
    assert result.structured_content is not None
    assert result.structured_content["published"] is False


# --8<-- [end:step-by-step]


# --8<-- [start:inline]
async def test_without_the_extension_the_question_is_a_round(app: TaskServer) -> None:
    # No TasksClient: the tool runs inline, and its question is an input_required round the
    # SDK client answers through the same callback, then retries the call.
    async with Client(app.mcp, elicitation_callback=answering(True)) as client:
        result = await client.call_tool("run_pipeline", {"kind": "test"})
    assert result.structured_content is not None
    assert result.structured_content["published"] is True


async def test_a_client_that_cannot_answer_is_never_asked(app: TaskServer) -> None:
    async with Client(app.mcp) as client:  # no elicitation callback: `elicitation` not declared
        result = await client.call_tool("run_pipeline", {"kind": "test"})
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["published"] is False  # the answer was Unsupported


# --8<-- [end:inline]


# --8<-- [start:unit]
async def test_the_body_directly() -> None:
    """Run just the body: no server, no client; `answer` plays the client."""
    run = await run_tool(run_pipeline, {"kind": "test"}, answer=lambda request: {"action": "decline"})
    assert run.statuses[0] == "starting the test pipeline"
    assert [request.method for request in run.asked] == ["elicitation/create"]
    assert run.result["structuredContent"]["published"] is False


async def test_the_generator_by_hand() -> None:
    """A `TaskTool` called directly calls the undecorated function: here, an async generator."""
    body = run_pipeline("test")
    try:
        assert await body.__anext__() == "starting the test pipeline"
    finally:
        await body.aclose()


# --8<-- [end:unit]
