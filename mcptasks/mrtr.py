"""Synchronous multi-round-trip input (MRTR, `resultType: "input_required"`) on `tools/call`.

Two uses, one mechanism (replay): the body runs from the start on every round; answers gathered
so far travel in the signed `requestState` and are fed back to the same requests in order.

- Before a task: a generator's leading `yield`s of requests marked `before_task=True` are resolved
  on the original `tools/call`; at the first other yield the task is created and the same
  generator continues as its body (the spec: resolve MRTR before the `CreateTaskResult`).
- Inline: an optional tool called without the tasks extension may still ask for input when the
  client declared the matching capability (elicitation, sampling, roots).

Replay means code before an input request runs once per round; keep it free of side effects.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from mcptasks.context import TaskContext
from mcptasks.driver import InlineChannel, Interrupt, Pending
from mcptasks.errors import ProtocolError, ToolError
from mcptasks.request_state import RequestStateCodec, arguments_digest
from mcptasks.tool import TaskTool
from mcptasks.wire import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcptasks.yields import InputRequest, InvalidAnswer, Result, as_input_requests

METHOD_CAPABILITY = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


class InputNeeded(Interrupt):
    """Raised out of a body to end this round with an `input_required` result."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__("input needed")
        self.requests = requests


class ReplayChannel(InlineChannel):
    """The channel of one MRTR round: answers come from the gathered responses, by key."""

    def __init__(
        self,
        tool: str,
        answers: Mapping[str, Any],
        *,
        capabilities: Mapping[str, Any],
        allowed: Callable[[InputRequest], bool],
    ) -> None:
        super().__init__(tool)
        self.answers = dict(answers)
        self.capabilities = capabilities
        self.allowed = allowed
        self.sequence = 0

    def _check_capability(self, request: InputRequest) -> None:
        capability = METHOD_CAPABILITY.get(request.method)
        if capability is not None and capability not in self.capabilities:
            raise ProtocolError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"Tool {self.tool!r} needs the client capability {capability!r} for {request.method}",
                {"requiredCapabilities": {capability: {}}},
            )

    async def ask(self, requests: Sequence[InputRequest]) -> list[Any]:
        """Answer from the gathered responses, or end the round asking for what is missing."""
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
        answers: list[Any] = []
        missing: dict[str, dict[str, Any]] = {}
        for key, request in zip(keys, requests, strict=True):
            if key in self.answers:
                try:
                    answers.append(request.parse(self.answers[key]))
                    continue
                except InvalidAnswer as exc:
                    del self.answers[key]
                    request = request.retry_with(str(exc))
            self._check_capability(request)
            missing[key] = request.to_wire()
        if missing:
            raise InputNeeded(missing)
        return answers


class SyncRounds:
    """Builds the channel for a round from `inputResponses` + `requestState`, and the reply that asks."""

    def __init__(
        self,
        codec: RequestStateCodec,
        tool: TaskTool,
        arguments: Mapping[str, Any] | None,
        *,
        input_responses: object,
        request_state: object,
        capabilities: Mapping[str, Any],
        allowed: Callable[[InputRequest], bool],
    ) -> None:
        self.codec = codec
        self.tool = tool
        self.digest = arguments_digest(tool.name, dict(arguments or {}))
        answers: dict[str, Any] = {}
        if request_state is not None:
            state = codec.decode(request_state)
            if state.get("tool") != tool.name or state.get("args") != self.digest:
                raise ProtocolError(INVALID_PARAMS, "Invalid requestState: it belongs to another call")
            answers.update(state.get("answers") or {})
        if input_responses is not None:
            if not isinstance(input_responses, Mapping):
                raise ProtocolError(
                    INVALID_PARAMS, "Invalid params for tools/call: inputResponses must be an object"
                )
            answers.update(input_responses)
        self.channel = ReplayChannel(tool.name, answers, capabilities=capabilities, allowed=allowed)

    def input_required(self, needed: InputNeeded) -> dict[str, Any]:
        """The `input_required` result for a round that stopped at `needed`."""
        state = {"tool": self.tool.name, "args": self.digest, "answers": self.channel.answers}
        return {
            "resultType": "input_required",
            "inputRequests": needed.requests,
            "requestState": self.codec.encode(state),
        }


async def advance_to_task(
    rounds: SyncRounds, body: AsyncGenerator[Any, Any], context: TaskContext
) -> tuple[Any, TaskContext, Pending | None]:
    """Step a generator through its `before_task` requests; return it ready to hand to a task.

    Raises `InputNeeded` (after closing the generator) when an answer is still missing.
    """
    channel = rounds.channel
    try:
        try:
            item = await body.__anext__()
        except StopAsyncIteration:
            return body, context, Pending(Result(None))
        while True:
            requests = as_input_requests(item)
            if requests is None or not all(r.before_task for r in requests):
                return body, context, Pending(item)
            answers = await channel.ask(requests)
            send = answers[0] if isinstance(item, InputRequest) else tuple(answers)
            try:
                item = await body.asend(send)
            except StopAsyncIteration:
                return body, context, Pending(Result(None))
    except BaseException:
        await body.aclose()
        raise
