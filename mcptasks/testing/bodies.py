"""`run_tool`: run a task tool's body in a unit test, without a server, a store or a client.

The body runs under the same driver as in a task: its yields (statuses, questions, `Delegate`,
`Result`) mean what they mean there, and its end becomes the same `Outcome`. `answer` plays the
client: it gets each input request and returns the client's raw response.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcptasks._authoring.capabilities import gated
from mcptasks._authoring.context import TaskContext
from mcptasks._authoring.tool import TaskTool
from mcptasks._authoring.yields import InputRequest
from mcptasks._runtime.driver import Outcome, run_body

Answerer = Callable[[InputRequest], Any]
"""Plays the client: the raw response (e.g. `{"action": "accept", "content": {...}}`) to a
request, or an awaitable of it."""


@dataclass
class BodyRun:
    """What a body did when run by `run_tool`."""

    outcome: Outcome
    """How it ended: `completed` with a `CallToolResult` dict, or `failed` with an error object."""
    statuses: list[str] = field(default_factory=list)
    """Every status it reported, in order."""
    asked: list[InputRequest] = field(default_factory=list)
    """Every input request sent to `answer`, in order."""

    @property
    def result(self) -> dict[str, Any]:
        """The `CallToolResult` dict; `AssertionError` when the task failed instead."""
        assert self.outcome.result is not None, f"the task failed: {self.outcome.error}"
        return self.outcome.result


class _TestChannel:
    """A `BodyChannel` that records statuses and hands input requests to `answer`."""

    def __init__(self, answer: Answerer | None) -> None:
        self.answer = answer
        self.statuses: list[str] = []
        self.asked: list[InputRequest] = []
        self.saved: Any = None
        self.task_id: str | None = "test-task"
        self.attempt = 1

    async def set_status(self, message: str) -> None:
        self.statuses.append(message)

    async def save(self, state: Any) -> None:
        self.saved = state

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        assert self.answer is not None  # without `answer`, every request is Unsupported
        answers = []
        for request in requests:
            self.asked.append(request)
            raw = self.answer(request)
            if inspect.isawaitable(raw):
                raw = await raw
            answers.append(request.parse(raw))
        return answers


async def run_tool(
    tool: TaskTool[..., Any],
    arguments: Mapping[str, Any] | None = None,
    *,
    answer: Answerer | None = None,
    owner: str = "test",
) -> BodyRun:
    """Validate `arguments`, run the body to its end, and return what it did.

    Without `answer` the client declared no input capability: every question is `Unsupported`
    (or, when `required=True`, the task fails with -32021). An answer that does not fit its
    request raises `InvalidAnswer` at the body's `yield`.
    """
    channel = _TestChannel(answer)
    declared = gated(channel, None if answer else {}, tool.name)
    context = TaskContext(declared, owner=owner, tool=tool.name)
    body = tool.open_body(tool.validate_arguments(arguments), context)
    outcome = await run_body(body, declared, tool.name)
    return BodyRun(outcome, channel.statuses, channel.asked)
