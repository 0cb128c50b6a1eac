"""Callers without the tasks extension: a body run inline reports progress and asks its questions.

A `progressToken` gets the body's statuses as `notifications/progress`; a 2025-11-25 session that
declared a capability gets the body's questions as requests during the call (in process, over
Streamable HTTP and over stdio). `status_tool` lists `task_status` beside native task tools.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import ElicitRequestParams, ElicitResult, ErrorData
from sdk_helpers import HostApp, Tasks, mcp_error, serve_http, tasks_extension, text, texts

from mcptasks.wire import METHOD_NOT_FOUND

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.anyio


class Progress:
    """A `progress_callback` that keeps what it was sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message))


class Asked:
    """An `elicitation_callback` that answers `confirm` and keeps the questions."""

    def __init__(self, confirm: bool = True) -> None:
        self.confirm = confirm
        self.messages: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.messages.append(params.message)
        return ElicitResult(action="accept", content={"confirm": self.confirm})


@asynccontextmanager
async def over_http(host: HostApp) -> AsyncIterator[str]:
    async with serve_http(host.app.streamable_http_app()) as url:
        yield url


# -- progress -------------------------------------------------------------------------------------


async def test_statuses_reach_a_progress_token_on_both_revisions_in_process() -> None:
    host = HostApp()
    for mode in ("2026-07-28", "legacy"):
        progress = Progress()
        async with Client(host.mcp, mode=mode) as client:
            result = await client.call_tool("quick", {"n": 3}, progress_callback=progress)
        assert texts(result) == ["counted to 3"]
        assert progress.seen == [(1, "counting to 3")], mode


async def test_statuses_reach_a_progress_token_over_http() -> None:
    host = HostApp()
    progress = Progress()
    async with over_http(host) as url, Client(url) as client:
        result = await client.call_tool("with_context", {"topic": "notes"}, progress_callback=progress)
        # no elicitation declared on a 2026-07-28 request: the question is Unsupported
        assert texts(result) == ["notes held (task False)"]
    assert progress.seen == [(1, "notes: asking")]


async def test_a_call_without_a_progress_token_runs_as_before() -> None:
    host = HostApp()
    async with Client(host.mcp) as client:
        assert texts(await client.call_tool("quick", {"n": 2})) == ["counted to 2"]


# -- questions on a 2025-11-25 session --------------------------------------------------------------


async def test_a_legacy_session_that_declared_elicitation_is_asked_in_process() -> None:
    host = HostApp()
    asked = Asked(confirm=True)
    progress = Progress()
    async with Client(host.mcp, mode="legacy", elicitation_callback=asked) as client:
        assert client.protocol_version == "2025-11-25"
        deleted = await client.call_tool("ask", {"filename": "a.txt"})
        published = await client.call_tool("with_context", {"topic": "post"}, progress_callback=progress)
    assert texts(deleted) == ["deleted a.txt"]
    assert texts(published) == ["post published (task False)"]
    assert asked.messages == ["Delete a.txt?", "Publish post?"]
    assert progress.seen == [(1, "post: asking")]


async def test_a_legacy_session_is_asked_over_http_and_keeps_its_other_answers() -> None:
    host = HostApp()
    asked = Asked(confirm=False)
    async with (
        over_http(host) as url,
        Client(url, mode="legacy", extensions=[tasks_extension()], elicitation_callback=asked) as client,
    ):
        kept = await client.call_tool("ask", {"filename": "b.txt"})
        tasks = Tasks(client)
        assert (await mcp_error(tasks.get("anything"))).code == METHOD_NOT_FOUND
        assert text(await tasks.call("quick", {"n": 1})) == "counted to 1"
    assert texts(kept) == ["kept b.txt"]
    assert asked.messages == ["Delete b.txt?"]


async def test_a_legacy_session_without_the_capability_is_never_asked() -> None:
    host = HostApp()
    async with Client(host.mcp, mode="legacy") as client:
        # sampling and roots were not declared: both questions are Unsupported, none is sent
        result = await client.call_tool("ask", {"filename": "c.txt"})
    assert texts(result) == ["kept c.txt"]


async def test_a_client_that_refuses_the_question_ends_the_call_with_a_tool_error_naming_it() -> None:
    host = HostApp()

    async def refuse(context: ClientRequestContext, params: ElicitRequestParams) -> ErrorData:
        return ErrorData(code=-32603, message="the user closed the form")

    async with Client(host.mcp, mode="legacy", elicitation_callback=refuse) as client:
        result = await client.call_tool("ask", {"filename": "d.txt"})
        assert result.is_error is True
        (message,) = texts(result)
        assert "'ask' asked the client (elicitation/create) and got no answer" in message
        assert "the user closed the form" in message
        # the session keeps serving
        assert texts(await client.call_tool("quick", {"n": 1})) == ["counted to 1"]


async def test_an_answer_that_does_not_fit_is_asked_again_then_ends_the_call() -> None:
    host = HostApp()
    answers: list[dict[str, Any]] = [{"confirm": "maybe"}, {"confirm": True}]
    messages: list[str] = []

    async def answer(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        messages.append(params.message)
        return ElicitResult(action="accept", content=answers.pop(0) if answers else {"confirm": "never"})

    async with Client(host.mcp, mode="legacy", elicitation_callback=answer) as client:
        assert texts(await client.call_tool("ask", {"filename": "g.txt"})) == ["deleted g.txt"]
        assert len(messages) == 2 and messages[0] == "Delete g.txt?" and messages[1] != messages[0]
        failed = await client.call_tool("ask", {"filename": "h.txt"})
    assert failed.is_error is True
    assert "asked the client (elicitation/create) 3 times and got no valid answer" in texts(failed)[0]
    assert len(messages) == 5


async def test_a_legacy_stdio_session_is_asked_and_sees_progress() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcptasks", "serve", "examples/conformance_server.py"],
        cwd=str(ROOT),
    )
    asked = Asked(confirm=True)
    progress = Progress()
    with tempfile.TemporaryFile("w+") as errlog, anyio.fail_after(60):
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=asked
        ) as client:
            deleted = await client.call_tool("confirm_delete", {"filename": "e.txt"})
            computed = await client.call_tool(
                "slow_compute", {"seconds": 0.05, "label": "c"}, progress_callback=progress
            )
    assert texts(deleted) == ["deleted e.txt"]
    assert asked.messages == ["Delete e.txt?"]
    assert texts(computed) == ["c: finished after 0.05 s"]
    assert progress.seen[0] == (1, "c: started")
    assert [count for count, _ in progress.seen] == list(range(1, len(progress.seen) + 1))


# -- task_status beside native task tools ------------------------------------------------------------


def _tool_names(listed: Any) -> set[str]:
    return {tool.name for tool in listed.tools}


async def test_status_tool_lists_task_status_alone_and_reads_a_native_task() -> None:
    host = HostApp(status_tool=True)
    async with Client(host.mcp, extensions=[tasks_extension()], elicitation_callback=Asked()) as client:
        names = _tool_names(await client.list_tools())
        assert "task_status" in names
        assert not {"task_answer", "task_cancel"} & names
        tasks = Tasks(client)
        task_id = (await tasks.start("gated", {"label": "native"}))["taskId"]
        await tasks.wait(
            task_id, lambda task: task.get("statusMessage") == "native: waiting", what="a status"
        )
        status = await client.call_tool("task_status", {"taskId": task_id})
        summary = status.structured_content
        assert summary is not None and summary["statusMessage"] == "native: waiting"
        assert texts(status)[0].startswith(f"Task {task_id} (gated) is working.")
        assert "Latest message: native: waiting" in texts(status)[0]
        host.release("native")
        await tasks.finish(task_id)

        asking = (await tasks.start("ask", {"filename": "f.txt"}))["taskId"]
        await tasks.wait_input(asking, count=1)
        waiting = texts(await client.call_tool("task_status", {"taskId": asking}))[0]
        assert "It is waiting for answers (the client asks the user):" in waiting
        assert "task_answer" not in waiting
        await tasks.cancel(asking)


async def test_without_status_tool_task_status_is_neither_listed_nor_served() -> None:
    host = HostApp()
    async with Client(host.mcp, extensions=[tasks_extension()]) as client:
        assert "task_status" not in _tool_names(await client.list_tools())
        result = await client.call_tool("task_status", {"taskId": "whatever"})
        assert result.is_error is True
