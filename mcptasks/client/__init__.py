"""The client side of the Tasks extension for the official SDK's `mcp.Client`.

Transparent: add `TasksClient()` to the client's extensions and a task tool's `call_tool` simply
returns the final `CallToolResult`; the extension follows the task (by push where the server serves
it, else by polling `tasks/get`), answers input requests and maps the terminal state::

    async with Client(url, extensions=[TasksClient()], elicitation_callback=ask) as client:
        result = await client.call_tool("build", {"target": "wheel"})

Explicit: `start_tool_call` returns a `TaskHandle` when the server created a task, to watch,
wait for, cancel, or leave running and resume later (in another process) by id::

    outcome = await start_tool_call(client, "build", {"target": "wheel"})
    if isinstance(outcome, TaskHandle):
        async for task in outcome.watch():
            print(task.status, task.status_message)
        result = await outcome.result()
    ...
    handle = TaskHandle.resume(client, task_id)   # after a restart

Behaviour (see `TaskPolicy` for the knobs):

- Push: a handle waiting for the next state listens for its task (`subscriptions/listen` with
  `taskIds`) and takes each `notifications/tasks` as it arrives; the first frames after the ack
  are the current state. A server that refuses the listen, or whose stream stays silent for one
  poll interval (three times), is polled instead; a dropped stream is followed by one `tasks/get`
  and listened to again after one poll interval; a stream quiet for ten poll intervals is checked
  with one `tasks/get`. `TasksClient(push=False)` only polls.
- Polling honours the server's current `pollIntervalMs` (it may change between polls), floored at
  `min_poll_interval`; `poll_interval` applies when the server suggests none.
- Transient errors of `tasks/*` requests (internal error, timeout, connection closed, a poll
  rejected as too fast) are retried with exponential back-off; after `max_retries` the poll
  raises `TaskUnreachable`. Other errors are raised at once (`UnknownTask` for -32602).
- Input: each `inputRequests` entry is routed to the client's elicitation / sampling / roots
  callback (`ClientSession.dispatch_input_request`) and answered with `tasks/update`. Every key
  is answered at most once per handle, even when the server lists it again.
- A callback that declines (returns `ErrorData`; the SDK's default when no callback is set):
  an elicitation is answered `{"action": "cancel"}` and the task goes on. A sampling or roots
  request (or a request this SDK cannot parse) cannot be answered: the task is cancelled
  (best effort, `cancel_on_input_error`) and `TaskInputError` is raised.
- Stuck detector (off by default): no change of status, statusMessage or input keys for
  `stuck_after` seconds raises `TaskStuck`, after a best-effort `tasks/cancel`.
- Terminal states: `completed` gives the `CallToolResult` (an `isError` result stays a result),
  `failed` raises `TaskFailed` (an `MCPError` with the task's JSON-RPC error), `cancelled`
  raises `TaskCancelled`.
- A transparent `call_tool` that is itself cancelled (a timeout, a shutdown) cancels its task
  (`cancel_on_abandon`), since nobody else knows the task id.
- `TaskLedger` records started tasks on disk (SQLite) so a restarted client can resume them
  (`ledger.pending()`), as the extension recommends.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import math
import os
import shlex
import sqlite3
import time
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

import anyio
import mcp_types as types
from mcp import Client, ClientSession, MCPError, StdioServerParameters
from mcp.client.context import ClientRequestContext
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp_types import CallToolResult, ErrorData, Request, RequestParams, Result
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import Unpack

from mcptasks._runtime.protocol import IDEMPOTENCY_META
from mcptasks._runtime.push import CLOSE_REASON_META
from mcptasks.wire import (
    EXTENSION_ID,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LEGACY_MISSING_CAPABILITY,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    TERMINAL_STATUSES,
)

__all__ = [
    "EXTENSION_ID",
    "TRANSIENT_ERROR_CODES",
    "CancelTaskRequest",
    "CreateTaskResult",
    "DetailedTask",
    "GetTaskRequest",
    "ListenTasksParams",
    "ListenTasksRequest",
    "LedgerEntry",
    "PolicyOptions",
    "StatusCallback",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskHandle",
    "TaskIdParams",
    "TaskInputError",
    "TaskLedger",
    "TaskPolicy",
    "TaskStuck",
    "TaskUnreachable",
    "TasksClient",
    "UnknownTask",
    "UpdateTaskParams",
    "UpdateTaskRequest",
    "server_identity",
    "start_tool_call",
]

_SERVER_ERROR = -32000
"""Also the SDK's CONNECTION_CLOSED, and the code of a poll rejected as too fast."""
_REQUEST_TIMEOUT = -32001

TRANSIENT_ERROR_CODES: frozenset[int] = frozenset(
    {INTERNAL_ERROR, PARSE_ERROR, _SERVER_ERROR, _REQUEST_TIMEOUT}
)
"""JSON-RPC error codes of `tasks/*` requests that are retried with back-off."""


# -- wire shapes ---------------------------------------------------------------------------------


class TaskIdParams(RequestParams):
    """Params of `tasks/get` and `tasks/cancel` (wire name `taskId`)."""

    task_id: str


class UpdateTaskParams(RequestParams):
    """Params of `tasks/update`: answers keyed by the task's input-request keys."""

    task_id: str
    input_responses: dict[str, Any]


class GetTaskRequest(Request[TaskIdParams, Literal["tasks/get"]]):
    """`tasks/get`; the SDK mirrors `params.taskId` into the `Mcp-Name` header."""

    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    """`tasks/update`; the SDK mirrors `params.taskId` into the `Mcp-Name` header."""

    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTaskRequest(Request[TaskIdParams, Literal["tasks/cancel"]]):
    """`tasks/cancel`; the SDK mirrors `params.taskId` into the `Mcp-Name` header."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class ListenTasksParams(RequestParams):
    """`subscriptions/listen` params naming task ids: `{"notifications": {"taskIds": [...]}}`."""

    notifications: dict[str, Any]


class ListenTasksRequest(Request[ListenTasksParams, Literal["subscriptions/listen"]]):
    """A `subscriptions/listen` for `notifications/tasks` of the given tasks."""

    method: Literal["subscriptions/listen"] = "subscriptions/listen"
    params: ListenTasksParams


class _Ack(Result):
    """The empty acknowledgement of `tasks/update` and `tasks/cancel`."""

    model_config = ConfigDict(extra="allow")


class CreateTaskResult(Result):
    """The flat `CreateTaskResult` a `tools/call` answers with (`resultType: "task"`)."""

    model_config = ConfigDict(extra="allow")

    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class DetailedTask(Result):
    """A `tasks/get` result: the task plus `result` (completed), `error` (failed) or the
    outstanding `inputRequests` (input_required). Unknown fields are kept."""

    model_config = ConfigDict(extra="allow")

    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None)

    @classmethod
    def from_created(cls, created: CreateTaskResult) -> DetailedTask:
        """The task state a `CreateTaskResult` describes."""
        data = created.model_dump(by_alias=True, mode="json", exclude_none=True)
        data["resultType"] = "complete"
        return cls.model_validate(data, by_name=False)

    @property
    def terminal(self) -> bool:
        """Completed, failed or cancelled: the status never changes again."""
        return self.status in TERMINAL_STATUSES

    def created_at_epoch(self) -> float | None:
        """`createdAt` as epoch seconds, when it parses as ISO 8601."""
        return _epoch(self.created_at)

    def call_tool_result(self) -> CallToolResult:
        """The inlined `CallToolResult` of a completed task (`ValueError` for any other state)."""
        if self.status != "completed":
            raise ValueError(f"task {self.task_id} is {self.status}, not completed")
        return CallToolResult.model_validate(self.result or {"content": []}, by_name=False)

    def to_wire(self) -> dict[str, Any]:
        """The task as the JSON object the wire carried (without the SDK's `_meta` stamp)."""
        data = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        data.pop("_meta", None)
        return data


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


# -- errors --------------------------------------------------------------------------------------


class TaskError(Exception):
    """Base of the errors about one task; `task_id` names it, `task` is its last known state."""

    task_id: str
    task: DetailedTask | None


class TaskFailed(TaskError, MCPError):
    """The task ended `failed`: `code`, `message` and `data` are its JSON-RPC error."""

    def __init__(self, task: DetailedTask) -> None:
        error = task.error or {}
        raw_code = error.get("code")
        code = raw_code if isinstance(raw_code, int) and not isinstance(raw_code, bool) else INTERNAL_ERROR
        message = error.get("message")
        if not isinstance(message, str):
            message = task.status_message or "task failed"
        super().__init__(code, message, error.get("data"))
        self.task_id = task.task_id
        self.task = task


class TaskCancelled(TaskError):
    """The task ended `cancelled` (by this client, another one, or the server)."""

    def __init__(self, task: DetailedTask) -> None:
        reason = f": {task.status_message}" if task.status_message else ""
        super().__init__(f"task {task.task_id} was cancelled{reason}")
        self.task_id = task.task_id
        self.task = task


class UnknownTask(TaskError, MCPError):
    """The server does not know the task id (-32602: unknown, expired, or someone else's)."""

    def __init__(self, task_id: str, error: MCPError) -> None:
        super().__init__(error.code, error.message, error.data)
        self.task_id = task_id
        self.task = None


class TaskUnreachable(TaskError, MCPError):
    """`tasks/*` kept failing with transient errors after every retry; the task may still run."""

    def __init__(self, task_id: str, error: MCPError, attempts: int, task: DetailedTask | None) -> None:
        super().__init__(error.code, f"{error.message} (task {task_id}, {attempts} attempts)", error.data)
        self.task_id = task_id
        self.task = task
        self.attempts = attempts


class TaskStuck(TaskError):
    """No change of status, statusMessage or input keys for `seconds` (see `TaskPolicy.stuck_after`)."""

    def __init__(self, task: DetailedTask, seconds: float, cancelled: bool) -> None:
        what = "; cancelled it" if cancelled else ""
        super().__init__(
            f"task {task.task_id} made no progress for {seconds:g} s (status {task.status}){what}"
        )
        self.task_id = task.task_id
        self.task = task
        self.seconds = seconds
        self.cancelled = cancelled


class TaskInputError(TaskError):
    """An input request this client could not answer (a declined sampling or roots request, or
    a request it cannot parse); `error` says why. The task was cancelled when `cancelled`."""

    def __init__(self, task: DetailedTask, key: str, method: str, error: ErrorData, cancelled: bool) -> None:
        what = "; cancelled the task" if cancelled else ""
        super().__init__(
            f"cannot answer input request {key!r} ({method}) of task {task.task_id}: {error.message}{what}"
        )
        self.task_id = task.task_id
        self.task = task
        self.key = key
        self.method = method
        self.error = error
        self.cancelled = cancelled


# -- policy ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskPolicy:
    """How a client polls, retries and gives up (seconds throughout)."""

    poll_interval: float = 1.0
    """Delay between polls when the server suggests no `pollIntervalMs`."""
    min_poll_interval: float = 0.05
    """Floor applied to the server's `pollIntervalMs`."""
    max_poll_interval: float | None = None
    """Optional ceiling applied to the server's `pollIntervalMs`."""
    request_timeout: float | None = 30.0
    """Read timeout of each `tasks/*` request (a timeout counts as a transient error)."""
    max_retries: int = 5
    """Consecutive transient failures tolerated per request before `TaskUnreachable`."""
    retry_backoff: float = 0.5
    """First back-off delay; doubles per consecutive failure."""
    max_retry_backoff: float = 10.0
    """Cap of the back-off delay."""
    stuck_after: float | None = None
    """Raise `TaskStuck` after this long without a change (None: never)."""
    cancel_on_stuck: bool = True
    """Send `tasks/cancel` before raising `TaskStuck`."""
    cancel_on_input_error: bool = True
    """Send `tasks/cancel` before raising `TaskInputError`."""
    cancel_on_abandon: bool = True
    """A transparent `call_tool` that is cancelled cancels its task."""

    def __post_init__(self) -> None:
        for name in ("poll_interval", "min_poll_interval", "retry_backoff", "max_retry_backoff"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"TaskPolicy.{name} must not be negative")
        for name in ("max_poll_interval", "request_timeout", "stuck_after"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"TaskPolicy.{name} must be positive or None")
        if self.max_retries < 0:
            raise ValueError("TaskPolicy.max_retries must not be negative")

    def interval(self, task: DetailedTask | None) -> float:
        """The delay before the next poll of `task`."""
        delay = self.poll_interval
        if task is not None and task.poll_interval_ms is not None:
            delay = task.poll_interval_ms / 1000.0
        delay = max(self.min_poll_interval, delay)
        if self.max_poll_interval is not None:
            delay = min(self.max_poll_interval, delay)
        return delay

    def backoff(self, attempt: int, error: MCPError) -> float:
        """The delay before retry number `attempt` (1-based); honours a `retryAfterMs` hint."""
        delay = min(self.max_retry_backoff, self.retry_backoff * 2.0 ** (attempt - 1))
        data = error.data
        if isinstance(data, dict):
            hint = data.get("retryAfterMs")
            if isinstance(hint, (int, float)) and not isinstance(hint, bool) and hint > 0:
                delay = max(delay, min(float(hint) / 1000.0, self.max_retry_backoff))
        return delay


class PolicyOptions(TypedDict, total=False):
    """Keyword overrides of `TaskPolicy` fields accepted by `TasksClient`."""

    poll_interval: float
    min_poll_interval: float
    max_poll_interval: float | None
    request_timeout: float | None
    max_retries: int
    retry_backoff: float
    max_retry_backoff: float
    stuck_after: float | None
    cancel_on_stuck: bool
    cancel_on_input_error: bool
    cancel_on_abandon: bool


StatusCallback = Callable[[DetailedTask], Awaitable[None] | None]
"""Called with each new task state a transparent `call_tool` observes (sync or async)."""


# -- the ledger ------------------------------------------------------------------------------------

ACTIVE = ("working", "input_required")


@dataclass(frozen=True)
class LedgerEntry:
    """One task a client started: where, which tool, when, and its last known status."""

    server: str
    task_id: str
    tool: str | None
    status: str
    created_at: float
    updated_at: float

    @property
    def pending(self) -> bool:
        """Not known to be terminal: worth resuming."""
        return self.status in ACTIVE


class TaskLedger:
    """Task ids a client started, in an SQLite file, so a restarted client can resume them.

    Every write is one transaction (atomic; safe with several processes on one file). `server`
    identifies the endpoint (`server_identity`: the URL, or `stdio:` plus the command line).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        if not self._ready:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS tasks ("
                " server TEXT NOT NULL, task_id TEXT NOT NULL, tool TEXT, status TEXT NOT NULL,"
                " created_at REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (server, task_id))"
            )
            self._ready = True
        return connection

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            connection.close()

    def record(
        self,
        server: str,
        task_id: str,
        *,
        tool: str | None = None,
        status: str = "working",
        created_at: float | None = None,
    ) -> LedgerEntry:
        """Insert (or refresh) a task; the first `created_at` and `tool` recorded are kept."""
        now = time.time()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO tasks (server, task_id, tool, status, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, task_id) DO UPDATE SET"
                " status = excluded.status, updated_at = excluded.updated_at,"
                " tool = COALESCE(tasks.tool, excluded.tool)",
                (server, task_id, tool, status, created_at if created_at is not None else now, now),
            )
        entry = self.get(server, task_id)
        assert entry is not None
        return entry

    def update(self, server: str, task_id: str, status: str) -> None:
        """Set the last known status of a recorded task (unknown tasks are ignored)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE tasks SET status = ?, updated_at = ? WHERE server = ? AND task_id = ?",
                (status, time.time(), server, task_id),
            )

    def forget(self, server: str, task_id: str) -> None:
        """Remove a task from the ledger."""
        with self._transaction() as db:
            db.execute("DELETE FROM tasks WHERE server = ? AND task_id = ?", (server, task_id))

    def get(self, server: str, task_id: str) -> LedgerEntry | None:
        """The entry of one task, if recorded."""
        rows = self._select("WHERE server = ? AND task_id = ?", (server, task_id))
        return rows[0] if rows else None

    def entries(self, server: str | None = None) -> list[LedgerEntry]:
        """Every recorded task (of one server, when given), oldest first."""
        if server is None:
            return self._select("", ())
        return self._select("WHERE server = ?", (server,))

    def pending(self, server: str | None = None) -> list[LedgerEntry]:
        """The tasks not known to be terminal (of one server, when given), oldest first."""
        return [entry for entry in self.entries(server) if entry.pending]

    def _select(self, where: str, args: tuple[Any, ...]) -> list[LedgerEntry]:
        connection = self._connect()
        try:
            rows = connection.execute(
                "SELECT server, task_id, tool, status, created_at, updated_at FROM tasks "
                f"{where} ORDER BY created_at, rowid",
                args,
            ).fetchall()
        finally:
            connection.close()
        return [LedgerEntry(*row) for row in rows]


def server_identity(server: object) -> str:
    """A stable name of the endpoint a `Client` talks to, for the ledger.

    A URL is kept as is (without user info); a `StdioServerParameters` becomes `stdio:` plus the
    command line; anything else (an in-process server, a custom transport) is named by type.
    """
    if isinstance(server, str):
        scheme, sep, rest = server.partition("://")
        if sep and "@" in rest.split("/", 1)[0]:
            host_and_path = rest.split("@", 1)[1]
            return f"{scheme}://{host_and_path}"
        return server
    if isinstance(server, StdioServerParameters):
        return "stdio:" + shlex.join([server.command, *server.args])
    name = getattr(server, "name", None)
    if isinstance(name, str):
        return f"inprocess:{name}"
    return f"{type(server).__module__}.{type(server).__qualname__}"


# -- push ------------------------------------------------------------------------------------------

_LISTEN_TIMEOUT = 10 * 365 * 86400.0
"""A listen request has no read timeout: its response arrives when the stream ends."""

_NO_PUSH_CODES = frozenset(
    {METHOD_NOT_FOUND, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, LEGACY_MISSING_CAPABILITY}
)
"""Errors that mean a server does not serve task listen streams (poll it instead)."""

_QUIET_POLLS = 10
"""Poll intervals a listen stream may stay quiet before one `tasks/get` checks the task."""

_MAX_FRUITLESS_LISTENS = 3
"""Listen streams in a row that end without a new state before a handle falls back to polling."""

_PushOutcome = Literal["state", "silent", "quiet", "ended", "dropped", "unsupported"]


class _Mailbox:
    """The newest pushed state of one task, for one waiting handle (older states are replaced)."""

    def __init__(self) -> None:
        self.latest: DetailedTask | None = None
        self.wake = anyio.Event()

    def put(self, task: DetailedTask) -> None:
        self.latest = task
        self.wake.set()

    def take(self) -> DetailedTask | None:
        task, self.latest = self.latest, None
        self.wake = anyio.Event()
        return task


class _PushRouter:
    """Routes `notifications/tasks` to the handles listening for each task id."""

    def __init__(self) -> None:
        self._mailboxes: dict[str, set[_Mailbox]] = {}
        self._no_push: weakref.WeakSet[ClientSession] = weakref.WeakSet()

    def enabled(self, session: ClientSession) -> bool:
        return session not in self._no_push

    def disable(self, session: ClientSession) -> None:
        self._no_push.add(session)

    @contextlib.contextmanager
    def mailbox(self, task_id: str) -> Iterator[_Mailbox]:
        box = _Mailbox()
        self._mailboxes.setdefault(task_id, set()).add(box)
        try:
            yield box
        finally:
            boxes = self._mailboxes.get(task_id)
            if boxes is not None:
                boxes.discard(box)
                if not boxes:
                    del self._mailboxes[task_id]

    async def deliver(self, task: DetailedTask) -> None:
        for box in tuple(self._mailboxes.get(task.task_id, ())):
            box.put(task)


# -- the handle ------------------------------------------------------------------------------------


def _session_of(client: Client | ClientSession) -> ClientSession:
    return client.session if isinstance(client, Client) else client


def _tasks_client_of(client: Client | ClientSession) -> TasksClient | None:
    if isinstance(client, Client):
        for extension in client.extensions or ():
            if isinstance(extension, TasksClient):
                return extension
    return None


def _signature(task: DetailedTask) -> tuple[str, str | None, frozenset[str]]:
    return task.status, task.status_message, frozenset(task.input_requests or ())


class TaskHandle:
    """One task on one connection: follow it (by push or polling), answer its input, wait for
    it, cancel it.

    Made by `start_tool_call` or `TaskHandle.resume` (which push through the client's
    `TasksClient`; a handle built with `push=None` only polls). The handle remembers which input keys it
    answered, so watching again (or a server listing an answered key again) never answers a key
    twice. One `watch()`/`wait()` at a time per handle.
    """

    def __init__(
        self,
        session: ClientSession,
        task_id: str,
        *,
        tool: str | None = None,
        policy: TaskPolicy | None = None,
        initial: DetailedTask | None = None,
        ledger: TaskLedger | None = None,
        server_id: str | None = None,
        on_status: StatusCallback | None = None,
        push: _PushRouter | None = None,
    ) -> None:
        self.session = session
        self.task_id = task_id
        self._push = push
        self.tool = tool
        self.policy = policy if policy is not None else TaskPolicy()
        self.ledger = ledger
        self.server_id = server_id
        self.on_status = on_status
        self.last: DetailedTask | None = initial
        """The latest state seen (None before the first poll of a resumed task)."""
        self.answered: set[str] = set()
        """Input keys this handle has answered."""
        self._fresh = initial is not None

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
        extension = _tasks_client_of(client)
        push = None
        if extension is not None:
            policy = policy if policy is not None else extension.policy
            ledger = ledger if ledger is not None else extension.ledger
            server_id = server_id if server_id is not None else extension.server_id
            push = extension._push if extension.push else None
        if server_id is None and isinstance(client, Client):
            server_id = server_identity(client.server)
        return cls(
            _session_of(client),
            task_id,
            tool=tool,
            policy=policy,
            ledger=ledger,
            server_id=server_id,
            push=push,
        )

    def __repr__(self) -> str:
        status = self.last.status if self.last is not None else "unknown"
        return f"TaskHandle(task_id={self.task_id!r}, tool={self.tool!r}, status={status!r})"

    # -- requests ----------------------------------------------------------------------------

    async def _send(self, request: Any, result_type: type[Result]) -> Any:
        attempt = 0
        while True:
            try:
                return await self.session.send_request(
                    request, result_type, request_read_timeout_seconds=self.policy.request_timeout
                )
            except MCPError as exc:
                if exc.code == INVALID_PARAMS:
                    raise UnknownTask(self.task_id, exc) from exc
                if exc.code not in TRANSIENT_ERROR_CODES:
                    raise
                attempt += 1
                if attempt > self.policy.max_retries:
                    raise TaskUnreachable(self.task_id, exc, attempt, self.last) from exc
                await anyio.sleep(self.policy.backoff(attempt, exc))

    async def status(self) -> DetailedTask:
        """One `tasks/get` (transient errors are retried per the policy)."""
        request = GetTaskRequest(params=TaskIdParams(task_id=self.task_id))
        try:
            task: DetailedTask = await self._send(request, DetailedTask)
        except UnknownTask:
            await self._ledger_update("unknown")
            raise
        self.last = task
        if task.terminal:
            await self._ledger_update(task.status)
        return task

    async def respond(self, responses: Mapping[str, types.InputResponse | Mapping[str, Any]]) -> None:
        """Answer input requests by key with one `tasks/update` (keys already answered are skipped).

        For callers that watch with `answer_inputs=False` and answer themselves.
        """
        fresh = {key: value for key, value in responses.items() if key not in self.answered}
        if not fresh:
            return
        wire = {key: _dump_response(value) for key, value in fresh.items()}
        await self._update(wire)

    async def _update(self, wire: dict[str, Any]) -> None:
        request = UpdateTaskRequest(params=UpdateTaskParams(task_id=self.task_id, input_responses=wire))
        # An answer must not be half-sent: finish the update even if the caller is cancelled.
        with anyio.CancelScope(shield=True):
            await self._send(request, _Ack)
        self.answered.update(wire)

    async def cancel(self) -> None:
        """Ask the server to cancel the task (`tasks/cancel`; also fine on a finished task).

        Cancellation is cooperative: `status()` shows when it took effect.
        """
        await self._send(CancelTaskRequest(params=TaskIdParams(task_id=self.task_id)), _Ack)

    async def _cancel_quietly(self) -> bool:
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.policy.request_timeout or 30.0):
            try:
                await self.session.send_request(
                    CancelTaskRequest(params=TaskIdParams(task_id=self.task_id)),
                    _Ack,
                    request_read_timeout_seconds=self.policy.request_timeout,
                )
                return True
            except Exception:
                return False
        return False

    # -- following ---------------------------------------------------------------------------

    async def watch(self, *, answer_inputs: bool = True) -> AsyncGenerator[DetailedTask, None]:
        """Yield the task each time its status, statusMessage or outstanding input keys change,
        ending after the terminal state (which is yielded too). States come by push where the
        server serves it, else from `tasks/get` polls.

        With `answer_inputs` (the default) new input requests are answered through the client's
        callbacks after the state listing them was yielded. Raises `TaskStuck`,
        `TaskInputError`, `UnknownTask` or `TaskUnreachable`; a cancelled watch leaves the
        task running. Leaving the loop early? Close the generator (`contextlib.aclosing`).
        """
        policy = self.policy
        seen: tuple[str, str | None, frozenset[str]] | None = None
        task = self.last
        # The creation result seeds the first state, but carries no result/error/inputRequests:
        # a task created already terminal is fetched at once.
        fetch = not self._fresh or task is None or task.terminal
        self._fresh = False
        quiet_since = anyio.current_time()
        relisten_at = 0.0
        fruitless = 0
        while True:
            if fetch:
                task = await self.status()
            assert task is not None
            fetch = True
            signature = _signature(task)
            if signature != seen:
                seen = signature
                quiet_since = anyio.current_time()
                yield task
            if task.terminal:
                return
            if answer_inputs and task.status == "input_required" and await self._answer(task):
                quiet_since = anyio.current_time()  # time spent answering is not the server's
            elif policy.stuck_after is not None and anyio.current_time() - quiet_since >= policy.stuck_after:
                cancelled = await self._cancel_quietly() if policy.cancel_on_stuck else False
                raise TaskStuck(task, policy.stuck_after, cancelled)
            delay = policy.interval(task)
            if policy.stuck_after is not None:
                remaining = policy.stuck_after - (anyio.current_time() - quiet_since)
                delay = max(0.0, min(delay, remaining))
            if (
                self._push is not None
                and self._push.enabled(self.session)
                and anyio.current_time() >= relisten_at
            ):
                # a quiet stream is checked with one tasks/get every _QUIET_POLLS intervals, so a
                # stream that died without the transport noticing costs a delay, never a hang
                within = _QUIET_POLLS * policy.interval(task)
                if policy.stuck_after is not None:
                    within = min(within, max(0.0, policy.stuck_after - (anyio.current_time() - quiet_since)))
                outcome, pushed = await self._next_pushed(task, policy.interval(task), within)
                if outcome == "state":
                    assert pushed is not None
                    task, fetch, fruitless = pushed, False, 0
                    continue
                if outcome == "quiet":
                    continue
                # the stream ended or broke without news: catch up with one tasks/get now and
                # listen again after one poll interval (polling meanwhile, never faster)
                fruitless += 1
                if fruitless >= _MAX_FRUITLESS_LISTENS:
                    relisten_at = math.inf  # this server keeps closing streams: poll from now on
                else:
                    relisten_at = anyio.current_time() + delay
                if outcome != "unsupported":
                    continue
            await anyio.sleep(delay)

    async def _next_pushed(
        self, current: DetailedTask, first_within: float, within: float
    ) -> tuple[_PushOutcome, DetailedTask | None]:
        """Listen for the task until the server pushes a state that differs from `current`.

        Outcomes: `state` (the new state); `silent` (no frame at all within `first_within`
        seconds: the server may not push, so poll now); `quiet` (nothing changed within `within`
        seconds: check with one `tasks/get`); `ended` (the server closed the stream) and `dropped` (it broke):
        catch up with `tasks/get`; `unsupported` (the server refused: poll from now on).
        """
        assert self._push is not None
        push = self._push
        known = _signature(current)
        outcome: list[tuple[_PushOutcome, DetailedTask | None]] = []
        request = ListenTasksRequest(params=ListenTasksParams(notifications={"taskIds": [self.task_id]}))
        with push.mailbox(self.task_id) as box, anyio.move_on_after(within):
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    try:
                        closing = await self.session.send_request(
                            request, _Ack, request_read_timeout_seconds=_LISTEN_TIMEOUT
                        )
                        if (closing.meta or {}).get(CLOSE_REASON_META) == "done":
                            # The task ended, so its terminal state was sent before this response;
                            # the session delivers notifications on tasks of its own, so the
                            # response can overtake it. Wait for it (states() ends the group).
                            with anyio.move_on_after(first_within):
                                await anyio.sleep_forever()
                        outcome.append(("ended", None))
                    except MCPError as exc:
                        if exc.code in _NO_PUSH_CODES:
                            push.disable(self.session)
                            outcome.append(("unsupported", None))
                        else:
                            outcome.append(("dropped", None))
                    except Exception:  # a broken transport surfaces as the transport's own error
                        outcome.append(("dropped", None))
                    group.cancel_scope.cancel()

                async def states() -> None:
                    with anyio.move_on_after(first_within):
                        await box.wake.wait()
                    if not box.wake.is_set():
                        outcome.append(("silent", None))
                        group.cancel_scope.cancel()
                        return
                    while True:
                        pushed = box.take()
                        if pushed is not None and (pushed.terminal or _signature(pushed) != known):
                            outcome.append(("state", pushed))
                            group.cancel_scope.cancel()
                            return
                        await box.wake.wait()

                group.start_soon(stream)
                group.start_soon(states)
        if not outcome:
            return "quiet", None
        state = next((o for o in outcome if o[0] == "state"), outcome[0])
        if state[1] is not None:
            self.last = state[1]
            if state[1].terminal:
                await self._ledger_update(state[1].status)
        return state

    async def wait(self, *, answer_inputs: bool = True) -> DetailedTask:
        """Follow the task to its terminal state (answering input) and return that state."""
        final: DetailedTask | None = None
        async with contextlib.aclosing(self.watch(answer_inputs=answer_inputs)) as states:
            async for task in states:
                final = task
                if self.on_status is not None:
                    outcome = self.on_status(task)
                    if inspect.isawaitable(outcome):
                        await outcome
        assert final is not None and final.terminal
        return final

    async def result(self) -> CallToolResult:
        """Wait, then: the `CallToolResult` (completed, `isError` included), `TaskFailed`
        (failed) or `TaskCancelled` (cancelled)."""
        task = await self.wait()
        if task.status == "failed":
            raise TaskFailed(task)
        if task.status == "cancelled":
            raise TaskCancelled(task)
        return task.call_tool_result()

    # -- input -------------------------------------------------------------------------------

    async def _answer(self, task: DetailedTask) -> bool:
        """Answer the keys of `task` not answered yet; True when something was sent."""
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
        if self.ledger is not None and self.server_id is not None:
            await anyio.to_thread.run_sync(partial(self.ledger.update, self.server_id, self.task_id, status))


def _dump_response(value: types.InputResponse | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, Result):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(value)


# -- the SDK extension -----------------------------------------------------------------------------


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


class TasksClient(ClientExtension):
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
        self._push = _PushRouter()

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
                method="notifications/tasks", params_type=DetailedTask, handler=self._push.deliver
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
            push=self._push if self.push else None,
        )


async def _record(handle: TaskHandle, created: CreateTaskResult) -> None:
    if handle.ledger is None or handle.server_id is None:
        return
    record = partial(
        handle.ledger.record,
        handle.server_id,
        handle.task_id,
        tool=handle.tool,
        status=created.status,
        created_at=_epoch(created.created_at),
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
) -> CallToolResult | TaskHandle:
    """Call a tool; return its `CallToolResult` when the server answered at once, or a
    `TaskHandle` when it created a task (nothing is polled yet).

    The client must carry a `TasksClient` extension. Input the server needs before the task
    exists (multi round-trip requests) is answered through the client's callbacks first. The
    task is recorded in `ledger` (default: the extension's) under `server_id` (default: the
    extension's, else derived from the client's target). `idempotency_key` (an mcptasks server
    feature, ignored by other servers) makes a retried call return the task the first created.
    """
    extension = _tasks_client_of(client)
    if extension is None:
        raise ValueError("start_tool_call needs a client built with Client(..., extensions=[TasksClient()])")
    if idempotency_key is not None:
        merged: dict[str, Any] = {**(meta or {}), IDEMPOTENCY_META: idempotency_key}
        meta = cast(types.RequestParamsMeta, merged)
    start = _Start(tool=name)
    token = _STARTING.set(start)
    try:
        result = await client.call_tool(name, arguments, meta=meta)
    except _TaskStarted as started:
        handle = started.handle
    else:
        return result
    finally:
        _STARTING.reset(token)
    handle.ledger = ledger if ledger is not None else extension.ledger
    if server_id is None:
        server_id = extension.server_id if extension.server_id is not None else server_identity(client.server)
    handle.server_id = server_id
    assert start.created is not None
    await _record(handle, start.created)
    return handle
