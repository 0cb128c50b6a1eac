"""The fast path over Streamable HTTP answers exactly as the SDK's request machinery does.

Two servers with the same tools run side by side, one with the fast path (the default) and one
without; the same script of raw POSTs goes to both: every `tasks/get|update|cancel` success and
error case, `tools/call` of task tools on every route (created tasks, immediate results, invalid
arguments, tool and protocol errors, calls the fast path must leave to the SDK), and the
transport's own rejections (headers, protocol version, Host/Origin, content type, Accept,
batches, notifications, parse errors). Status, headers and bodies must be equal byte for byte once
task ids and timestamps are replaced by placeholders.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.auth.settings import AuthSettings
from sdk_helpers import ELICITING, HARNESS, TIMEOUT, HostApp, StaticTokens, poll, request_meta, serve_http

from mcptasks import Limits
from mcptasks.wire import PROTOCOL_VERSION

pytestmark = pytest.mark.anyio

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_NEW_TASK_ID = re.compile(r'"taskId":"[A-Za-z0-9_-]{20,}"')
_SEALED_STATE = re.compile(r'"requestState":"[^"]*"')
_IGNORED_HEADERS = {"date", "server", "content-length"}


@pytest.fixture
def anyio_backend() -> str:
    """uvicorn and the SDK's transports run on asyncio."""
    return "asyncio"


@dataclass
class Exchange:
    """One answer, normalised: status, the headers that matter, the body text."""

    status: int
    headers: list[tuple[str, str]]
    body: str


class Side:
    """One server of the pair, spoken to with raw POSTs; task ids are named by the script."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.ids: dict[str, str] = {}

    def _normalise(self, response: httpx2.Response) -> Exchange:
        body = response.text
        assert int(response.headers.get("content-length", len(response.content))) == len(response.content)
        for label, task_id in self.ids.items():
            body = body.replace(task_id, f"<{label}>")
        body = _TIMESTAMP.sub("<time>", body)
        body = _NEW_TASK_ID.sub('"taskId":"<new>"', body)
        body = _SEALED_STATE.sub('"requestState":"<sealed>"', body)
        headers = sorted(
            (k, "<session>" if k.lower() == "mcp-session-id" else v)
            for k, v in response.headers.multi_items()
            if k.lower() not in _IGNORED_HEADERS
        )
        return Exchange(response.status_code, headers, body)

    async def post(self, body: bytes, headers: list[tuple[str, str]]) -> Exchange:
        response = await self.http.post(self.url, content=body, headers=headers)
        return self._normalise(response)

    async def other(self, method: str, headers: list[tuple[str, str]]) -> Exchange:
        response = await self.http.request(method, self.url, headers=headers)
        return self._normalise(response)

    async def call(self, label: str, tool: str, arguments: Mapping[str, Any]) -> None:
        params = {"name": tool, "arguments": dict(arguments), "_meta": request_meta(HARNESS)}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        response = await self.http.post(self.url, content=body, headers=standard_headers("tools/call", tool))
        self.ids[label] = response.json()["result"]["taskId"]

    async def task(self, label: str) -> dict[str, Any]:
        params = {"taskId": self.ids[label], "_meta": request_meta(HARNESS)}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params})
        response = await self.http.post(
            self.url, content=body, headers=standard_headers("tasks/get", self.ids[label])
        )
        result: dict[str, Any] = response.json()["result"]
        return result


def standard_headers(method: str, name: str | None) -> list[tuple[str, str]]:
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", PROTOCOL_VERSION),
        ("Mcp-Method", method),
    ]
    return headers if name is None else [*headers, ("Mcp-Name", name)]


@dataclass
class Case:
    """A POST: `task` names the script's task (or is a literal id when not a label)."""

    method: str
    task: str | None = "A"
    params: dict[str, Any] | None = None
    headers: dict[str, str | None] | None = None
    extra_headers: tuple[tuple[str, str], ...] = ()
    meta: dict[str, Any] | None = None
    envelope: dict[str, Any] | None = None
    raw: str | None = None
    name_header: str | None = "task"

    def build(self, side: Side, request_id: int) -> tuple[bytes, list[tuple[str, str]]]:
        task_id = side.ids.get(self.task, self.task) if self.task is not None else None
        params: dict[str, Any] = {} if task_id is None else {"taskId": task_id}
        params.update(self.params or {})
        params["_meta"] = request_meta(HARNESS) if self.meta is None else self.meta
        message: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": self.method,
            "params": params,
        }
        message.update(self.envelope or {})
        message = {k: v for k, v in message.items() if v is not None}
        body = self.raw.replace("<A>", side.ids["A"]) if self.raw is not None else json.dumps(message)
        name = {"task": task_id, "base64": _b64(task_id or "")}.get(self.name_header or "", self.name_header)
        headers = dict(standard_headers(self.method, name))
        for key, value in (self.headers or {}).items():
            headers = {k: v for k, v in headers.items() if k.lower() != key.lower()}
            if value is not None:
                headers[key] = value
        return body.encode(), [*headers.items(), *self.extra_headers]


@dataclass
class ToolCase:
    """A `tools/call` POST of `tool` (its `Mcp-Name` unless `name_header` says otherwise)."""

    tool: str
    arguments: Any = None
    params: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    headers: dict[str, str | None] | None = None
    name_header: str | None = "tool"
    fast: bool = False
    """Whether the fast path runs this call itself (it creates a task at once)."""
    method: str = "tools/call"

    def build(self, side: Side, request_id: int) -> tuple[bytes, list[tuple[str, str]]]:
        params: dict[str, Any] = {
            "name": self.tool,
            "arguments": {} if self.arguments is None else self.arguments,
        }
        params.update(self.params or {})
        params["_meta"] = request_meta(HARNESS) if self.meta is None else self.meta
        message = {"jsonrpc": "2.0", "id": request_id, "method": self.method, "params": params}
        name = self.tool if self.name_header == "tool" else self.name_header
        headers = dict(standard_headers(self.method, name))
        for key, value in (self.headers or {}).items():
            headers = {k: v for k, v in headers.items() if k.lower() != key.lower()}
            if value is not None:
                headers[key] = value
        return json.dumps(message).encode(), list(headers.items())


def tool_cases() -> list[ToolCase]:
    """`tools/call` of task tools on every route, and the calls the fast path must leave alone."""
    keyed = {**request_meta(HARNESS), "io.modelcontextprotocol/idempotencyKey": "fast-path-key"}
    return [
        ToolCase("quick", {"n": 2}, fast=True),
        ToolCase("quick", {"n": "not a number"}, fast=True),
        ToolCase("quick", [1, 2]),
        ToolCase("quick", {"n": 3}, params={"unexpected": True}, fast=True),
        ToolCase("required_job", fast=True),
        ToolCase("tool_error", fast=True),
        ToolCase("protocol_error", fast=True),
        ToolCase("ask", {"filename": "y.txt"}, fast=True),
        ToolCase("ask", {}, fast=True),
        ToolCase("quick", {"n": 4}, meta=keyed, fast=True),
        ToolCase("quick", {"n": 4}, meta=keyed, fast=True),
        ToolCase("quick", {"n": 5}, meta=keyed, fast=True),
        ToolCase("quick", {"n": 1}, meta=request_meta({})),
        ToolCase("required_job", meta=request_meta({})),
        ToolCase("before"),
        ToolCase("quick", params={"inputResponses": {}}),
        ToolCase("quick", params={"requestState": "forged"}),
        ToolCase("quick", name_header="required_job"),
        ToolCase("quick", name_header=None),
        ToolCase("no_such_tool"),
        ToolCase("greet", {"name": "fast"}),
        ToolCase("quick", meta={}),
        ToolCase("quick", {"n": 2}, headers={"Mcp-Param-N": "2"}, fast=True),
        ToolCase("quick", headers={"MCP-Protocol-Version": "2025-11-25"}),
        ToolCase("quick", headers={"Accept": "application/json"}),
        ToolCase("quick", headers={"Accept": "text/event-stream"}),
        ToolCase("quick", headers={"Content-Type": "text/plain"}),
        ToolCase("quick", headers={"Host": "evil.example"}),
    ]


def _b64(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


def cases_for(method: str) -> list[Case]:
    """Every error and edge case of one task method (on task A, which stays working)."""
    no_opt_in = request_meta({})
    return [
        Case(method),
        Case(method, envelope={"id": "a-string-id"}),
        Case(method, task="no-such-task"),
        Case(method, task=None, name_header=None),
        Case(method, task=None, params={"taskId": 42}, name_header="42"),
        Case(method, name_header=None),
        Case(method, name_header="another-task"),
        Case(method, name_header="base64"),
        Case(method, name_header="=?base64?not base64?="),
        Case(method, headers={"Mcp-Method": "tasks/list"}),
        Case(method, headers={"Mcp-Method": None}),
        Case(method, extra_headers=(("Mcp-Name", "again"),)),
        Case(method, extra_headers=(("Mcp-Method", method),)),
        Case(method, meta=no_opt_in),
        Case(method, meta={}),
        Case(method, meta={**request_meta(HARNESS), "io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
        Case(method, headers={"MCP-Protocol-Version": "2099-01-01"}),
        Case(method, headers={"MCP-Protocol-Version": "2025-11-25"}),
        Case(method, headers={"Host": "evil.example"}),
        Case(method, headers={"Origin": "http://evil.example"}),
        Case(method, headers={"Origin": "http://localhost:1234"}),
        Case(method, headers={"Content-Type": "text/plain"}),
        Case(method, headers={"Content-Type": None}),
        Case(method, headers={"Accept": "text/event-stream"}),
        Case(method, headers={"Accept": "application/json"}),
        Case(method, headers={"Accept": "*/*"}),
        Case(method, headers={"Accept": None}),
        Case(method, envelope={"id": None}),
        Case(method, envelope={"jsonrpc": "1.0"}),
        Case(method, envelope={"params": ["not", "an", "object"]}),
        Case(method, raw="{not json"),
        Case(method, raw=f'[{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"taskId":"<A>"}}}}]'),
        Case(method, params={"unexpected": True}),
        Case(method, meta={**request_meta(HARNESS), "progressToken": 7}),
        Case(method, meta={**request_meta(HARNESS), "progressToken": ["not", "a", "token"]}),
        Case(
            method,
            raw=f'{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"taskId":"<A>","_meta":"text"}}}}',
        ),
        Case(
            method,
            raw=f'{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"taskId":"<A>","_meta":null}}}}',
        ),
    ]


def script() -> list[Case | ToolCase]:
    """The whole suite, in order (the state-changing cases last)."""
    cases: list[Case | ToolCase] = [
        case for method in ("tasks/get", "tasks/update", "tasks/cancel") for case in cases_for(method)
    ]
    cases += [
        Case("tasks/get", envelope={"method": "tasks/list"}, headers={"Mcp-Method": "tasks/list"}),
        Case("tasks/get", envelope={"method": "tasks/result"}, headers={"Mcp-Method": "tasks/result"}),
        Case("tasks/update", params={"inputResponses": "not an object"}),
        Case("tasks/update", params={"inputResponses": {"no-such-key": {"action": "accept"}}}),
        Case("tasks/get", task="B"),
        Case("tasks/update", task="B", params={"inputResponses": {"<KEY>": {"action": "accept"}}}),
        Case("tasks/get", task="B"),
        Case("tasks/cancel", task="C"),
        Case("tasks/get", task="C"),
        Case("tasks/cancel", task="C"),
        Case("tasks/update", task="C", params={"inputResponses": {}}),
    ]
    return [*cases, *tool_cases()]


async def prepare(side: Side, host: HostApp) -> str:
    """Tasks A and C working (gated), B waiting for an answer; returns B's input key."""
    await side.call("A", "gated", {"label": "a"})
    await side.call("C", "gated", {"label": "c"})
    await side.call("B", "ask", {"filename": "x.txt"})
    await poll(lambda: side.task("A"), lambda t: t.get("statusMessage") == "a: waiting", what="A waiting")
    await poll(lambda: side.task("C"), lambda t: t.get("statusMessage") == "c: waiting", what="C waiting")
    waiting = await poll(lambda: side.task("B"), lambda t: t["status"] == "input_required", what="B asking")
    (key,) = waiting["inputRequests"]
    return str(key)


async def run_script(side: Side, host: HostApp) -> list[Exchange]:
    key = await prepare(side, host)
    answers = []
    for number, case in enumerate(script(), start=100):
        body, headers = case.build(side, number)
        answers.append(await side.post(body.replace(b"<KEY>", key.encode()), headers))
    base = standard_headers("tasks/get", side.ids["A"])
    answers.append(await side.other("GET", base))
    answers.append(await side.other("DELETE", base))
    notification = {"jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": side.ids["A"]}}
    answers.append(await side.post(json.dumps(notification).encode(), base))
    await host_release(host)
    return answers


async def host_release(host: HostApp) -> None:
    for label in ("a", "c"):
        host.release(label)


@asynccontextmanager
async def pair(**options: Any) -> AsyncIterator[tuple[tuple[Side, HostApp, Any], tuple[Side, HostApp, Any]]]:
    on_host, off_host = HostApp(**options), HostApp(**options)
    on_app = on_host.app.streamable_http_app()
    off_app = off_host.app.streamable_http_app(fast_path=False)
    async with (
        serve_http(on_app) as on_url,
        serve_http(off_app) as off_url,
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
    ):
        yield (Side(http, on_url), on_host, on_app), (Side(http, off_url), off_host, off_app)


def _differences(on: list[Exchange], off: list[Exchange]) -> list[str]:
    labels = [f"{c.method} {c}" for c in script()] + ["GET", "DELETE", "notification"]
    return [
        f"{label}:\n  on:  {a}\n  off: {b}" for label, a, b in zip(labels, on, off, strict=True) if a != b
    ]


@pytest.mark.parametrize("immediate_results", [False, True], ids=["tasks", "immediate-results"])
async def test_every_task_request_is_answered_the_same_with_and_without_the_fast_path(
    immediate_results: bool,
) -> None:
    async with pair(immediate_results=immediate_results) as ((on, on_host, on_app), (off, off_host, off_app)):
        with anyio.fail_after(TIMEOUT * 3):
            on_answers = await run_script(on, on_host)
            off_answers = await run_script(off, off_host)
        stats = on_app.state.tasks_fast_path
        assert not hasattr(off_app.state, "tasks_fast_path")
    assert _differences(on_answers, off_answers) == []
    statuses = {answer.status for answer in on_answers}
    assert {200, 202, 400, 403, 404, 405, 406, 421} <= statuses, statuses
    # The fast path really answered the requests it can (not everything fell through to the SDK).
    assert stats.answered >= 60, (stats.answered, stats.handed_on)
    assert stats.handed_on >= 50, (stats.answered, stats.handed_on)
    # Task tool calls too: those whose route creates a task at once (the 3 set-up calls and the
    # script's `fast` ones, whatever their outcome), and none of the others.
    assert stats.tool_calls == 3 + sum(case.fast for case in tool_cases()), stats.tool_calls


async def test_an_unchanged_task_advertising_a_longer_interval_is_answered_with_it() -> None:
    # The fast path sends an unchanged task's last answer again; the poll interval it advertises
    # is part of that answer, and adaptive polling lengthens it as the task ages.
    async with pair(adaptive_poll_max=60.0) as ((on, on_host, _), _):
        with anyio.fail_after(TIMEOUT * 2):
            await on.call("A", "gated", {"label": "a"})
            first = await poll(
                lambda: on.task("A"), lambda t: t.get("statusMessage") == "a: waiting", what="A"
            )
            await anyio.sleep(1.0)
            later = await on.task("A")
            on_host.release("a")
    assert (later["lastUpdatedAt"], later["statusMessage"]) == (
        first["lastUpdatedAt"],
        first["statusMessage"],
    )
    assert later["pollIntervalMs"] > first["pollIntervalMs"], (first, later)


async def test_a_refused_create_is_answered_by_the_sdk_from_the_outcome_the_fast_path_left() -> None:
    # One running task is the limit: the second call is refused (-32000 with retry data). The fast
    # path ran that call once and left the error for the SDK to write.
    async with pair(limits=Limits(max_active=1)) as ((on, on_host, on_app), (off, off_host, _)):
        with anyio.fail_after(TIMEOUT * 2):
            answers = []
            for side, host in ((on, on_host), (off, off_host)):
                await side.call("A", "gated", {"label": "a"})
                body, headers = ToolCase("quick", {"n": 1}).build(side, 9)
                answers.append(await side.post(body, headers))
                host.release("a")
        stats = on_app.state.tasks_fast_path
    assert answers[0] == answers[1]
    assert '"retryAfterMs":5000' in answers[0].body, answers[0]
    assert stats.tool_calls == 1, stats.tool_calls  # the create of A; the refusal went to the SDK
    assert stats.handed_on >= 1


async def test_the_elicitation_suite_runs_with_sdk_clients_capabilities_too() -> None:
    # The same comparison with a client that declares only elicitation and the extension.
    async with pair() as ((on, on_host, _), (off, off_host, _)):
        with anyio.fail_after(TIMEOUT * 2):
            answers = []
            for side, host in ((on, on_host), (off, off_host)):
                await side.call("A", "gated", {"label": "a"})
                case = Case("tasks/get", meta=request_meta(ELICITING))
                body, headers = case.build(side, 7)
                answers.append(await side.post(body, headers))
                host.release("a")
    assert answers[0] == answers[1]
    assert answers[0].status == 200


async def test_authenticated_servers_keep_the_sdk_path() -> None:
    host = HostApp(
        token_verifier=StaticTokens("alice"),
        auth=AuthSettings.model_validate(
            {"issuer_url": "http://127.0.0.1:9/", "resource_server_url": "http://127.0.0.1:9/mcp"}
            | {"validate_token_resource": False}
        ),
    )
    app = host.app.streamable_http_app()
    # The bearer check wraps the SDK's endpoint: the fast path is not installed, so the owner of
    # every task request comes from the SDK's own auth (tests/host/test_host_auth.py runs it).
    assert not hasattr(app.state, "tasks_fast_path")
    plain = HostApp().app.streamable_http_app()
    assert hasattr(plain.state, "tasks_fast_path")
