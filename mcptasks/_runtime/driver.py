"""Run a task body against a `BodyChannel`: translate each `yield` into status or input, and
turn the body's end (a `Result`, a return value, an exception) into an `Outcome`.

The same driver serves a task, an inline call and the synchronous MRTR rounds before a task.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncGenerator, Awaitable, Sequence
from contextvars import Context
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
import anyio.lowlevel

from mcptasks._authoring.context import BodyChannel, run_step
from mcptasks._authoring.results import error_result, to_call_tool_result
from mcptasks._authoring.steps import Step
from mcptasks._authoring.threaded import CancelRequested
from mcptasks._authoring.values import (
    InvalidValue,
    check_content,
    check_json,
    check_text,
    json_size,
    storable_text,
)
from mcptasks._authoring.yields import Delegate, InputRequest, Result, Status, as_input_requests
from mcptasks._runtime.resumable import movable
from mcptasks._runtime.watchdog import BodyLabel, Label, current_body, watched
from mcptasks.errors import ProtocolError, ToolError
from mcptasks.errors import UnsupportedYield as UnsupportedYield
from mcptasks.wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
)

logger = logging.getLogger("mcptasks")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a body ended: `completed` with a `CallToolResult` dict, or `failed` with an error object."""

    status: Literal["completed", "failed"]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def message(self) -> str | None:
        """A short status message for the task record; a failure's names what failed (its
        `error.message` is in `error`, so the status does not repeat it)."""
        if self.error is not None:
            return failed_status(self.error)
        if self.result is not None and self.result.get("isError"):
            content = self.result.get("content") or [{}]
            first = content[0] if isinstance(content[0], dict) else {}
            return str(first.get("text", "Tool error"))
        return None

    @property
    def error_reason(self) -> str | None:
        """The failure's `error.data.reason`, when it has one."""
        data = self.error.get("data") if self.error is not None else None
        reason = data.get("reason") if isinstance(data, dict) else None
        return reason if isinstance(reason, str) else None

    def summary(self) -> str:
        """The outcome as compact JSON, for a log line that must keep what could not be written."""
        body = {"status": self.status, "result": self.result, "error": self.error}
        return json.dumps(body, separators=(",", ":"), default=repr)


_FAILED_REASONS = {
    "timeout": "Failed: timeout",
    "worker_lost": "Failed (worker lost)",
    "shutdown": "Failed (server shut down)",
    "invalid_value": "Failed: invalid yielded value",
    "invalid_result": "Failed: invalid result",
    "result_too_large": "Failed: result too large",
    "store_rejected": "Failed: end not recorded",
    "store_unavailable": "Failed: store unavailable",
}

_ERROR_NAMES = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    MISSING_REQUIRED_CLIENT_CAPABILITY: "missing client capability",
}


def failed_status(error: dict[str, Any]) -> str:
    """The status message of a task failed with `error`: "Failed: timeout", "Failed (worker lost)",
    "Failed: KeyboardInterrupt", "Failed: internal error" and the like."""
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, dict) else None
    if reason == "aborted" and isinstance(data, dict) and isinstance(data.get("exception"), str):
        return f"Failed: {data['exception']}"
    if isinstance(reason, str) and reason:
        return _FAILED_REASONS.get(reason, f"Failed: {reason.replace('_', ' ')}")
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return f"Failed: {_ERROR_NAMES.get(code, f'error {code}')}"
    return "Failed"


@dataclass(frozen=True, slots=True)
class Pending:
    """A yielded value the driver has not handled yet (hand-over from an MRTR round to a task)."""

    item: Any


class Interrupt(BaseException):
    """Raised by a channel to end the run at once; the body does not see it (say, an MRTR round
    that needs input). `run_body` re-raises it to its caller."""


class OpenQuestion(Protocol):
    """An input request a task issued and waits on (see `Parked`), with what resuming its body
    needs while the body waits without its task: all the engine keeps of it, besides its run."""

    body: AsyncGenerator[Any, Any] | None
    """The generator suspended at the question (set by the driver when it parks)."""
    single: bool
    """Whether the body yielded one request (its `yield` gets one answer, else a tuple)."""
    context: Context | None
    """The body's context variables, for the task that resumes it (set by the engine)."""
    channel: BodyChannel | None
    """The body's channel, for the task that resumes it (set by the engine)."""
    wakeup: object
    """When the engine resumes the body to read its record anyway (its own handle)."""
    due: float | None
    """When the earliest deadline of its requests passes (`anyio.current_time()` clock; None:
    none): the engine resumes the body then, to take the answer the deadline gives."""

    def answers(self, park: bool) -> Awaitable[list[Any]]:
        """Wait for the answers; with `park`, raise `Parked` again while there are none."""


class Parked(Interrupt):
    """Raised by a task's `ask_or_park` once the requests are issued, instead of waiting.

    The driver lets it end the body's task (the engine keeps the generator suspended at its
    `yield`, on the `question`, and resumes it in a new task when answers may have come;
    `drive_generator` takes a `Parked` back as the `Pending` item) or, when the body cannot move
    to another task, waits right there with `question.answers`. An `Interrupt`, so nothing
    between the channel and the driver takes it for a failure.
    """

    __slots__ = ("question",)

    def __init__(self, question: OpenQuestion) -> None:
        super().__init__()
        self.question = question


MAX_MESSAGE = 4000
"""Error messages taken from exceptions are cut to this many characters."""


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc).strip()
    except Exception:  # a hostile __str__
        text = ""
    members = getattr(exc, "exceptions", None)  # an exception group (a builtin from 3.11)
    if isinstance(members, tuple) and members:
        inner = "; ".join(f"{type(e).__name__}: {_describe(e)}" for e in members[:5])
        text = f"{text} ({inner})"
    if len(text) > MAX_MESSAGE:
        text = f"{text[:MAX_MESSAGE]}… ({len(text)} characters)"
    return storable_text(text) if text else type(exc).__name__


def _status_text(item: Any) -> str | None:
    if isinstance(item, Status):
        if not isinstance(item.message, str):
            raise InvalidValue(f"Status message is of type {type(item.message).__name__}; it must be a str")
        item = item.message
    if not isinstance(item, str):
        return None
    if not item.isascii():
        check_text(item, "the status message")
    return item


async def _handle(
    item: Any, channel: BodyChannel, label: Label | None, body: AsyncGenerator[Any, Any] | None
) -> Any:
    """Act on one yielded value; return what the `yield` evaluates to.

    `body` is the generator that yielded it when the body may wait for answers without its task
    (the outermost generator of a task's body): its question may then raise `Parked`.
    """
    message = _status_text(item)
    if message is not None:
        await channel.set_status(message)
        return None
    if isinstance(item, Step):
        return await run_step(channel, item)
    if isinstance(item, Delegate):
        return await drive_generator(item.helper, channel, label=label, outermost=False)
    if isinstance(item, Parked):  # a parked body resumed: its question is still open
        return _answer_value(await item.question.answers(True), item.question.single)
    requests = as_input_requests(item)
    if requests is not None:
        _check_requests(requests)
        single = isinstance(item, InputRequest)
        ask_or_park = getattr(channel, "ask_or_park", None) if body is not None else None
        if ask_or_park is None:
            return _answer_value(await channel.ask(requests), single)
        try:
            return _answer_value(await ask_or_park(requests), single)
        except Parked as parked:
            question = parked.question
            if not movable(body):  # a block is open around its `yield`: it waits in this task
                return _answer_value(await question.answers(False), single)
            question.body, question.single = body, single
            raise
    raise UnsupportedYield(
        "a task body may yield str, Status, an input request, Inputs, Step, Delegate or Result; "
        f"got {type(item).__name__}"
    )


def _check_requests(requests: Sequence[InputRequest]) -> None:
    """`InvalidValue` unless each request's params and key can be stored and sent."""
    for request in requests:
        check_json(request.params, f"{request.method} params")
        if request.key is not None:
            check_text(request.key, f"the key of {request.method}")


def _answer_value(answers: list[Any], single: bool) -> Any:
    return answers[0] if single else tuple(answers)


async def drive_generator(
    generator: AsyncGenerator[Any, Any],
    channel: BodyChannel,
    *,
    pending: Pending | None = None,
    label: Label | None = None,
    outermost: bool = True,
) -> Any:
    """Run `generator` to its `Result` (or its end) and return the result value (None at the end).

    Whatever goes wrong while the body is suspended at a `yield` (a bad value, the client's
    refusal, a cancellation of a scope the body opened around the `yield`) is thrown into the
    body at that `yield`, where it belongs. `Interrupt` from the channel ends the run instead;
    `Parked` does too, leaving the generator open at its question (resume it with
    `Pending(parked)`). `label` names the body for the watchdog (default:
    `current_body`). A `Delegate`'s helper is driven with `outermost=False`: it never parks.
    """
    send: Any = None
    throw: BaseException | None = None
    parked = False
    body = generator if outermost else None
    try:
        if pending is None:
            item = await watched(generator.__anext__(), label)
        else:
            item = pending.item
        while True:
            if isinstance(item, Result):
                return item.value
            try:
                send, throw = await _handle(item, channel, label, body), None
            except Interrupt as stop:
                parked = isinstance(stop, Parked)  # then the generator stays open at its question
                raise
            except BaseException as exc:
                send, throw = None, exc
            if throw is None:
                item = await watched(generator.asend(send), label)
                continue
            item = await watched(generator.athrow(throw), label)
            if isinstance(throw, anyio.get_cancelled_exc_class()) and _ignored_by_body(generator):
                return None
    except StopAsyncIteration:
        return None
    finally:
        if not parked:
            await _close(generator, label)


def _ignored_by_body(generator: AsyncGenerator[Any, Any]) -> bool:
    """After a cancellation delivered at a `yield` (the engine's: task cancelled, shutdown; or a
    scope the body opened around its `yield`, PEP 789), the body yielded again: whether the
    cancellation still stands, so it is ignoring the engine's (close it). Otherwise its own scope
    was cancelled, which is logged."""
    if cancelled_here():
        return True
    logger.warning(
        "task tool body %s was cancelled by its own task group or cancel scope while suspended "
        "at a yield; open task groups and cancel scopes inside the body, not around a yield",
        getattr(generator, "__qualname__", generator),
    )
    return False


async def _close(generator: AsyncGenerator[Any, Any], label: Label | None) -> None:
    try:
        await watched(generator.aclose(), label)
    except Exception:
        logger.warning("a task body raised while it was being closed", exc_info=True)


def outcome_of_exception(exc: Exception, tool: str) -> Outcome:
    """Map an exception escaping a body to its outcome (JSON-RPC error -> failed; others -> tool error)."""
    if isinstance(exc, ProtocolError):
        error = exc.to_error()
        error["message"] = storable_text(str(error["message"]))
        try:
            check_json(error.get("data"), "data")
        except InvalidValue:
            error.pop("data")  # a body's data that cannot be stored: the code and message stand
        return Outcome("failed", error=error)
    if isinstance(exc, InvalidValue):
        message = f"Task tool {tool!r} yielded a value that cannot be sent: {_describe(exc)}"
        return Outcome(
            "failed", error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": "invalid_value"}}
        )
    if not isinstance(exc, (ToolError, CancelRequested)):
        logger.exception("task tool %r raised", tool, exc_info=exc)
    return Outcome("completed", result=error_result(_describe(exc)))


def outcome_of_abort(exc: BaseException, tool: str) -> Outcome:
    """The outcome of a body ended by a `BaseException` that is no `Exception`."""
    name = type(exc).__name__
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        what = f"was cancelled by something other than mcptasks ({name})"
    else:
        described = _describe(exc)
        what = f"raised {name}" + (f": {described}" if described != name else "")
    logger.error("task tool %r %s", tool, what, exc_info=exc)
    message = f"Task tool {tool!r} {what}; the task was stopped."
    return Outcome(
        "failed",
        error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": "aborted", "exception": name}},
    )


def outcome_of_value(value: Any, tool: str, max_bytes: int | None = None) -> Outcome:
    """Convert a body's result value, checking it is JSON and not over `max_bytes`."""
    if value is None or (
        isinstance(value, str) and value.isascii() and (max_bytes is None or len(value) * 4 < max_bytes)
    ):
        return Outcome("completed", result=to_call_tool_result(value))  # plain JSON, small enough
    try:
        result = to_call_tool_result(value)
        check_json(result, "result")
        if "content" in result:
            check_content(result["content"])
        size = json_size(result) if max_bytes is not None else 0
    except (InvalidValue, ValueError, TypeError) as exc:
        message = f"Task tool {tool!r} returned a result that cannot be sent: {_describe(exc)}"
        return Outcome(
            "failed", error={"code": INTERNAL_ERROR, "message": message, "data": {"reason": "invalid_result"}}
        )
    if max_bytes is not None and size > max_bytes:
        message = (
            f"Task tool {tool!r} returned a result of {size} bytes, over the limit of {max_bytes} bytes."
        )
        return Outcome(
            "failed",
            error={
                "code": INTERNAL_ERROR,
                "message": message,
                "data": {"reason": "result_too_large", "bytes": size},
            },
        )
    return Outcome("completed", result=result)


def body_run(
    body: Any, channel: BodyChannel, pending: Pending | None, label: Label | None = None
) -> Awaitable[Any]:
    """What to await to run an opened body (generator or coroutine) to its result value; `label`
    names it for the watchdog (default: `current_body`)."""
    if isinstance(body, AsyncGenerator):
        return drive_generator(body, channel, pending=pending, label=label)
    return watched(body, label)


def outcome_of_error(exc: BaseException, tool: str) -> Outcome | Interrupt:
    """The outcome of a body's run that raised `exc` (`STOPPED` when the caller's own scope was
    cancelled; an `Interrupt` from the channel is returned, not raised)."""
    if isinstance(exc, Interrupt):
        return exc
    if isinstance(exc, Exception):
        return outcome_of_exception(exc, tool)
    if isinstance(exc, anyio.get_cancelled_exc_class()) and cancelled_here():
        return STOPPED  # the caller was cancelled: it decides the outcome
    return outcome_of_abort(exc, tool)


async def settle_body(
    body: Any, channel: BodyChannel, tool: str, pending: Pending | None, max_bytes: int | None
) -> Outcome | Interrupt:
    """Run an opened body to its outcome; nothing it raises escapes (see `outcome_of_error`)."""
    try:
        return outcome_of_value(await body_run(body, channel, pending), tool, max_bytes)
    except BaseException as exc:
        return outcome_of_error(exc, tool)


async def absorb_stray_cancel() -> None:
    """Take a turn; a cancellation that arrives without any scope around us being cancelled
    (one the body requested of its own task and never awaited) is consumed here, so the task
    does not end cancelled. The caller's own cancellation still propagates."""
    try:
        await anyio.lowlevel.checkpoint()
    except anyio.get_cancelled_exc_class():
        if cancelled_here():
            raise


def cancelled_here() -> bool:
    """Whether a cancel scope around the current task (up to a shield) has been cancelled."""
    return anyio.current_effective_deadline() == -math.inf


async def run_body(
    body: Any,
    channel: BodyChannel,
    tool: str,
    *,
    pending: Pending | None = None,
    max_result_bytes: int | None = None,
) -> Outcome:
    """Run an opened body (generator or coroutine) to its outcome, in a task of its own.

    Nothing the body raises escapes: every `BaseException` becomes the outcome. A cancellation of
    the caller still propagates (from the task group's exit), so the caller decides whether the
    body was stopped from outside.
    """
    ended: list[Outcome | Interrupt] = []

    async def contained() -> None:
        current_body.set(BodyLabel(tool, channel.task_id))
        ended.append(await settle_body(body, channel, tool, pending, max_result_bytes))
        await absorb_stray_cancel()

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(contained)
    end = ended[0] if ended else _VANISHED
    if isinstance(end, Interrupt):
        raise end
    if end is STOPPED:  # not every backend re-raises the caller's cancellation at the group's exit
        await anyio.lowlevel.checkpoint_if_cancelled()
    return end


STOPPED = Outcome("failed", error={"code": INTERNAL_ERROR, "message": "The task body was stopped."})
_VANISHED = Outcome(
    "failed", error={"code": INTERNAL_ERROR, "message": "The task body ended without an outcome."}
)


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
        """Dropped: there is no task to carry a status message (the event loop still gets a turn)."""
        await anyio.lowlevel.checkpoint()

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


def input_deadlines(requests: Sequence[InputRequest], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The deadlines of the `requests` (under `keys`) that have a `timeout`, from now:
    `{key: {at, answer}}` (`at`: epoch seconds; `answer`: the wire answer given then)."""
    now = time.time()
    return {
        key: {"at": now + request.timeout, "answer": request.timeout_answer}
        for key, request in zip(keys, requests, strict=True)
        if request.timeout is not None
    }
