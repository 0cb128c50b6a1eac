"""`TasksClient`, the SDK extension, and `start_tool_call`, which hands a task back as a handle."""

from __future__ import annotations

import contextvars
import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, NotificationBinding, ResultClaim
from mcp_types import CallToolResult
from typing_extensions import Unpack

from mcptasks.client.handle import TaskHandle
from mcptasks.client.ledger import TaskLedger, server_identity
from mcptasks.client.policy import PolicyOptions, TaskPolicy
from mcptasks.client.push import PushRouter
from mcptasks.client.registry import TasksClientBase, tasks_client_of
from mcptasks.client.state import CreateTaskResult, DetailedTask, StatusCallback, epoch
from mcptasks.wire import EXTENSION_ID, IDEMPOTENCY_META


@dataclass
class _Start:
    """Set by `start_tool_call` around its `call_tool`: hand the task back instead of waiting."""

    tool: str
    handle: TaskHandle | None = None
    created: CreateTaskResult | None = None


_STARTING: contextvars.ContextVar[_Start | None] = contextvars.ContextVar("mcptasks_starting", default=None)


class _TaskStarted(Exception):
    def __init__(self, handle: TaskHandle) -> None:
        super().__init__(handle.task_id)
        self.handle = handle


class TasksClient(TasksClientBase):
    """The Tasks extension for `mcp.Client(extensions=[TasksClient()])`.

    Declares `io.modelcontextprotocol/tasks` on every request and claims `resultType: "task"`,
    so `client.call_tool(...)` follows a task to its end and returns the `CallToolResult`
    (raising `TaskFailed`, `TaskCancelled`, ...). `policy` (or `TaskPolicy` fields as keywords)
    tunes polling; `ledger` records started tasks under `server_id` (default: derived from the
    client's target by `start_tool_call`; `"unknown"` for transparent calls without one);
    `on_status` observes each new state of a transparent call.
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        policy: TaskPolicy | None = None,
        *,
        ledger: TaskLedger | None = None,
        server_id: str | None = None,
        on_status: StatusCallback | None = None,
        push: bool = True,
        **options: Unpack[PolicyOptions],
    ) -> None:
        base = policy if policy is not None else TaskPolicy()
        self.policy: TaskPolicy = dataclasses.replace(base, **options) if options else base
        self.ledger = ledger
        self.server_id = server_id
        self.on_status = on_status
        self.push = push
        """Follow tasks through `notifications/tasks` pushes where the server serves them."""
        self.router = PushRouter()
        """Routes the pushed states to the handles of this extension."""

    def settings(self) -> dict[str, Any]:
        """No settings are defined: an empty object declares support."""
        return {}

    def claims(self) -> list[ResultClaim[Any]]:
        """Claim `resultType: "task"` on `tools/call`."""
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        """Receive `notifications/tasks` (the states of the tasks being followed)."""
        return [
            NotificationBinding(
                method="notifications/tasks", params_type=DetailedTask, handler=self.router.deliver
            )
        ]

    async def _resolve(self, created: CreateTaskResult, context: ClaimContext) -> CallToolResult:
        start = _STARTING.get()
        if start is not None and start.handle is None and start.tool == context.tool_name:
            handle = self._handle(created, context, server_id=self.server_id)
            start.handle = handle
            start.created = created
            raise _TaskStarted(handle)
        handle = self._handle(created, context, server_id=self.server_id or "unknown")
        handle.on_status = self.on_status
        await _record(handle, created)
        try:
            return await handle.result()
        except anyio.get_cancelled_exc_class():
            if self.policy.cancel_on_abandon:
                await handle._cancel_quietly()
            raise

    def _handle(
        self, created: CreateTaskResult, context: ClaimContext, *, server_id: str | None
    ) -> TaskHandle:
        return TaskHandle(
            context.session,
            created.task_id,
            tool=context.tool_name,
            policy=self.policy,
            initial=DetailedTask.from_created(created),
            ledger=self.ledger,
            server_id=server_id,
            push=self.router if self.push else None,
        )


async def _record(handle: TaskHandle, created: CreateTaskResult) -> None:
    if handle.ledger is None or handle.server_id is None:
        return
    record = partial(
        handle.ledger.record,
        handle.server_id,
        created.task_id,
        tool=handle.tool,
        status=created.status,
        created_at=epoch(created.created_at),
    )
    await anyio.to_thread.run_sync(record)


async def start_tool_call(
    client: Client,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    meta: types.RequestParamsMeta | None = None,
    idempotency_key: str | None = None,
    ledger: TaskLedger | None = None,
    server_id: str | None = None,
) -> TaskHandle:
    """Call a tool and return a `TaskHandle` for it (nothing is polled yet).

    When the server created a task, the handle follows it. When it answered at once (an ordinary
    tool, or a task tool run inline), the handle is already finished: its `task_id` is None and
    `await handle.result()` returns the result at once.

    The client must carry a `TasksClient` extension. Input the server needs before the task
    exists (multi round-trip requests) is answered through the client's callbacks first. The
    task is recorded in `ledger` (default: the extension's) under `server_id` (default: the
    extension's, else derived from the client's target). `idempotency_key` (an mcptasks server
    feature, ignored by other servers) makes a retried call return the task the first created.
    """
    extension = tasks_client_of(client)
    if extension is None:
        raise ValueError("start_tool_call needs a client built with Client(..., extensions=[TasksClient()])")
    if idempotency_key is not None:
        meta = cast(types.RequestParamsMeta, {**(meta or {}), IDEMPOTENCY_META: idempotency_key})
    start = _Start(tool=name)
    token = _STARTING.set(start)
    try:
        result = await client.call_tool(name, arguments, meta=meta)
    except _TaskStarted as started:
        handle = started.handle
    else:
        return TaskHandle(client.session, None, tool=name, policy=extension.policy, result=result)
    finally:
        _STARTING.reset(token)
    handle.ledger = ledger if ledger is not None else extension.ledger
    if server_id is None:
        server_id = extension.server_id if extension.server_id is not None else server_identity(client.server)
    handle.server_id = server_id
    assert start.created is not None
    await _record(handle, start.created)
    return handle
