"""The Tasks extension as plain functions: `tools/call` interception and `tasks/get|update|cancel`.

A host hands in the request's params, `_meta`, headers and owner; it gets back JSON-able dicts
(every result carries `resultType`) or a `ProtocolError` to send as a JSON-RPC error. Nothing here
imports a host SDK, so any host can serve it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any, NamedTuple

import anyio

from mcptasks._authoring.capabilities import (
    METHOD_CAPABILITY,
    gated,
    input_capabilities,
    missing_capabilities,
    missing_capabilities_error,
)
from mcptasks._authoring.context import TaskContext
from mcptasks._authoring.results import error_result
from mcptasks._authoring.tool import FallbackMode, InvalidArguments, TaskTool
from mcptasks._authoring.yields import InputRequest
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.driver import (
    InlineChannel,
    Outcome,
    cancelled_here,
    outcome_of_abort,
    outcome_of_exception,
)
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.fallback import (
    ANSWER_TOOL,
    CANCEL_TOOL,
    FALLBACK_TOOL_NAMES,
    STATUS_ONLY,
    STATUS_TOOL,
    call_fallback_tool,
    fallback_tool_definitions,
    started_result,
)
from mcptasks._runtime.inline_peer import InlinePeer, PeerChannel
from mcptasks._runtime.limits import reached
from mcptasks._runtime.mrtr import InputNeeded, StartedBody, SyncRounds, advance_to_task
from mcptasks._runtime.outages import reported_as_unavailable
from mcptasks._runtime.parking import InlineSession, ParkedCalls
from mcptasks._runtime.related import StoreRelatedTasks, kept_related_ids
from mcptasks._runtime.request_params import (
    idempotency_key,
    missing_extension_error,
    opted_in_params,
    parse_params,
    task_id_param,
)
from mcptasks._runtime.request_state import RequestStateCodec
from mcptasks._runtime.routes import Route, route_of
from mcptasks._runtime.routing_headers import MissingNameWarnings, check_routing_headers
from mcptasks._runtime.task_results import complete, create_task_result, detailed_task
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import TaskRecord
from mcptasks.wire import (
    EXTENSION_ID,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CancelTaskParams,
    GetTaskParams,
    UpdateTaskParams,
    client_capabilities,
    client_opted_in,
    missing_capability_data,
)

ANONYMOUS_OWNER = "anonymous"
"""The owner of tasks created without an authenticated principal (bearer-id semantics)."""


def before_task_only(request: InputRequest) -> bool:
    """Input answered synchronously before a task exists: only requests marked `before_task`."""
    return request.before_task


def known_method(request: InputRequest) -> bool:
    """Input an inline call can carry in `input_required` rounds: the client methods MRTR knows."""
    return request.before_task or request.method in METHOD_CAPABILITY


def not_replay_safe_error(tool: str, full: tuple[str, int] | None = None) -> ProtocolError:
    """-32021 for an inline round of a tool that must not be replayed and cannot be kept here
    (`full`: the bound of kept calls that was reached, from `ParkedCalls.full`)."""
    data = missing_capability_data()
    if full is None:
        why = (
            "(the retry reached another server, the server restarted, the call waited too long, "
            "or too many calls wait)"
        )
    else:
        scope, limit = full
        why = f"({reached(scope, limit, 'inline calls waiting for input')})"
        data.update(reason="too_many_parked_calls", limit=limit, scope=scope)
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Tool {tool!r} is not safe to run again from the start, and this server cannot keep the call "
        f"suspended until its retry {why}. Call it as a task: declare "
        f"extensions[{EXTENSION_ID!r}] in the request's client capabilities.",
        data,
    )


REQUIRED_TOOL_REMEDY = (
    f"To call it, declare that extension in the request's client capabilities (Claude Code's "
    f"print mode, `claude -p`, declares none: use its interactive mode). Or the server's operator "
    f'can serve with fallback "tools" (EngineConfig(fallback="tools") or MCPTASKS_FALLBACK=tools), '
    f"which starts the task for any client and lists {STATUS_TOOL}, {ANSWER_TOOL} and {CANCEL_TOOL} "
    f"to follow it."
)
"""What the -32021 answer to a task-only tool called without the tasks extension says to do."""


def required_tool_error(tool: str) -> ProtocolError:
    """-32021 for a call of a tool that runs only as a task, made without the tasks extension:
    `missing_extension_error`'s code and data, its message followed by `REQUIRED_TOOL_REMEDY`."""
    refused = missing_extension_error(f"Tool {tool!r}")
    return ProtocolError(refused.code, f"{refused.message}. {REQUIRED_TOOL_REMEDY}", refused.data)


class _Call(NamedTuple):
    """One `tools/call` for a task tool, once its arguments are valid."""

    tool: TaskTool
    arguments: Mapping[str, Any] | None
    validated: dict[str, Any]
    meta: Mapping[str, Any] | None
    declared: Mapping[str, Any]
    owner: str
    input_responses: object
    request_state: object


def _parked_calls(config: EngineConfig) -> ParkedCalls:
    """The registry of parked inline calls `config` asks for (`parked_limit`, per-owner share)."""
    limit = config.parked_limit
    return ParkedCalls(
        limit=limit, seconds=config.parked_seconds, per_owner=config.limits.parked_share(limit)
    )


def _declared(
    meta: Mapping[str, Any] | None, tasks_allowed: bool, peer: InlinePeer | None
) -> Mapping[str, Any]:
    """The client capabilities a call may rely on: its request's (2026-07-28), or those its legacy
    session declared once at initialize (none when the host did not say)."""
    if tasks_allowed:
        return client_capabilities(meta)
    return (peer.session_capabilities if peer is not None else None) or {}


def _inline_result(outcome: Outcome) -> dict[str, Any]:
    """The reply of an inline run: its result, or its error as a JSON-RPC error."""
    if outcome.error is not None:
        error = outcome.error
        raise ProtocolError(int(error["code"]), str(error["message"]), error.get("data"))
    assert outcome.result is not None
    return complete(outcome.result)


class TasksProtocol:
    """Serves the extension for a set of task tools on top of a `TaskEngine`.

    Its settings come from the engine's `EngineConfig`: `fallback` is the server-wide fallback
    mode (see `mcptasks._runtime.fallback`). With `immediate_results` (default), a task whose body
    returns at once (see `TaskEngine.settled`) is answered with its `CallToolResult`, which the
    extension allows; the task record exists all the same. `parked_limit` / `parked_seconds` bound
    the inline calls kept suspended at a question between rounds (see `mcptasks._runtime.parking`);
    `secret` signs `requestState`.
    """

    def __init__(self, engine: TaskEngine, tools: Iterable[TaskTool] = ()) -> None:
        self.engine = engine
        self.codec = RequestStateCodec(engine.config.secret)
        self.parked = _parked_calls(engine.config)
        self.missing_name_warnings = MissingNameWarnings()
        self.tools: dict[str, TaskTool] = {}
        for tool in tools:
            self.add_tool(tool)

    def configure(self, config: EngineConfig) -> None:
        """Reconfigure the engine and this protocol before the server starts."""
        self.engine.configure(config)
        self.codec = RequestStateCodec(config.secret)
        self.parked = _parked_calls(config)

    @property
    def fallback(self) -> FallbackMode:
        """The server-wide fallback mode."""
        return self.engine.config.fallback

    @property
    def immediate_results(self) -> bool:
        """Whether a body that finished without suspending is answered with its result."""
        return self.engine.config.immediate_results

    def add_tool(self, tool: TaskTool) -> None:
        """Register a task tool; names must be unique."""
        if not isinstance(tool, TaskTool):
            raise TypeError(f"expected a TaskTool (decorate the function with @task_tool), got {tool!r}")
        if tool.name in FALLBACK_TOOL_NAMES:
            raise ValueError(f"{tool.name!r} is the name of a generated fallback tool; rename the task tool")
        if tool.name in self.tools and self.tools[tool.name] is not tool:
            raise ValueError(f"a task tool named {tool.name!r} is already registered")
        self.tools[tool.name] = tool
        self.engine.register(tool)

    def get_tool(self, name: str) -> TaskTool | None:
        """The task tool called `name`, if any."""
        return self.tools.get(name)

    def fallback_mode(self, tool: TaskTool) -> FallbackMode:
        """The fallback mode in force for `tool` (its own, else the server's)."""
        return tool.fallback if tool.fallback is not None else self.fallback

    @property
    def fallback_tools_enabled(self) -> bool:
        """Whether any task tool uses the `"tools"` fallback (then the generated tools are listed)."""
        return any(self.fallback_mode(tool) == "tools" for tool in self.tools.values())

    @property
    def generated_tools(self) -> frozenset[str]:
        """The generated tools this server lists and serves: all three with the `"tools"`
        fallback; `task_status` alone with `status_tool`; else none."""
        if self.fallback_tools_enabled:
            return FALLBACK_TOOL_NAMES
        return STATUS_ONLY if self.engine.config.status_tool else frozenset()

    def fallback_tool_definitions(self) -> list[dict[str, Any]]:
        """The generated tools' definitions (`task_status`, `task_answer`, `task_cancel`) this
        server lists."""
        return fallback_tool_definitions(self.generated_tools)

    def is_fallback_tool(self, name: str) -> bool:
        """Whether `name` is a generated tool this server serves."""
        return name in self.generated_tools

    async def call_fallback_tool(
        self, name: str, arguments: Mapping[str, Any] | None, *, owner: str = ANONYMOUS_OWNER
    ) -> dict[str, Any]:
        """Answer a call to a generated fallback tool (a `CallToolResult` dict with `resultType`)."""
        with reported_as_unavailable(self.engine.store):
            result = await call_fallback_tool(
                self.engine, name, arguments, owner=owner, listed=self.generated_tools
            )
        return complete(result)

    def creates_task_at_once(self, name: str, meta: Mapping[str, Any] | None) -> bool:
        """Whether `call_tool(name, ..., meta=meta)` on a 2026-07-28 connection takes `Route.TASK`:
        a task is created at once (or answered inline if its body ends at once), with no input
        rounds first and no body run inline to its end."""
        tool = self.tools.get(name)
        if tool is None:
            return False
        request_meta = meta if meta is None or isinstance(meta, dict) else dict(meta)
        return self._route(tool, request_meta, client_capabilities(request_meta), True) is Route.TASK

    def _route(
        self, tool: TaskTool, meta: Mapping[str, Any] | None, declared: Mapping[str, Any], tasks_allowed: bool
    ) -> Route:
        return route_of(
            opted_in=client_opted_in(meta),
            tasks_allowed=tasks_allowed,
            fallback=self.fallback_mode(tool),
            task_support=tool.task_support,
            input_before_task=tool.input_before_task,
            can_ask=bool(input_capabilities(declared)),
        )

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        meta: Mapping[str, Any] | None,
        owner: str = ANONYMOUS_OWNER,
        tasks_allowed: bool = True,
        input_responses: object = None,
        request_state: object = None,
        peer: InlinePeer | None = None,
    ) -> dict[str, Any]:
        """Answer `tools/call` for a task tool.

        - This request opted in: a task (`CreateTaskResult`). A generator's leading requests marked
          `before_task=True` are resolved first with `input_required` rounds on this call.
        - Not opted in, optional tool: the body runs inline; its input requests become
          `input_required` rounds when the client declared the matching capability.
        - Not opted in, required tool: -32021 naming the extension.

        Invalid arguments give an `isError` result and create nothing. `tasks_allowed=False` (a
        legacy connection) means neither tasks nor `input_required` rounds, whatever `_meta` says.
        `peer` is how the host reaches the caller of a body run inline to its result (see
        `mcptasks._runtime.inline_peer`): its statuses become progress notifications and, on a
        legacy connection, its questions requests to the client that its session declared.
        The route is decided once by `route_of` (see `mcptasks._runtime.routes`).
        """
        tool = self.tools.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})
        request_meta = meta if meta is None or isinstance(meta, dict) else dict(meta)
        declared = _declared(request_meta, tasks_allowed, peer)
        route = self._route(tool, request_meta, declared, tasks_allowed)
        if route is Route.REFUSE:
            raise required_tool_error(name)
        if tool.required_capabilities and route is not Route.STARTED_FOR_MODEL:
            missing = missing_capabilities(tool.required_capabilities, declared)
            if missing:
                raise missing_capabilities_error(f"Tool {name!r}", missing)
        try:
            validated = tool.validate_arguments(arguments)
        except InvalidArguments as exc:
            return complete(error_result(str(exc)))
        call = _Call(
            tool, arguments, validated, request_meta, declared, owner, input_responses, request_state
        )
        if route is Route.TASK:
            return await self._task(call)
        if route is Route.TASK_AFTER_INPUT:
            return await self._task_after_input(call)
        if route is Route.STARTED_FOR_MODEL:
            return await self._started_for_model(call)
        if route is Route.INLINE_ROUNDS:
            return await self._inline_rounds(call)
        return await self._inline(call, declared, peer)

    async def _start(
        self,
        call: _Call,
        prepared: StartedBody | None = None,
        *,
        asking: bool = True,
        defer: bool = False,
        related: StoreRelatedTasks | None = None,
    ) -> TaskRecord:
        """Create the call's task (`asking`: its body may ask what the client declared it answers;
        `defer`: `TaskEngine.start`'s, the caller calls `settled` next; `related`: the related
        tasks already checked for this call, else they are checked here)."""
        with reported_as_unavailable(self.engine.store):
            return await self.engine.start(
                call.tool,
                call.arguments,
                owner=call.owner,
                validated=call.validated,
                prepared=prepared,
                idempotency_key=idempotency_key(call.meta),
                client_capabilities=input_capabilities(call.declared) if asking else None,
                related_task_ids=related.ids if related is not None else await self._related(call),
                defer=defer,
            )

    async def _related(self, call: _Call) -> list[str]:
        """The related task ids `call` names that its caller may see (`related_tasks` on; see
        `mcptasks._runtime.related`); -32602 for a malformed value, before any task exists."""
        if not self.engine.config.related_tasks:
            return []
        store = self.engine.store
        with reported_as_unavailable(store):
            return await kept_related_ids(call.meta, partial(store.get, owner=call.owner))

    async def _task(self, call: _Call) -> dict[str, Any]:
        """`Route.TASK`: create the task; answer with its result if the body ended at once."""
        record = await self._start(call, defer=self.immediate_results)
        if self.immediate_results:
            with reported_as_unavailable(self.engine.store):  # it may write the record
                early = await self.engine.settled(record.task_id)
            if early is not None and early.result is not None:
                return complete(early.result)
        return create_task_result(record, self.engine.poll_interval_ms(record))

    async def _task_after_input(self, call: _Call) -> dict[str, Any]:
        """`Route.TASK_AFTER_INPUT`: resolve `before_task` input by replayed rounds, then create the task."""
        tool = call.tool
        related = StoreRelatedTasks(
            await self._related(call), partial(self.engine.store.get, owner=call.owner)
        )
        rounds = self._rounds(tool, call.arguments, call.input_responses, call.request_state)
        replay = rounds.replay_channel(before_task_only, durable=tool.durable)
        channel = gated(replay, call.declared, tool.name)
        context = TaskContext(channel, owner=call.owner, tool=tool.name, related=related)
        try:
            body = tool.open_body(call.validated, context, self.engine.threads_for(tool, call.owner))
            prepared = (await advance_to_task(channel, body, context))._replace(entries=tuple(replay.entries))
        except InputNeeded as needed:
            return rounds.input_required(needed.requests, replay.answers)
        except ProtocolError:
            raise
        except Exception as exc:
            outcome = outcome_of_exception(exc, tool.name)
            assert outcome.result is not None
            return complete(outcome.result)
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()) and cancelled_here():
                raise
            error = outcome_of_abort(exc, tool.name).error
            assert error is not None
            raise ProtocolError(int(error["code"]), str(error["message"]), error.get("data")) from None
        record = await self._start(call, prepared, related=related)
        return create_task_result(record, self.engine.poll_interval_ms(record))

    async def _started_for_model(self, call: _Call) -> dict[str, Any]:
        """`Route.STARTED_FOR_MODEL`: create the task and tell the model how to follow it."""
        record = await self._start(call, asking=False)
        return complete(started_result(record, self.engine.poll_interval_ms(record)))

    async def _inline(
        self, call: _Call, declared: Mapping[str, Any], peer: InlinePeer | None
    ) -> dict[str, Any]:
        """`Route.INLINE`: run the body to its result; a question reaches the client only through
        `peer` (a legacy session that declared the capability)."""
        name = call.tool.name
        channel = gated(InlineChannel(name) if peer is None else PeerChannel(name, peer), declared, name)
        outcome = await self.engine.run_inline(call.tool, call.validated, owner=call.owner, channel=channel)
        return _inline_result(outcome)

    async def _inline_rounds(self, call: _Call) -> dict[str, Any]:
        """`Route.INLINE_ROUNDS`: run inline; questions become `input_required` rounds.

        The body runs in the background and stays suspended at a question between rounds when
        the retry comes back here; otherwise the retry replays it (or, for a tool that is not
        replay-safe, is refused).
        """
        tool, owner = call.tool, call.owner
        rounds = self._rounds(tool, call.arguments, call.input_responses, call.request_state)
        session = self.parked.claim(rounds.parked, tool=tool.name, digest=rounds.digest, owner=owner)
        if session is not None:
            session.resume(rounds.responses)
        else:
            if rounds.retry and not tool.replay_safe:
                raise not_replay_safe_error(tool.name)
            session = InlineSession(
                self.parked,
                tool=tool.name,
                owner=owner,
                digest=rounds.digest,
                answers=rounds.answers,
                allowed=known_method,
            )
            channel = gated(session.channel, call.declared, tool.name)

            async def body() -> Outcome:
                return await self.engine.run_inline(tool, call.validated, owner=owner, channel=channel)

            self.engine.spawn(lambda: session.run(body))
        needed = await session.next_stop()
        if needed is None:
            if session.outcome is None:
                raise ProtocolError(INTERNAL_ERROR, f"Tool {tool.name!r} was stopped before it finished")
            return _inline_result(session.outcome)
        answers = dict(session.channel.answers)
        full = self.parked.full(owner)
        if full is None and self.parked.park(session):
            return rounds.input_required(needed, answers, parked=session.id)
        session.cancel()
        if not tool.replay_safe:
            raise not_replay_safe_error(tool.name, full)
        return rounds.input_required(needed, answers)

    def _rounds(
        self,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        input_responses: object,
        request_state: object,
    ) -> SyncRounds:
        return SyncRounds(
            self.codec, tool, arguments, input_responses=input_responses, request_state=request_state
        )

    async def handle(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        owner: str = ANONYMOUS_OWNER,
        headers: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
        tasks_allowed: bool = True,
        over_transport: bool = False,
    ) -> dict[str, Any]:
        """Answer `tasks/get`, `tasks/update` or `tasks/cancel` (and refuse the removed methods).

        `meta` defaults to `params["_meta"]`; `headers` (HTTP only) enables the routing-header
        check. `over_transport`: the request was read from a transport, so a `tasks/get` need not
        yield to other tasks before reading the store (`TaskEngine.get`'s `yield_first`). Errors:
        -32601 unknown/removed method, -32021 no opt-in in this request, -32602 bad params or
        unknown/foreign task, -32020 header mismatch.
        """
        params = opted_in_params(method, params, meta, tasks_allowed)
        if method == "tasks/get":
            record, interval = await self._read(params, owner, headers, meta, over_transport)
            return detailed_task(record, interval)
        if method == "tasks/update":
            update = parse_params(UpdateTaskParams, method, params)
            self._check_headers(method, update.task_id, headers, meta, params)
            with reported_as_unavailable(self.engine.store):
                await self.engine.update(update.task_id, update.input_responses, owner=owner)
            return complete()
        task_id = task_id_param(CancelTaskParams, method, params)
        self._check_headers(method, task_id, headers, meta, params)
        with reported_as_unavailable(self.engine.store):
            await self.engine.cancel(task_id, owner=owner)
        return complete()

    async def read_task(
        self,
        params: Mapping[str, Any] | None,
        *,
        owner: str = ANONYMOUS_OWNER,
        headers: Mapping[str, str] | None = None,
        meta: Mapping[str, Any] | None = None,
        over_transport: bool = False,
    ) -> tuple[TaskRecord, int]:
        """What `handle("tasks/get", ...)` answers with, before it is rendered: the record and the
        `pollIntervalMs` to advertise (`detailed_task(record, interval)` is the result). The same
        checks and errors; a host that keeps the rendered answer of an unchanged task (the same
        `task_id`, `version` and interval) can send it again."""
        params = opted_in_params("tasks/get", params, meta, True)
        return await self._read(params, owner, headers, meta, over_transport)

    def _check_headers(
        self,
        method: str,
        task_id: str,
        headers: Mapping[str, str] | None,
        meta: Mapping[str, Any] | None,
        params: Mapping[str, Any],
    ) -> None:
        """`check_routing_headers` with the engine's `accept_missing_mcp_name`; an accepted
        missing `Mcp-Name` is warned about once per client."""
        lenient = self.engine.config.accept_missing_mcp_name
        if check_routing_headers(method, task_id, headers, accept_missing_name=lenient) and headers:
            if meta is None:
                raw = params.get("_meta")
                meta = raw if isinstance(raw, Mapping) else None
            self.missing_name_warnings.accepted(method, meta, headers)

    async def _read(
        self,
        params: Mapping[str, Any],
        owner: str,
        headers: Mapping[str, str] | None,
        meta: Mapping[str, Any] | None,
        over_transport: bool,
    ) -> tuple[TaskRecord, int]:
        task_id = task_id_param(GetTaskParams, "tasks/get", params)
        self._check_headers("tasks/get", task_id, headers, meta, params)
        with reported_as_unavailable(self.engine.store):
            record = await self.engine.get(
                task_id, owner=owner, throttle=True, yield_first=not over_transport
            )
        return record, self.engine.poll_interval_ms(record)
