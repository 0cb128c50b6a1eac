"""Input only through the client capabilities a request declared.

An input request needs a client capability: `elicitation/create` needs `elicitation`,
`sampling/createMessage` needs `sampling`, `roots/list` needs `roots`. A request whose capability
the client did not declare in that `tools/call` is never sent: the `yield` evaluates to
`Unsupported`, or, for a request made with `required=True`, the body fails with -32021 and
`data.requiredCapabilities` naming the capability. A task remembers the input capabilities of the
call that created it (`TaskRecord.client_capabilities`), so any replica or worker running it
applies the same rule.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Literal

from mcptasks._authoring.context import BodyChannel, run_step
from mcptasks._authoring.steps import Step
from mcptasks._authoring.yields import InputRequest, Unsupported
from mcptasks.errors import ProtocolError
from mcptasks.wire import MISSING_REQUIRED_CLIENT_CAPABILITY

InputCapability = Literal["elicitation", "sampling", "roots"]
"""A client capability an input request needs."""

INPUT_CAPABILITIES: tuple[InputCapability, ...] = ("elicitation", "sampling", "roots")

METHOD_CAPABILITY: dict[str, InputCapability] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
"""The client capability each input method needs (other methods are not checked)."""


def input_capabilities(declared: Mapping[str, Any]) -> dict[str, Any]:
    """The input part (`elicitation`, `sampling`, `roots`) of a request's client capabilities.

    This is what a task stores; values that are not objects count as `{}`.
    """
    return {
        name: dict(value) if isinstance(value, Mapping) else {}
        for name in INPUT_CAPABILITIES
        if name in declared and (value := declared[name]) is not None
    }


def declares(declared: Mapping[str, Any], capability: str) -> bool:
    """Whether `declared` lets the server send requests needing `capability`.

    Elicitation is form mode here: `elicitation: {}` declares it, and so does an object naming
    `form`; one naming only `url` does not.
    """
    if capability not in declared:
        return False
    value = declared[capability]
    if capability == "elicitation" and isinstance(value, Mapping) and ("form" in value or "url" in value):
        return "form" in value
    return True


def missing_capabilities(required: Iterable[str], declared: Mapping[str, Any]) -> list[str]:
    """The capabilities of `required` that `declared` lacks, in order."""
    return [name for name in required if not declares(declared, name)]


def missing_capabilities_error(what: str, missing: Sequence[str]) -> ProtocolError:
    """The -32021 error naming client capabilities a call needs but did not declare."""
    names = ", ".join(repr(name) for name in missing)
    noun = "capability" if len(missing) == 1 else "capabilities"
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the client {noun} {names}; declare it in the request's client capabilities",
        {"requiredCapabilities": {name: {} for name in missing}},
    )


class GatedChannel:
    """A `BodyChannel` that sends only the input requests the client declared a capability for.

    `declared` None means "not restricted" (every request goes through: the fallback tools mode,
    where the model answers, and tasks created without this information). Status goes through.
    """

    __slots__ = ("declared", "inner", "tool")

    def __init__(self, inner: BodyChannel, declared: Mapping[str, Any] | None, tool: str) -> None:
        self.inner = inner
        self.declared = declared
        self.tool = tool

    @property
    def task_id(self) -> str | None:
        """The inner channel's task id."""
        return self.inner.task_id

    @property
    def attempt(self) -> int:
        """The inner channel's attempt."""
        return self.inner.attempt

    @property
    def cancelled(self) -> bool:
        """Whether the inner channel's task was asked to stop (False for channels that cannot tell)."""
        return bool(getattr(self.inner, "cancelled", False))

    @property
    def saved(self) -> Any:
        """The inner channel's checkpoint."""
        return self.inner.saved

    async def save(self, state: Any) -> None:
        """Passed through."""
        await self.inner.save(state)

    async def set_status(self, message: str) -> None:
        """Passed through."""
        await self.inner.set_status(message)

    def step(self, step: Step) -> Awaitable[Any]:
        """Passed through (to the inner channel's journal, when it keeps one)."""
        return run_step(self.inner, step)

    def ask(self, requests: Sequence[InputRequest]) -> Coroutine[Any, Any, list[Any]]:
        """Ask the inner channel for the supported requests; `Unsupported` for the others.

        Raises -32021 before sending anything when an unsupported request is `required`. When
        every request is supported this is the inner channel's own `ask` (no frame of its own
        while the body waits).
        """
        return self._gate(requests, self.inner.ask)

    def ask_or_park(self, requests: Sequence[InputRequest]) -> Coroutine[Any, Any, list[Any]]:
        """`ask`, through the inner channel's `ask_or_park` when it has one and every request is
        supported (the body may then wait without a task; see `TaskRun.ask_or_park`)."""
        return self._gate(requests, getattr(self.inner, "ask_or_park", self.inner.ask))

    def _gate(
        self,
        requests: Sequence[InputRequest],
        ask_all: Callable[[Sequence[InputRequest]], Coroutine[Any, Any, list[Any]]],
    ) -> Coroutine[Any, Any, list[Any]]:
        if self.declared is None:
            return ask_all(requests)
        answers: list[Any] = [None] * len(requests)
        send: list[int] = []
        for index, request in enumerate(requests):
            capability = METHOD_CAPABILITY.get(request.method)
            if capability is None or declares(self.declared, capability):
                send.append(index)
            elif request.required:
                raise missing_capabilities_error(f"Tool {self.tool!r} ({request.method})", [capability])
            else:
                answers[index] = Unsupported(request.method, capability)
        if len(send) == len(requests):
            return ask_all(requests)
        return self._ask_some(requests, send, answers)

    async def _ask_some(
        self, requests: Sequence[InputRequest], send: list[int], answers: list[Any]
    ) -> list[Any]:
        if send:
            received = await self.inner.ask([requests[i] for i in send])
            for index, answer in zip(send, received, strict=True):
                answers[index] = answer
        return answers


def gated(channel: BodyChannel, declared: Mapping[str, Any] | None, tool: str) -> BodyChannel:
    """`channel` wrapped in a `GatedChannel` (as is when nothing is restricted)."""
    return channel if declared is None else GatedChannel(channel, declared, tool)
