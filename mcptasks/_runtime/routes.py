"""Which way a `tools/call` for a task tool goes: a pure decision over the request and the tool.

`route_of` is the whole decision table (opt-in, connection, fallback mode, task support, input
before the task, whether the client can be asked anything); `TasksProtocol` has one method per
`Route`.
"""

from __future__ import annotations

from enum import Enum

from mcptasks._authoring.tool import FallbackMode
from mcptasks.wire import TaskSupport


class Route(Enum):
    """How one `tools/call` is answered."""

    REFUSE = "refuse"
    """-32021: the call needs the tasks extension and did not declare it."""
    TASK = "task"
    """A task is created at once (`CreateTaskResult`, or an immediate result)."""
    TASK_AFTER_INPUT = "task_after_input"
    """`before_task` questions are answered by `input_required` rounds first, then a task is created."""
    STARTED_FOR_MODEL = "started_for_model"
    """The `"tools"` fallback: a task is created and the model is told how to follow it."""
    INLINE = "inline"
    """The body runs inline to its result; a question ends it with a tool error."""
    INLINE_ROUNDS = "inline_rounds"
    """The body runs inline; its questions become `input_required` rounds."""


def route_of(
    *,
    opted_in: bool,
    tasks_allowed: bool,
    fallback: FallbackMode,
    task_support: TaskSupport,
    input_before_task: bool,
    can_ask: bool,
) -> Route:
    """The route of a call (`opted_in`: its `_meta` declares the extension; `tasks_allowed`: the
    connection may use tasks at all; `can_ask`: the client declared a capability to answer input)."""
    as_task = opted_in and tasks_allowed
    if as_task:
        return Route.TASK_AFTER_INPUT if input_before_task else Route.TASK
    if fallback == "reject" or (task_support == "required" and fallback != "tools"):
        return Route.REFUSE
    if fallback == "tools":
        return Route.STARTED_FOR_MODEL
    if tasks_allowed and can_ask:
        return Route.INLINE_ROUNDS
    return Route.INLINE
