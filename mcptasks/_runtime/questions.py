"""`Question`: one `ask` of a running body, and how its answers are recognised.

A question holds its requests, the answers parsed so far and the keys it waits on; it outlives a
parked body's task and resumes it (`TaskRun.ask_or_park`). Here too: how many invalid answers a
question accepts (`MAX_INVALID_ANSWERS`), a JSON-RPC error sent as an answer (`error_response`),
the name a durable run's journal gives a question (`question_name`), and the answers once every
key has one (`answers_received`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Sequence
from contextvars import Context
from typing import TYPE_CHECKING, Any, Protocol

from mcptasks._authoring.yields import InputRequest
from mcptasks._runtime.failures import ClientRefusal

if TYPE_CHECKING:
    from mcptasks._authoring.context import BodyChannel


class Asker(Protocol):
    """The run a question belongs to (`TaskRun`), as much of it as a question uses."""

    def _answer(self, question: Question, park: bool) -> Awaitable[list[Any]]:
        """Issue what `question` still needs, wait for the answers, take and parse them."""


MAX_INVALID_ANSWERS = 3
"""How many invalid answers to one question a task accepts before it fails with -32602."""


def error_response(raw: Any) -> ClientRefusal | None:
    """A JSON-RPC error object sent as an answer (the client refused the request), as an error."""
    if (
        isinstance(raw, dict)
        and isinstance(raw.get("code"), int)
        and isinstance(raw.get("message"), str)
        and set(raw) <= {"code", "message", "data"}
    ):
        return ClientRefusal(int(raw["code"]), str(raw["message"]), raw.get("data"))
    return None


class Question:
    """One `ask`: its requests, the answers parsed so far, and the keys it waits on. It outlives
    the task of a body that parks (`TaskRun.ask_or_park`), and then keeps what resuming the body
    needs (`OpenQuestion`); what only a retry needs is made when one happens."""

    __slots__ = (
        "body",
        "channel",
        "context",
        "due",
        "keys",
        "parsed",
        "recorded",
        "rejected",
        "requests",
        "run",
        "single",
        "todo",
        "wakeup",
    )

    def __init__(self, run: Asker, requests: Sequence[InputRequest]) -> None:
        self.run = run
        self.requests = requests
        """The requests, by index (an invalid answer's retry replaces its request)."""
        self.parsed: list[Any] | None = None
        """The parsed answers, by index (None: none yet)."""
        self.rejected: list[int] | None = None
        """How many invalid answers each request got (None: none yet)."""
        self.todo: list[int] | None = None
        """The indexes of the requests still to be answered validly (None: all of them)."""
        self.keys: tuple[str, ...] | None = None
        """The keys the requests in `todo` were issued under, in order (None: not issued yet)."""
        self.recorded: list[Any] | None = None
        """The answers to `keys` read from a durable run's journal (None: wait for them)."""
        self.body: AsyncGenerator[Any, Any] | None = None
        self.single = True
        self.context: Context | None = None
        self.channel: BodyChannel | None = None
        self.wakeup: object = None
        self.due: float | None = None
        """When the earliest answer deadline of its keys passes (`anyio.current_time()` clock)."""

    def answers(self, park: bool) -> Awaitable[list[Any]]:
        """Go on waiting for the answers (see `TaskRun.ask_or_park`)."""
        return self.run._answer(self, park)

    def reject(self, index: int, replacement: InputRequest) -> int:
        """Count an invalid answer to request `index`, which is asked again as `replacement`;
        return how many it got."""
        if self.rejected is None:
            self.rejected = [0] * len(self.requests)
        requests = list(self.requests)  # a new list: the caller's sequence stays as it was
        requests[index] = replacement
        self.requests = requests
        self.rejected[index] += 1
        return self.rejected[index]


def question_name(requests: Sequence[InputRequest]) -> str:
    """What a durable run's journal names a question by: the methods of its requests."""
    return ",".join(request.method for request in requests)


def answers_received(keys: tuple[str, ...], responses: dict[str, Any]) -> list[Any] | None:
    """The responses received for `keys`, in order, once there is one for each (else None)."""
    if all(key in responses for key in keys):
        return [responses[key] for key in keys]
    return None
