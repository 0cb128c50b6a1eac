"""Run a task body against a `BodyChannel`: translate each `yield` into status or input, and
turn the body's end (a `Result`, a return value, an exception) into an `Outcome`.

The same driver serves a task, an inline call and the synchronous MRTR rounds before a task.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcptasks.context import BodyChannel
from mcptasks.errors import ProtocolError, ToolError
from mcptasks.results import error_result, to_call_tool_result
from mcptasks.yields import InputRequest, Result, Status, as_input_requests

logger = logging.getLogger("mcptasks")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a body ended: `completed` with a `CallToolResult` dict, or `failed` with an error object."""

    status: Literal["completed", "failed"]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def message(self) -> str | None:
        """A short status message for the task record."""
        if self.error is not None:
            return str(self.error.get("message", "failed"))
        if self.result is not None and self.result.get("isError"):
            content = self.result.get("content") or [{}]
            first = content[0] if isinstance(content[0], dict) else {}
            return str(first.get("text", "Tool error"))
        return None


@dataclass(frozen=True, slots=True)
class Pending:
    """A yielded value the driver has not handled yet (hand-over from an MRTR round to a task)."""

    item: Any


class UnsupportedYield(TypeError):
    """Thrown into a generator that yielded a value the driver does not understand."""


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if text else type(exc).__name__


async def _handle(item: Any, channel: BodyChannel) -> Any:
    """Act on one yielded value; return what the `yield` evaluates to."""
    if isinstance(item, str):
        await channel.set_status(item)
        return None
    if isinstance(item, Status):
        await channel.set_status(item.message)
        return None
    requests = as_input_requests(item)
    if requests is not None:
        answers = await channel.ask(requests)
        return answers[0] if isinstance(item, InputRequest) else tuple(answers)
    raise UnsupportedYield(
        f"a task body may yield str, Status, an input request, Inputs or Result; got {type(item).__name__}"
    )


async def drive_generator(
    generator: AsyncGenerator[Any, Any], channel: BodyChannel, *, pending: Pending | None = None
) -> Any:
    """Run `generator` to its `Result` (or its end) and return the result value (None at the end)."""
    try:
        if pending is None:
            try:
                item = await generator.__anext__()
            except StopAsyncIteration:
                return None
        else:
            item = pending.item
        while True:
            if isinstance(item, Result):
                return item.value
            try:
                send = await _handle(item, channel)
            except UnsupportedYield as exc:
                try:
                    item = await generator.athrow(exc)
                except StopAsyncIteration:
                    return None
                continue
            try:
                item = await generator.asend(send)
            except StopAsyncIteration:
                return None
    finally:
        await generator.aclose()


def outcome_of_exception(exc: Exception, tool: str) -> Outcome:
    """Map an exception escaping a body to its outcome (JSON-RPC error -> failed; others -> tool error)."""
    if isinstance(exc, ProtocolError):
        return Outcome("failed", error=exc.to_error())
    if not isinstance(exc, ToolError):
        logger.exception("task tool %r raised", tool, exc_info=exc)
    return Outcome("completed", result=error_result(_describe(exc)))


async def run_body(body: Any, channel: BodyChannel, tool: str, *, pending: Pending | None = None) -> Outcome:
    """Run an opened body (generator or coroutine) to its outcome. Cancellation propagates."""
    try:
        if isinstance(body, AsyncGenerator):
            value = await drive_generator(body, channel, pending=pending)
        else:
            value = await body
        return Outcome("completed", result=to_call_tool_result(value))
    except Exception as exc:
        return outcome_of_exception(exc, tool)


class InlineChannel:
    """The channel of a body run inline: no task, so status is dropped and input is refused."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.saved: Any = None
        """Checkpoints of an inline run live as long as the call (there is no task to keep them)."""

    @property
    def task_id(self) -> str | None:
        """Always None: an inline run has no task."""
        return None

    @property
    def attempt(self) -> int:
        """Always 1: no re-runs without a task."""
        return 1

    async def set_status(self, message: str) -> None:
        """Dropped: there is no task to carry a status message."""

    async def save(self, state: Any) -> None:
        """Kept for the rest of the call only."""
        self.saved = state

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Refuse: input needs a task (or a multi-round-trip exchange)."""
        methods = ", ".join(sorted({r.method for r in requests}))
        raise ToolError(
            f"Tool {self.tool!r} needs input from the client ({methods}). Call it with the "
            "io.modelcontextprotocol/tasks extension declared in the request's client capabilities."
        )


def wire_requests(requests: Sequence[InputRequest], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The `inputRequests` object for `requests` under `keys`."""
    return {key: request.to_wire() for key, request in zip(keys, requests, strict=True)}
