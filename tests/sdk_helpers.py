"""Helpers for the host tests: the official `mcp` SDK client, uvicorn on 127.0.0.1 and raw JSON-RPC.

- `serve_http(app)`: run an ASGI app under uvicorn on an ephemeral 127.0.0.1 port inside a task
  group (asyncio only) and yield the endpoint URL.
- `HostApp`: a `TaskServer` with one task tool per behaviour under test; `gated(label)` waits on
  an event the test releases, so "still working" is observed, never timed.
- `GetTaskRequest` / `UpdateTaskRequest` / `CancelTaskRequest`: typed `tasks/*` requests for
  `client.session.send_request`; `name_param = "taskId"` makes the SDK send `Mcp-Name`.
- `Tasks`: a thin wrapper over an `mcp.Client` that calls task tools raw (the SDK would refuse a
  `resultType: "task"` it has no claim for) and polls `tasks/get` until a condition holds;
  `connect(server)` gives one connected in process.
- `RawClient`: one POST per JSON-RPC request with the 2026-07-28 headers and `_meta` envelope the
  conformance harness sends (research/conformance.md §4.1), for cases the SDK client can't express.

Nothing here synchronises by sleeping: every wait polls observable state and is bounded by a
generous `anyio.fail_after`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
import uvicorn
from helpers import split_config
from mcp import Client, MCPError
from mcp.client import advertise
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from mcp_types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequestParams,
    ErrorData,
    Request,
    RequestParams,
    TextContent,
)
from mcp_types import Result as WireResult
from pydantic import BaseModel, ConfigDict

from mcptasks import (
    Accepted,
    Elicit,
    Inputs,
    ListRoots,
    ProtocolError,
    Result,
    Sample,
    TaskContext,
    TaskServer,
    ToolError,
)
from mcptasks.client import CancelTaskRequest, GetTaskRequest, UpdateTaskRequest
from mcptasks.wire import EXTENSION_ID, TERMINAL_STATUSES

PROTOCOL_VERSION = "2026-07-28"
TIMEOUT = 30.0
"""Upper bound of every wait (generous: a loaded 2-core machine only makes a test slower)."""

CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
OPT_IN: dict[str, Any] = {"extensions": {EXTENSION_ID: {}}}
"""Client capabilities that opt in to the tasks extension (and nothing else)."""
ELICITING: dict[str, Any] = {"elicitation": {}, **OPT_IN}
"""Client capabilities with elicitation and the tasks extension."""
HARNESS: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}, **OPT_IN}
"""What the conformance harness declares: every input capability and the tasks extension."""


async def answered_by_hand(context: ClientRequestContext, params: ElicitRequestParams) -> ErrorData:
    """An elicitation callback for tests that answer questions themselves through `tasks/update`.

    Passing it makes the SDK client declare `elicitation`, so the server may ask; it is never
    called, because task input travels in `inputRequests`, not as requests to the client.
    """
    raise AssertionError("the test answers input requests by hand through tasks/update")


async def sampled_by_hand(context: ClientRequestContext, params: Any) -> ErrorData:
    """A sampling callback for tests that answer by hand: the SDK client then declares `sampling`."""
    raise AssertionError("the test answers input requests by hand through tasks/update")


async def roots_by_hand(context: ClientRequestContext) -> ErrorData:
    """A roots callback for tests that answer by hand: the SDK client then declares `roots`."""
    raise AssertionError("the test answers input requests by hand through tasks/update")


BY_HAND: dict[str, Any] = {
    "elicitation_callback": answered_by_hand,
    "sampling_callback": sampled_by_hand,
    "list_roots_callback": roots_by_hand,
}
"""SDK `Client` options declaring every input capability, for tests that answer by hand."""


def tasks_extension() -> Any:
    """The client extension entry that advertises `io.modelcontextprotocol/tasks` on every request."""
    return advertise(EXTENSION_ID)


# -- uvicorn ---------------------------------------------------------------------------------


@asynccontextmanager
async def serve_http(app: Any, path: str = "/mcp", *, http: str = "auto") -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1:<ephemeral port> until the block ends; yield the endpoint URL.

    `http` is uvicorn's HTTP parser (`auto`: httptools, which mcptasks installs; or `h11`). Close
    every client before leaving the block: the graceful shutdown waits for open connections.
    """
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", http=http)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            with anyio.fail_after(TIMEOUT):
                while not server.started:
                    if server.should_exit:
                        raise RuntimeError("uvicorn failed to start")
                    await anyio.sleep(0.01)
            port = server.servers[0].sockets[0].getsockname()[1]
            yield f"http://127.0.0.1:{port}{path}"
        finally:
            server.should_exit = True


# -- a server with one tool per behaviour under test ----------------------------------------------


class Confirm(BaseModel):
    confirm: bool


class Name(BaseModel):
    name: str


PROTOCOL_ERROR_CODE = -32042
"""The JSON-RPC error code `protocol_error` fails its task with."""


class HostApp:
    """A `TaskServer` whose task tools the test controls.

    `gated(label)` sets a status, then waits until the test calls `release(label)`; its body's
    teardown sets `stopped(label)`, so a test can see a cancelled body really stop. Build it
    inside the running event loop (the gates are anyio events). Immediate results are off by
    default so that every opted-in call takes the task path these tests observe.
    """

    def __init__(self, name: str = "mcptasks-host-tests", **server_options: Any) -> None:
        self._gates: dict[str, anyio.Event] = {}
        self._stopped: dict[str, anyio.Event] = {}
        server_options.setdefault("immediate_results", False)
        config, rest = split_config(server_options)
        self.app = app = TaskServer(name, config=config, **rest)
        self.mcp = app.mcp
        self._add_outcome_tools(app)
        _add_input_tools(app)

    def _add_outcome_tools(self, app: TaskServer) -> None:
        @app.tool()
        def greet(name: str = "World") -> str:
            """Say hello (an ordinary tool)."""
            return f"Hello, {name}!"

        @app.task_tool(
            poll_interval=0.05,
            ttl=600,
            title="Gated job",
            annotations={"readOnlyHint": True},
            meta={"io.example/owner": "host-tests"},
        )
        async def gated(label: str):
            """Wait until the test releases `label`."""
            try:
                yield f"{label}: waiting"
                await self.gate(label).wait()
                yield Result(f"{label}: done")
            finally:
                self.stopped(label).set()

        @app.task_tool(poll_interval=0.05)
        async def quick(n: int = 1):
            """Finish at once (status yields are dropped when run inline)."""
            yield f"counting to {n}"
            yield Result(f"counted to {n}")

        @app.task_tool(task_support="required", poll_interval=0.05)
        async def required_job():
            """Only ever runs as a task."""
            yield Result("required job done")

        @app.task_tool(poll_interval=0.05)
        async def tool_error():
            """Fail with a tool error (the task still completes)."""
            yield "trying"
            raise ToolError("disk quota exceeded")

        @app.task_tool(poll_interval=0.05)
        async def protocol_error():
            """Fail with a JSON-RPC error (the task fails)."""
            yield "calling the backend"
            raise ProtocolError(PROTOCOL_ERROR_CODE, "backend unavailable", {"retryable": True})

    def gate(self, label: str) -> anyio.Event:
        return self._gates.setdefault(label, anyio.Event())

    def release(self, label: str) -> None:
        self.gate(label).set()

    def stopped(self, label: str) -> anyio.Event:
        return self._stopped.setdefault(label, anyio.Event())


def _add_input_tools(app: TaskServer) -> None:
    """The tools of `HostApp` that ask the client (elicitation, sampling, roots)."""

    @app.task_tool(poll_interval=0.05)
    async def ask(filename: str):
        """Ask before deleting `filename`."""
        answer = yield Elicit(f"Delete {filename}?", schema=Confirm)
        confirmed = isinstance(answer, Accepted) and answer.data.confirm
        yield Result(f"deleted {filename}" if confirmed else f"kept {filename}")

    @app.task_tool(poll_interval=0.05)
    async def two_keys():
        """Ask two questions at once."""
        name, go = yield Inputs(Elicit("Your name?", schema=Name), Elicit("Go ahead?", schema=Confirm))
        who = name.data.name if isinstance(name, Accepted) else "someone"
        decision = "go" if isinstance(go, Accepted) and go.data.confirm else "stop"
        yield Result(f"{who} says {decision}")

    @app.task_tool(task_support="required", poll_interval=0.05, input_before_task=True)
    async def before():
        """Ask for a name on the call itself, then greet in a task."""
        answer = yield Elicit("What is your name?", schema=Name, key="user_name", before_task=True)
        name = answer.data.name if isinstance(answer, Accepted) else "stranger"
        yield f"greeting {name}"
        yield Result(f"Hello, {name}!")

    @app.task_tool(poll_interval=0.05)
    async def summarize(topic: str):
        """Ask the client's model, then the client's roots; return structured content."""
        reply = yield Sample(f"Summarize {topic}", max_tokens=50)
        roots = (yield ListRoots()).roots
        yield Result(
            {
                "summary": reply.text,
                "model": reply.model,
                "stopReason": reply.stop_reason,
                "roots": [root.uri for root in roots],
            }
        )

    @app.task_tool(poll_interval=0.05)
    async def with_context(ctx: TaskContext, topic: str) -> str:
        """A plain coroutine using the imperative context."""
        await ctx.status(f"{topic}: asking")
        answer = await ctx.elicit(f"Publish {topic}?", Confirm)
        verdict = "published" if isinstance(answer, Accepted) and answer.data.confirm else "held"
        return f"{topic} {verdict} (task {ctx.task_id is not None})"


# -- typed tasks/* requests for the SDK client -------------------------------------------------


class MisroutedParams(RequestParams):
    """`{taskId, routing}`: the SDK puts `routing` into `Mcp-Name` (a deliberate mismatch)."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    routing: str


class MisroutedGetTaskRequest(Request[MisroutedParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: MisroutedParams
    name_param = "routing"


class ListTasksRequest(Request[RequestParams, Literal["tasks/list"]]):
    method: Literal["tasks/list"] = "tasks/list"
    params: RequestParams


class TaskIdParams(RequestParams):
    """`{"taskId": ...}` params, for requests the client does not type (removed methods)."""

    task_id: str


class ResultTaskRequest(Request[TaskIdParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: TaskIdParams


class AnyResult(WireResult):
    """Any result, every wire key kept."""

    model_config = ConfigDict(extra="allow")


def accept(**content: Any) -> dict[str, Any]:
    """An accepted elicitation answer with `content` as its fields."""
    return {"action": "accept", "content": content}


def text(result: Mapping[str, Any]) -> str:
    """The text blocks of a wire `CallToolResult` dict, joined."""
    return "".join(block["text"] for block in result.get("content", []) if block.get("type") == "text")


def the_input_request(task: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The one outstanding `(key, request)` of an `input_required` task."""
    requests = task.get("inputRequests") or {}
    assert len(requests) == 1, task
    ((key, request),) = requests.items()
    return key, request


async def mcp_error(awaitable: Any) -> MCPError:
    """Await `awaitable` and return the `MCPError` it raised (fail when it raised none)."""
    try:
        value = await awaitable
    except MCPError as exc:
        return exc
    raise AssertionError(f"expected an MCPError, got {value!r}")


def texts(result: CallToolResult) -> list[str]:
    """The text blocks of an SDK `CallToolResult`."""
    return [block.text for block in result.content if isinstance(block, TextContent)]


def wire(model: BaseModel) -> dict[str, Any]:
    """A result model as the wire dict (keys the server sent, `_meta` dropped)."""
    data = model.model_dump(by_alias=True, mode="json", exclude_unset=True)
    data.pop("_meta", None)
    return data


# -- the SDK client with tasks ---------------------------------------------------------------


class Tasks:
    """Task calls over an entered `mcp.Client` (which should advertise the tasks extension).

    Tools are called raw (the SDK would refuse a `resultType: "task"` it has no claim for); every
    `tasks/get` records a changed `statusMessage` in `seen_status`, so a test can see what a task
    said on the way.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.seen_status: list[str] = []

    @property
    def session(self) -> Any:
        return self.client.session

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`tools/call`, the raw result dict whatever its `resultType` (`meta`: extra `_meta` keys)."""
        params = CallToolRequestParams(
            name=name,
            arguments=dict(arguments or {}),
            input_responses=dict(input_responses) if input_responses is not None else None,
            request_state=request_state,
            _meta=dict(meta) if meta is not None else None,
        )
        result = await self.session.send_request(CallToolRequest(params=params), AnyResult)
        return wire(result)

    async def start(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, meta: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Call a task tool and assert a task was created; return the `CreateTaskResult`."""
        created = await self.call(name, arguments, meta=meta)
        assert created.get("resultType") == "task", created
        return created

    async def run(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a task tool and return its final state, `{"status", "result", ...}`.

        A body that ends without suspending may be answered at once with its result
        (`resultType: "complete"`) instead of a task; both come back in the same shape.
        """
        created = await self.call(name, arguments)
        if created["resultType"] == "task":
            return await self.finish(str(created["taskId"]))
        assert created["resultType"] == "complete", created
        return {"status": "completed", "result": created}

    async def get(self, task_id: str) -> dict[str, Any]:
        task = wire(await self.session.send_request(GetTaskRequest.of(task_id), AnyResult))
        message = task.get("statusMessage")
        if message is not None and (not self.seen_status or self.seen_status[-1] != message):
            self.seen_status.append(message)
        return task

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        request = UpdateTaskRequest.of(task_id, dict(responses))
        return wire(await self.session.send_request(request, AnyResult))

    async def cancel(self, task_id: str) -> dict[str, Any]:
        request = CancelTaskRequest.of(task_id)
        return wire(await self.session.send_request(request, AnyResult))

    async def wait(
        self, task_id: str, predicate: Callable[[dict[str, Any]], bool], what: str = "the condition"
    ) -> dict[str, Any]:
        """Poll `tasks/get` until `predicate` holds; return that snapshot. A task that ended
        without it fails at once (a terminal task never changes again)."""

        def done(task: dict[str, Any]) -> bool:
            if predicate(task):
                return True
            if task["status"] in TERMINAL_STATUSES:
                raise AssertionError(f"the task ended before {what}: {task}")
            return False

        return await poll(lambda: self.get(task_id), done, what=what)

    async def wait_status(self, task_id: str, statuses: str | Iterable[str]) -> dict[str, Any]:
        wanted = {statuses} if isinstance(statuses, str) else set(statuses)
        return await self.wait(task_id, lambda t: t["status"] in wanted, what=f"status in {sorted(wanted)}")

    async def finish(self, task_id: str, *, within: float = TIMEOUT) -> dict[str, Any]:
        """Poll until the task ends (for at most `within` seconds); return its last snapshot."""
        return await poll(
            lambda: self.get(task_id),
            lambda t: t["status"] in TERMINAL_STATUSES,
            what="a terminal status",
            within=within,
        )

    async def wait_input(self, task_id: str, *, count: int | None = None) -> dict[str, Any]:
        """Wait until the task is input_required (with exactly `count` keys when given)."""

        def ready(task: dict[str, Any]) -> bool:
            if task["status"] != "input_required":
                return False
            return count is None or len(task.get("inputRequests", {})) == count

        return await self.wait(task_id, ready, what="input requests")


@asynccontextmanager
async def connect(server: Any, *, tasks: bool = True, **options: Any) -> AsyncIterator[Tasks]:
    """An SDK client connected in process to a `TaskServer` (or an `MCPServer`). With `tasks` it
    advertises the tasks extension and declares `elicitation` (the tests answer questions by hand
    through `tasks/update`); `options` go to `mcp.Client` (`elicitation_callback=None` for none)."""
    target = getattr(server, "mcp", server)
    extensions = [tasks_extension()] if tasks else []
    options.setdefault("elicitation_callback", answered_by_hand if tasks else None)
    async with Client(target, extensions=extensions, **options) as client:
        yield Tasks(client)


async def poll(
    look: Callable[[], Any],
    predicate: Callable[[Any], bool],
    *,
    what: str = "the condition",
    within: float = TIMEOUT,
) -> Any:
    """Call `look()` until `predicate` holds on its value (a tiny pause between looks, never as sync)."""
    last: Any = None
    try:
        with anyio.fail_after(within):
            while True:
                last = await look()
                if predicate(last):
                    return last
                await anyio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}") from None


async def eventually(check: Callable[[], bool], what: str) -> None:
    """Poll `check()` until it holds (a tiny pause between looks, never as sync)."""

    async def look() -> bool:
        return check()

    await poll(look, bool, what=what)


# -- raw JSON-RPC over HTTP -------------------------------------------------------------------


@dataclass
class RawResponse:
    """One HTTP exchange: status, content type and the JSON-RPC message that answered the request
    (`headers`: all the response's headers)."""

    status: int
    content_type: str
    message: dict[str, Any]
    headers: httpx2.Headers = field(default_factory=httpx2.Headers)

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        return dict(self.message["result"])

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.message, self.message
        return dict(self.message["error"])


_ids = itertools.count(1)

_NAME_FIELD = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def request_meta(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The 2026-07-28 `_meta` envelope of the conformance harness."""
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "conformance-test-client", "version": "1.0.0"},
        CLIENT_CAPABILITIES_META: dict(capabilities),
    }


def _answer(body: str, content_type: str, request_id: int) -> dict[str, Any]:
    if content_type.startswith("text/event-stream"):
        for line in body.splitlines():
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:].strip())
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return dict(message)
        raise AssertionError(f"no answer to request {request_id} in the event stream: {body!r}")
    return dict(json.loads(body))


class RawClient:
    """Sends JSON-RPC requests exactly the way the conformance harness does (one POST each)."""

    def __init__(
        self,
        http: httpx2.AsyncClient,
        url: str,
        *,
        capabilities: Mapping[str, Any] = HARNESS,
    ) -> None:
        self.http = http
        self.url = url
        self.capabilities = dict(capabilities)

    async def send(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        headers: Mapping[str, str | None] | None = None,
    ) -> RawResponse:
        """POST `method`; `headers` override the standard ones (a None value removes a header)."""
        request_id = next(_ids)
        body_params = dict(params or {})
        body_params["_meta"] = {
            **request_meta(self.capabilities if capabilities is None else capabilities),
            **dict(body_params.get("_meta") or {}),
        }
        standard: dict[str, str | None] = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": method,
        }
        name_field = _NAME_FIELD.get(method)
        if name_field is not None and isinstance(body_params.get(name_field), str):
            standard["Mcp-Name"] = body_params[name_field]
        lowered = {k.lower(): k for k in standard}
        for key, value in (headers or {}).items():
            standard.pop(lowered.get(key.lower(), key), None)
            standard[key] = value
        sent = {k: v for k, v in standard.items() if v is not None}
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}
        response = await self.http.post(self.url, content=json.dumps(payload), headers=sent)
        content_type = response.headers.get("content-type", "")
        message = _answer(response.text, content_type, request_id)
        assert message.get("id") == request_id, message
        return RawResponse(response.status_code, content_type, message, response.headers)

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None, **params: Any) -> RawResponse:
        return await self.send("tools/call", {"name": name, "arguments": dict(arguments or {}), **params})

    async def get(self, task_id: str) -> dict[str, Any]:
        return (await self.send("tasks/get", {"taskId": task_id})).result

    async def finish(self, task_id: str) -> dict[str, Any]:
        return await poll(
            lambda: self.get(task_id), lambda t: t["status"] in TERMINAL_STATUSES, what="a terminal status"
        )


# -- auth -------------------------------------------------------------------------------------


class StaticTokens:
    """A `TokenVerifier`: each known bearer token is its own subject."""

    def __init__(self, *names: str) -> None:
        self.names = frozenset(names)

    async def verify_token(self, token: str) -> AccessToken | None:
        if token not in self.names:
            return None
        return AccessToken(token=token, client_id=f"{token}-client", scopes=[], subject=token)


def bearer(token: str) -> httpx2.AsyncClient:
    """An HTTP client that sends `Authorization: Bearer <token>`."""
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT)


@asynccontextmanager
async def as_user(url: str, token: str) -> AsyncIterator[Tasks]:
    """An SDK client over HTTP, opted in to tasks, authenticated as `token`."""
    async with bearer(token) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(
            transport, extensions=[tasks_extension()], elicitation_callback=answered_by_hand
        ) as client:
            yield Tasks(client)
