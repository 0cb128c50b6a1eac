"""`TaskContext`: the imperative handle a task body can ask for by declaring a parameter of this type."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from pydantic import BaseModel

from mcptasks._authoring import steps
from mcptasks._authoring.related import RelatedTask, RelatedTasks
from mcptasks._authoring.steps import Step
from mcptasks._authoring.threaded import CancelRequested
from mcptasks._authoring.values import check_json, check_text
from mcptasks._authoring.yields import (
    Answer,
    Elicit,
    InputRequest,
    ListRoots,
    OnTimeout,
    RootsAnswer,
    Sample,
    SampleAnswer,
)

ModelT = TypeVar("ModelT", bound=BaseModel)
T = TypeVar("T")
P = ParamSpec("P")

MAX_CHECKPOINT_BYTES = 64 * 1024
"""The largest checkpoint (as compact JSON) a body may save: it is for job ids and cursors, not data."""


def checked_state(state: Any) -> Any:
    """`state` as a plain JSON value (a copy), or `ValueError` saying why it cannot be saved."""
    try:
        text = json.dumps(state, separators=(",", ":"), allow_nan=False)
        if "\\ud" in text:  # a surrogate, escaped: paired ones are fine, a lone one cannot be stored
            check_json(state, "checkpoint")
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(
            f"a checkpoint must be plain JSON (dict, list, str, number, bool, None): {exc}"
        ) from None
    if len(text.encode()) > MAX_CHECKPOINT_BYTES:
        raise ValueError(
            f"a checkpoint is at most {MAX_CHECKPOINT_BYTES} bytes of JSON; this one is {len(text.encode())}: "
            "save an id or a cursor, not the data itself"
        )
    return json.loads(text)


class BodyChannel(Protocol):
    """Where a running body's status and input requests go (a task, an inline call, an MRTR round)."""

    @property
    def task_id(self) -> str | None:
        """The task's id, or None when the body runs inline without a task."""

    @property
    def attempt(self) -> int:
        """Which run of the task this is: 1, or more after re-runs (`retry_on_crash`)."""

    @property
    def saved(self) -> Any:
        """The body's last checkpoint (from this run or an earlier one), or None."""

    async def set_status(self, message: str) -> None:
        """Publish `message` as the task's `statusMessage`."""

    async def save(self, state: Any) -> None:
        """Store `state` (already checked plain JSON) as the task's checkpoint."""

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Issue `requests` together and return their parsed answers, in order."""

    # Optional: a `cancelled` attribute (bool), read by `TaskContext.cancelled`; a coroutine
    # method `step(step: Step) -> Any` that runs a step against the task's journal (without
    # one, steps run unjournalled: see `run_step`).


def run_step(channel: BodyChannel, step: Step) -> Awaitable[Any]:
    """Run `step` through `channel`'s journal when it keeps one, else just run it."""
    journalled: Callable[[Step], Awaitable[Any]] | None = getattr(channel, "step", None)
    return journalled(step) if journalled is not None else steps.unjournalled(step)


class TaskContext:
    """Status, input and identity for the running body.

    Declare a parameter annotated `TaskContext` on a task tool (generator or coroutine) and the
    engine passes one in; it is not part of the tool's input schema.
    """

    def __init__(
        self, channel: BodyChannel, *, owner: str, tool: str, related: RelatedTasks | None = None
    ) -> None:
        self._channel = channel
        self._related = related
        self.owner = owner
        """The principal that created the task (the auth subject, or the shared anonymous scope)."""
        self.tool = tool
        """The task tool's name."""

    @property
    def related_task_ids(self) -> tuple[str, ...]:
        """The earlier tasks of this owner the call named as related (`relatedTaskIds`, honoured
        with `EngineConfig.related_tasks`); empty when it named none or the server ignores them."""
        return () if self._related is None else self._related.ids

    async def related_tasks(self) -> list[RelatedTask]:
        """The related tasks as they stand now (status, statusMessage, result or error); one
        that has since expired is left out."""
        return [] if self._related is None else await self._related.read()

    @property
    def task_id(self) -> str | None:
        """The task id, or None while the body runs inline (no task) or before the task exists."""
        return self._channel.task_id

    @property
    def attempt(self) -> int:
        """1 for the first run; 2, 3, ... when the body is re-run after its worker was lost."""
        return self._channel.attempt

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled (or the server is stopping); safe to read from a
        worker thread. Long loops in a `def` body should check it (or call `check_cancelled`)."""
        return bool(getattr(self._channel, "cancelled", False))

    def check_cancelled(self) -> None:
        """Raise `CancelRequested` if the task was cancelled; call it between steps of long work."""
        if self.cancelled:
            raise CancelRequested()

    @property
    def saved(self) -> Any:
        """The state last saved with `checkpoint` (by this run, or by an earlier run of the same
        task that was lost), or None. A re-run (`retry_on_crash`) starts from it."""
        return self._channel.saved

    async def checkpoint(self, state: Any) -> None:
        """Save small JSON `state` with the task, durably, before returning.

        If the server running the body dies, the re-run (`retry_on_crash=True`) finds it in
        `saved`, so it can re-attach to work already started (an external job id, a cursor)
        instead of starting over. Each call replaces the previous state. `ValueError` when
        `state` is not plain JSON or is larger than `MAX_CHECKPOINT_BYTES`; nothing is saved then.
        """
        await self._channel.save(checked_state(state))

    @overload
    async def step(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T: ...

    @overload
    async def step(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T: ...

    async def step(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once, as a step of a durable body, and return its value.

        `fn` is sync (it runs in a worker thread) or async. Its value (plain JSON) is journalled
        with the task before this returns; when the body is replayed (`durable=True`: its server
        stopped, crashed or handed it over) the step returns the journalled value without calling
        `fn`. If `fn` raises, `StepFailed` (naming the exception's type and message) is raised,
        now and on every replay (a `ToolError` or `ProtocolError` is raised as itself). A step interrupted before its value was journalled runs again:
        steps run at least once, so make them idempotent where you can. The value comes back as
        JSON reads it (tuples become lists). Without a journal (an inline call, a tool that is
        not durable) the step simply runs.
        """
        return await run_step(self._channel, Step(fn, *args, **kwargs))

    async def now(self) -> float:
        """The current time (epoch seconds), journalled: a replay sees the time the first run saw."""
        value: float = await run_step(self._channel, Step(steps.now))
        return value

    async def random(self) -> float:
        """A random float in [0, 1), journalled: a replay gets the same number."""
        value: float = await run_step(self._channel, Step(steps.random))
        return value

    async def status(self, message: str) -> None:
        """Set the task's `statusMessage` (`InvalidValue` when it is no Unicode text)."""
        message = str(message)
        if not message.isascii():
            check_text(message, "the status message")
        await self._channel.set_status(message)

    @overload
    async def elicit(
        self,
        message: str,
        schema: type[ModelT],
        *,
        required: bool = False,
        timeout: float | None = None,
        on_timeout: OnTimeout = "decline",
    ) -> Answer[ModelT]: ...

    @overload
    async def elicit(
        self,
        message: str,
        schema: dict[str, Any] | None = None,
        *,
        required: bool = False,
        timeout: float | None = None,
        on_timeout: OnTimeout = "decline",
    ) -> Answer[dict[str, Any]]: ...

    async def elicit(
        self,
        message: str,
        schema: type[BaseModel] | dict[str, Any] | None = None,
        *,
        required: bool = False,
        timeout: float | None = None,
        on_timeout: OnTimeout = "decline",
    ) -> Answer[Any]:
        """Ask the user (`elicitation/create`); the task is `input_required` until answered.

        `Unsupported` when the client did not declare `elicitation` (see `Elicit` for `required`,
        `timeout` and `on_timeout`).
        """
        request = Elicit(message, schema, required=required, timeout=timeout, on_timeout=on_timeout)
        answer: Answer[Any] = await self.request(request)
        return answer

    async def sample(self, messages: str | Sequence[str | dict[str, Any]], **options: Any) -> SampleAnswer:
        """Ask the client's model (`sampling/createMessage`); options as for `Sample`.

        `Unsupported` when the client did not declare `sampling`.
        """
        answer: SampleAnswer = await self.request(Sample(messages, **options))
        return answer

    async def list_roots(self, *, required: bool = False) -> RootsAnswer:
        """Ask the client for its roots (`roots/list`); `Unsupported` when it did not declare `roots`."""
        answer: RootsAnswer = await self.request(ListRoots(required=required))
        return answer

    async def request(self, request: InputRequest) -> Any:
        """Issue one input request of any kind and return its parsed answer."""
        (answer,) = await self._channel.ask([request])
        return answer

    async def inputs(self, *requests: InputRequest) -> tuple[Any, ...]:
        """Issue several requests at once; return their answers in order when all are in."""
        return tuple(await self._channel.ask(list(requests)))


def rebind(context: TaskContext, channel: BodyChannel) -> None:
    """Point `context` at `channel`: a body started by input rounds before its task existed keeps
    its context (it holds it) and talks to the task's channel from then on (the engine's use)."""
    context._channel = channel
