"""`TaskHandle`: one task on one connection, to follow, answer, wait for, cancel or resume."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, ClientSession, MCPError
from mcp.client.context import ClientRequestContext
from mcp_types import CallToolResult, ErrorData, Result
from pydantic import TypeAdapter, ValidationError

from mcptasks.client.errors import TaskCancelled, TaskFailed, TaskInputError, TaskUnreachable
from mcptasks.client.ledger import TaskLedger, server_identity
from mcptasks.client.policy import TRANSIENT_ERROR_CODES, TaskPolicy
from mcptasks.client.push import PushRouter
from mcptasks.client.registry import tasks_client_of
from mcptasks.client.requests import Ack, CancelTaskRequest, GetTaskRequest, UpdateTaskRequest
from mcptasks.client.state import DetailedTask, StatusCallback
from mcptasks.client.watch import Followed, TaskWatch
from mcptasks.errors import TaskNotFound
from mcptasks.wire import INVALID_PARAMS, METHOD_NOT_FOUND

_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


class TaskHandle:
    """One task on one connection: follow it (by push or polling), answer its input, wait for
    it, cancel it.

    Made by `start_tool_call` or `TaskHandle.resume` (which push through the client's
    `TasksClient`; a handle built with `push=None` only polls). The handle remembers which input
    keys it answered, so watching again (or a server listing an answered key again) never answers
    a key twice. One `watch()`/`wait()` at a time per handle.

    When the server answered a `start_tool_call` at once (no task), the handle is already
    finished: `task_id` and `last` are None, `result()` returns the result at once, `watch()`
    produces no state and `cancel()` does nothing.
    """

    def __init__(
        self,
        session: ClientSession,
        task_id: str | None,
        *,
        tool: str | None = None,
        policy: TaskPolicy | None = None,
        initial: DetailedTask | None = None,
        ledger: TaskLedger | None = None,
        server_id: str | None = None,
        on_status: StatusCallback | None = None,
        push: PushRouter | None = None,
        result: CallToolResult | None = None,
    ) -> None:
        if (task_id is None) == (result is None):
            raise ValueError("a TaskHandle has either a task id or the result the server answered with")
        self.session = session
        self.task_id = task_id
        """The task's id; None when the server answered without creating a task."""
        self._push = push
        self.tool = tool
        self.policy = policy if policy is not None else TaskPolicy()
        self.ledger = ledger
        self.server_id = server_id
        self.on_status = on_status
        self.last: DetailedTask | None = initial
        """The latest state seen (None before the first poll of a resumed task, and when no task
        was created)."""
        self.answered: set[str] = set()
        """Input keys this handle has answered."""
        self._fresh = initial is not None
        """The next watch starts from `last` (the creation result) instead of a `tasks/get`."""
        self._result = result

    @classmethod
    def resume(
        cls,
        client: Client | ClientSession,
        task_id: str,
        *,
        tool: str | None = None,
        policy: TaskPolicy | None = None,
        ledger: TaskLedger | None = None,
        server_id: str | None = None,
    ) -> TaskHandle:
        """A handle for a task created earlier (by this process or another one).

        The client must declare the tasks extension (`Client(extensions=[TasksClient()])`): the
        server refuses `tasks/*` otherwise. Policy, ledger and server id default to the client's
        `TasksClient`; no request is sent until the handle is used.
        """
        extension = tasks_client_of(client)
        push = None
        if extension is not None:
            policy = policy if policy is not None else extension.policy
            ledger = ledger if ledger is not None else extension.ledger
            server_id = server_id if server_id is not None else extension.server_id
            push = extension.router if extension.push else None
        if server_id is None and isinstance(client, Client):
            server_id = server_identity(client.server)
        session = client.session if isinstance(client, Client) else client
        return cls(session, task_id, tool=tool, policy=policy, ledger=ledger, server_id=server_id, push=push)

    def __repr__(self) -> str:
        status = self.last.status if self.last is not None else "unknown"
        if self.task_id is None:
            status = "completed"
        return f"TaskHandle(task_id={self.task_id!r}, tool={self.tool!r}, status={status!r})"

    # -- requests ----------------------------------------------------------------------------

    def _id(self) -> str:
        if self.task_id is None:
            raise ValueError("no task: the server answered this call at once (see TaskHandle.result)")
        return self.task_id

    async def _send(self, request: Any, result_type: type[Result]) -> Any:
        attempt = 0
        while True:
            try:
                return await self.session.send_request(
                    request, result_type, request_read_timeout_seconds=self.policy.request_timeout
                )
            except MCPError as exc:
                if exc.code == INVALID_PARAMS:
                    raise TaskNotFound(self._id(), exc.message, exc.data) from exc
                if exc.code not in TRANSIENT_ERROR_CODES:
                    raise
                attempt += 1
                if attempt > self.policy.max_retries:
                    raise TaskUnreachable(self._id(), exc, attempt, self.last) from exc
                await anyio.sleep(self.policy.backoff(attempt, exc))

    async def status(self) -> DetailedTask:
        """One `tasks/get` (transient errors are retried per the policy); `ValueError` for a
        handle without a task."""
        try:
            task: DetailedTask = await self._send(GetTaskRequest.of(self._id()), DetailedTask)
        except TaskNotFound:
            await self._ledger_update("unknown")
            raise
        await self._saw(task)
        return task

    async def _saw(self, task: DetailedTask) -> None:
        """Take `task` as the latest state (and record a terminal one in the ledger)."""
        self.last = task
        if task.terminal:
            await self._ledger_update(task.status)

    async def respond(self, responses: Mapping[str, types.InputResponse | Mapping[str, Any]]) -> None:
        """Answer input requests by key with one `tasks/update` (keys already answered are skipped).

        For callers that watch with `answer_inputs=False` and answer themselves.
        """
        fresh = {key: value for key, value in responses.items() if key not in self.answered}
        if not fresh:
            return
        await self._update({key: _dump_response(value) for key, value in fresh.items()})

    async def _update(self, wire: dict[str, Any]) -> None:
        request = UpdateTaskRequest.of(self._id(), wire)
        # An answer must not be half-sent: finish the update even if the caller is cancelled.
        with anyio.CancelScope(shield=True):
            await self._send(request, Ack)
        self.answered.update(wire)

    async def cancel(self) -> None:
        """Ask the server to cancel the task (`tasks/cancel`; also fine on a finished task).

        Cancellation is cooperative: `status()` shows when it took effect.
        """
        if self.task_id is not None:
            await self._send(CancelTaskRequest.of(self.task_id), Ack)

    async def _cancel_quietly(self) -> bool:
        """Best-effort `tasks/cancel` that neither raises nor can be cancelled; whether it was sent."""
        if self.task_id is None:
            return False
        request = CancelTaskRequest.of(self.task_id)
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.policy.request_timeout or 30.0):
            try:
                await self.session.send_request(
                    request, Ack, request_read_timeout_seconds=self.policy.request_timeout
                )
                return True
            except Exception:
                return False
        return False

    # -- following ---------------------------------------------------------------------------

    def watch(self, *, answer_inputs: bool = True) -> TaskWatch:
        """The task's states as they change: `async with handle.watch() as updates: async for task
        in updates: ...`.

        A state is produced each time the task's status, statusMessage or outstanding input keys
        change, ending with the terminal state. States come by push where the server serves it,
        else from `tasks/get` polls. With `answer_inputs` (the default) new input requests are
        answered through the client's callbacks after the state listing them was produced.
        Raises `TaskStuck`, `TaskInputError`, `TaskNotFound` or `TaskUnreachable`; leaving the
        loop (or a cancelled watch) leaves the task running.
        """
        return TaskWatch(_Following(self), answer_inputs=answer_inputs)

    def _first_state(self) -> DetailedTask | None:
        """The state a new watch starts from without a `tasks/get` (None: it fetches one)."""
        fresh, self._fresh = self._fresh, False
        # The creation result seeds the first state, but carries no result/error/inputRequests:
        # a task created already terminal is fetched at once.
        last = self.last
        return last if fresh and last is not None and not last.terminal else None

    async def wait(self, *, answer_inputs: bool = True) -> DetailedTask:
        """Follow the task to its terminal state (answering input) and return that state;
        `ValueError` for a handle without a task."""
        self._id()
        final: DetailedTask | None = None
        async with self.watch(answer_inputs=answer_inputs) as updates:
            async for task in updates:
                final = task
                if self.on_status is not None:
                    outcome = self.on_status(task)
                    if inspect.isawaitable(outcome):
                        await outcome
        assert final is not None and final.terminal
        return final

    async def result(self) -> CallToolResult:
        """Wait, then: the `CallToolResult` (completed, `isError` included), `TaskFailed`
        (failed) or `TaskCancelled` (cancelled). A handle without a task returns its result."""
        if self._result is not None:
            return self._result
        task = await self.wait()
        if task.status == "failed":
            raise TaskFailed(task)
        if task.status == "cancelled":
            raise TaskCancelled(task)
        return task.call_tool_result()

    # -- input -------------------------------------------------------------------------------

    async def _answer(self, task: DetailedTask) -> bool:
        """Answer the input requests of `task` not answered yet through the client's callbacks;
        True when something was sent."""
        todo = {k: v for k, v in (task.input_requests or {}).items() if k not in self.answered}
        if not todo:
            return False
        failures: list[BaseException] = []

        async def answer_one(key: str, raw: Any, scope: anyio.CancelScope) -> None:
            try:
                response = await self._response_to(task, key, raw)
                await self._update({key: response})
            except Exception as exc:
                failures.append(exc)
                scope.cancel()

        async with anyio.create_task_group() as group:
            for key, raw in todo.items():
                group.start_soon(answer_one, key, raw, group.cancel_scope)
        if failures:
            raise failures[0]
        return True

    async def _response_to(self, task: DetailedTask, key: str, raw: Any) -> dict[str, Any]:
        method = raw.get("method") if isinstance(raw, dict) else None
        method_name = method if isinstance(method, str) else "?"
        try:
            request = _INPUT_REQUEST.validate_python(raw, by_name=False)
        except ValidationError:
            error = ErrorData(code=METHOD_NOT_FOUND, message=f"unsupported input request {method_name!r}")
            raise await self._refuse(task, key, method_name, error) from None
        params = request.params
        context = ClientRequestContext(
            session=self.session, request_id=key, meta=params.meta if params is not None else None
        )
        answer = await self.session.dispatch_input_request(context, request)
        if isinstance(answer, ErrorData):
            if isinstance(request, types.ElicitRequest):
                return {"action": "cancel"}
            raise await self._refuse(task, key, request.method, answer)
        return _dump_response(answer)

    async def _refuse(self, task: DetailedTask, key: str, method: str, error: ErrorData) -> TaskInputError:
        cancelled = await self._cancel_quietly() if self.policy.cancel_on_input_error else False
        return TaskInputError(task, key, method, error, cancelled)

    # -- ledger ------------------------------------------------------------------------------

    async def _ledger_update(self, status: str) -> None:
        if self.ledger is not None and self.server_id is not None and self.task_id is not None:
            await anyio.to_thread.run_sync(partial(self.ledger.update, self.server_id, self.task_id, status))


class _Following(Followed):
    """A handle as its `TaskWatch` sees it: the handle's own requests and the state it keeps."""

    def __init__(self, handle: TaskHandle) -> None:
        self._handle = handle

    @property
    def task_id(self) -> str | None:
        return self._handle.task_id

    @property
    def session(self) -> ClientSession:
        return self._handle.session

    @property
    def policy(self) -> TaskPolicy:
        return self._handle.policy

    @property
    def push(self) -> PushRouter | None:
        return self._handle._push

    def first(self) -> DetailedTask | None:
        return self._handle._first_state()

    async def status(self) -> DetailedTask:
        return await self._handle.status()

    async def saw(self, task: DetailedTask) -> None:
        await self._handle._saw(task)

    async def answer(self, task: DetailedTask) -> bool:
        return await self._handle._answer(task)

    async def cancel_quietly(self) -> bool:
        return await self._handle._cancel_quietly()


def _dump_response(value: types.InputResponse | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, Result):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(value)
