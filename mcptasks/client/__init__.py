"""The client side of the Tasks extension for the official SDK's `mcp.Client`.

Transparent: add `TasksClient()` to the client's extensions and a task tool's `call_tool` simply
returns the final `CallToolResult`; the extension follows the task (by push where the server serves
it, else by polling `tasks/get`), answers input requests and maps the terminal state::

    async with Client(url, extensions=[TasksClient()], elicitation_callback=ask) as client:
        result = await client.call_tool("build", {"target": "wheel"})

Explicit: `start_tool_call` returns a `TaskHandle`, to watch, wait for, cancel, or leave
running and resume later (in another process) by id; when the server answered at once, the
handle is already finished (`task_id` is None, `result()` returns at once)::

    handle = await start_tool_call(client, "build", {"target": "wheel"})
    async with handle.watch() as updates:
        async for task in updates:
            print(task.status, task.status_message)
    result = await handle.result()
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
  raises `TaskUnreachable`. Other errors are raised at once (`TaskNotFound` for -32602).
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

from mcptasks.client.errors import TaskCancelled, TaskFailed, TaskInputError, TaskStuck, TaskUnreachable
from mcptasks.client.extension import TasksClient, start_tool_call
from mcptasks.client.handle import TaskHandle
from mcptasks.client.ledger import LedgerEntry, TaskLedger, server_identity
from mcptasks.client.policy import TRANSIENT_ERROR_CODES, PolicyOptions, TaskPolicy
from mcptasks.client.requests import (
    CancelTaskRequest,
    GetTaskRequest,
    ListenTasksParams,
    ListenTasksRequest,
    UpdateTaskRequest,
)
from mcptasks.client.state import CreateTaskResult, DetailedTask, StatusCallback
from mcptasks.client.watch import TaskWatch
from mcptasks.errors import TaskError, TaskNotFound
from mcptasks.wire import EXTENSION_ID

__all__ = [
    "EXTENSION_ID",
    "TRANSIENT_ERROR_CODES",
    "CancelTaskRequest",
    "CreateTaskResult",
    "DetailedTask",
    "GetTaskRequest",
    "LedgerEntry",
    "ListenTasksParams",
    "ListenTasksRequest",
    "PolicyOptions",
    "StatusCallback",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskHandle",
    "TaskInputError",
    "TaskLedger",
    "TaskNotFound",
    "TaskPolicy",
    "TaskStuck",
    "TaskUnreachable",
    "TaskWatch",
    "TasksClient",
    "UpdateTaskRequest",
    "server_identity",
    "start_tool_call",
]
