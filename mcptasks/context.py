"""`TaskContext`: the imperative handle a task body can ask for by declaring a parameter of this type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, overload

from pydantic import BaseModel

from mcptasks.yields import (
    Elicit,
    Elicitation,
    InputRequest,
    ListRoots,
    Root,
    Sample,
    SampleResult,
    Unsupported,
)

ModelT = TypeVar("ModelT", bound=BaseModel)


class BodyChannel(Protocol):
    """Where a running body's status and input requests go (a task, an inline call, an MRTR round)."""

    @property
    def task_id(self) -> str | None:
        """The task's id, or None when the body runs inline without a task."""

    @property
    def attempt(self) -> int:
        """Which run of the task this is: 1, or more after re-runs (`retry_on_crash`)."""

    async def set_status(self, message: str) -> None:
        """Publish `message` as the task's `statusMessage`."""

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Issue `requests` together and return their parsed answers, in order."""


class TaskContext:
    """Status, input and identity for the running body.

    Declare a parameter annotated `TaskContext` on a task tool (generator or coroutine) and the
    engine passes one in; it is not part of the tool's input schema.
    """

    def __init__(self, channel: BodyChannel, *, owner: str, tool: str) -> None:
        self._channel = channel
        self.owner = owner
        """The principal that created the task (the auth subject, or the shared anonymous scope)."""
        self.tool = tool
        """The task tool's name."""

    @property
    def task_id(self) -> str | None:
        """The task id, or None while the body runs inline (no task) or before the task exists."""
        return self._channel.task_id

    @property
    def attempt(self) -> int:
        """1 for the first run; 2, 3, ... when the body is re-run after its worker was lost."""
        return self._channel.attempt

    def _rebind(self, channel: BodyChannel) -> None:
        self._channel = channel

    async def status(self, message: str) -> None:
        """Set the task's `statusMessage`."""
        await self._channel.set_status(str(message))

    @overload
    async def elicit(
        self, message: str, schema: type[ModelT], *, required: bool = False
    ) -> Elicitation[ModelT] | Unsupported: ...

    @overload
    async def elicit(
        self, message: str, schema: dict[str, Any] | None = None, *, required: bool = False
    ) -> Elicitation[dict[str, Any]] | Unsupported: ...

    async def elicit(
        self, message: str, schema: type[BaseModel] | dict[str, Any] | None = None, *, required: bool = False
    ) -> Elicitation[Any] | Unsupported:
        """Ask the user (`elicitation/create`); the task is `input_required` until answered.

        `Unsupported` when the client did not declare `elicitation` (see `Elicit` for `required`).
        """
        answer: Elicitation[Any] | Unsupported = await self.request(
            Elicit(message, schema, required=required)
        )
        return answer

    async def sample(
        self, messages: str | Sequence[str | dict[str, Any]], **options: Any
    ) -> SampleResult | Unsupported:
        """Ask the client's model (`sampling/createMessage`); options as for `Sample`.

        `Unsupported` when the client did not declare `sampling`.
        """
        answer: SampleResult | Unsupported = await self.request(Sample(messages, **options))
        return answer

    async def list_roots(self, *, required: bool = False) -> list[Root] | Unsupported:
        """Ask the client for its roots (`roots/list`); `Unsupported` when it did not declare `roots`."""
        answer: list[Root] | Unsupported = await self.request(ListRoots(required=required))
        return answer

    async def request(self, request: InputRequest) -> Any:
        """Issue one input request of any kind and return its parsed answer."""
        (answer,) = await self._channel.ask([request])
        return answer

    async def inputs(self, *requests: InputRequest) -> tuple[Any, ...]:
        """Issue several requests at once; return their answers in order when all are in."""
        return tuple(await self._channel.ask(list(requests)))
