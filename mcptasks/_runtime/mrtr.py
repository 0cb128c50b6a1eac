"""Synchronous multi-round-trip input (MRTR, `resultType: "input_required"`) on `tools/call`.

Answers gathered so far travel in the signed `requestState` and are fed back to the same requests
in order (keys: the request's `key`, or `input-<n>` by position), so a round can always be
rebuilt by replaying the body from its start.

- Before a task: a generator's leading `yield`s of requests marked `before_task=True` are resolved
  on the original `tools/call` by replay; at the first other yield the task is created and the same
  generator continues as its body (the spec: resolve MRTR before the `CreateTaskResult`).
- Inline: an optional tool called without the tasks extension may still ask for input when the
  client declared the matching capability. There the body is kept suspended between rounds when
  the retry reaches the same process (`mcptasks._runtime.parking`); replay is the fallback.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, NamedTuple

from mcptasks._authoring.context import BodyChannel, TaskContext
from mcptasks._authoring.steps import MAX_UNJOURNALLED_BYTES, Step, step_entry, step_value
from mcptasks._authoring.tool import TaskTool
from mcptasks._authoring.yields import InputRequest, InvalidAnswer, Result, as_input_requests
from mcptasks._runtime.answer_log import questions_digest
from mcptasks._runtime.driver import InlineChannel, Interrupt, Pending
from mcptasks._runtime.request_params import checked_answers
from mcptasks._runtime.request_state import RequestStateCodec, arguments_digest
from mcptasks.errors import ProtocolError, ToolError
from mcptasks.errors import StepBeforeTask as StepBeforeTask
from mcptasks.wire import INVALID_PARAMS


class InputNeeded(Interrupt):
    """Raised out of a body to end this round with an `input_required` result."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__("input needed")
        self.requests = requests


class ReplayChannel(InlineChannel):
    """The channel of MRTR rounds: answers come from the gathered responses, by key.

    A question without an answer yet goes to `wait_for`, which by default ends the round
    (`InputNeeded`); `mcptasks._runtime.parking` overrides it to keep the body suspended instead.
    """

    def __init__(
        self,
        tool: str,
        answers: Mapping[str, Any],
        *,
        allowed: Callable[[InputRequest], bool],
        durable: bool = False,
    ) -> None:
        super().__init__(tool)
        self.answers = dict(answers)
        self.allowed = allowed
        self.durable = durable
        """Whether the body is a durable tool's before its task exists: its steps are refused."""
        self.sequence = 0
        self.entries: list[dict[str, Any]] = []
        """What this round's body did, as journal entries (steps, questions and their answers):
        the journal a durable body's task starts with when this round hands it over."""

    async def step(self, step: Step) -> Any:
        """Run `step` (again, each round) and note its entry; refused, without running, in a
        durable tool's rounds before its task (`StepBeforeTask`)."""
        if self.durable:
            raise StepBeforeTask(self.tool, step.name)
        entry, cause = await step_entry(step, None, MAX_UNJOURNALLED_BYTES)
        self.entries.append(entry)
        return step_value(entry, cause)

    async def wait_for(self, missing: dict[str, dict[str, Any]]) -> None:
        """Called with the questions still unanswered; returns once `answers` may hold more."""
        raise InputNeeded(missing)

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Answer from the gathered responses; hand what is missing to `wait_for`."""
        keys: list[str] = []
        for request in requests:
            self.sequence += 1
            keys.append(request.key or f"input-{self.sequence}")
        for request in requests:
            if not self.allowed(request):
                raise ToolError(
                    f"Tool {self.tool!r} needs input from the client ({request.method}). Call it with the "
                    "io.modelcontextprotocol/tasks extension declared in the request's client capabilities."
                )
        pending = list(requests)
        while True:
            answers: list[Any] = []
            missing: dict[str, dict[str, Any]] = {}
            for index, key in enumerate(keys):
                if key in self.answers:
                    try:
                        answers.append(pending[index].parse(self.answers[key]))
                        continue
                    except InvalidAnswer as exc:
                        del self.answers[key]
                        pending[index] = pending[index].retry_with(str(exc))
                missing[key] = pending[index].to_wire()
            if not missing:
                name = ",".join(request.method for request in requests)
                digest = questions_digest([request.to_wire() for request in requests])
                self.entries.append({"kind": "ask", "name": name, "keys": keys, "digest": digest})
                self.entries.append(
                    {"kind": "answer", "name": name, "answers": [self.answers[k] for k in keys]}
                )
                return answers
            await self.wait_for(missing)


class SyncRounds:
    """What a round's `inputResponses` + `requestState` say, and the reply that asks for more.

    `answers` is every answer gathered so far; `parked` the id of a body kept suspended by an
    earlier round (inline calls only); `retry` whether this call continues an earlier round.
    """

    def __init__(
        self,
        codec: RequestStateCodec,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        *,
        input_responses: object,
        request_state: object,
    ) -> None:
        self.codec = codec
        self.tool = tool
        self.digest = arguments_digest(tool.name, dict(arguments or {}))
        self.retry = request_state is not None
        self.parked: str | None = None
        answers: dict[str, Any] = {}
        if request_state is not None:
            state = codec.decode(request_state)
            if state.get("tool") != tool.name or state.get("args") != self.digest:
                raise ProtocolError(INVALID_PARAMS, "Invalid requestState: it belongs to another call")
            answers.update(state.get("answers") or {})
            parked = state.get("parked")
            self.parked = parked if isinstance(parked, str) else None
        self.responses: dict[str, Any] = {}
        if input_responses is not None:
            if not isinstance(input_responses, Mapping):
                raise ProtocolError(
                    INVALID_PARAMS, "Invalid params for tools/call: inputResponses must be an object"
                )
            self.responses = dict(checked_answers(input_responses))
            answers.update(self.responses)
        self.answers = answers

    def replay_channel(
        self, allowed: Callable[[InputRequest], bool], *, durable: bool = False
    ) -> ReplayChannel:
        """A channel answering from the answers gathered so far (a replayed round); `durable`:
        the rounds of a durable tool before its task, which refuse steps."""
        return ReplayChannel(self.tool.name, self.answers, allowed=allowed, durable=durable)

    def input_required(
        self, requests: dict[str, dict[str, Any]], answers: Mapping[str, Any], *, parked: str | None = None
    ) -> dict[str, Any]:
        """The `input_required` result asking `requests`, with the `answers` gathered so far."""
        state: dict[str, Any] = {"tool": self.tool.name, "args": self.digest, "answers": dict(answers)}
        if parked is not None:
            state["parked"] = parked
        return {
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": self.codec.encode(state),
        }


class StartedBody(NamedTuple):
    """A body started by synchronous input rounds, handed over to become a task."""

    body: AsyncGenerator[Any, Any]
    context: TaskContext
    pending: Pending | None
    """The yield it stopped at (the driver handles it first)."""
    entries: tuple[dict[str, Any], ...] = ()
    """What the rounds did, as journal entries (a durable body's task starts its journal with them)."""


async def advance_to_task(
    channel: BodyChannel, body: AsyncGenerator[Any, Any], context: TaskContext
) -> StartedBody:
    """Step a generator through its `before_task` requests; return it ready to hand to a task.

    Raises `InputNeeded` (after closing the generator) when an answer is still missing.
    """
    try:
        try:
            item = await body.__anext__()
        except StopAsyncIteration:
            return StartedBody(body, context, Pending(Result(None)))
        while True:
            requests = as_input_requests(item)
            if requests is None or not all(r.before_task for r in requests):
                return StartedBody(body, context, Pending(item))
            answers = await channel.ask(requests)
            send = answers[0] if isinstance(item, InputRequest) else tuple(answers)
            try:
                item = await body.asend(send)
            except StopAsyncIteration:
                return StartedBody(body, context, Pending(Result(None)))
    except BaseException:
        await body.aclose()
        raise
