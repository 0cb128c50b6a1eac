"""What a task body may `yield`, and what the `yield` expression evaluates to.

- `str`: sets `statusMessage`; evaluates to None (`Status(...)` says the same).
- An input request (`Elicit`, `Sample`, `ListRoots`, raw `InputRequest`): the task goes
  `input_required` until the client answers; evaluates to the parsed answer.
- `Inputs(a, b, ...)` (or a tuple/list of requests): all keys outstanding at once; evaluates to a
  tuple of answers in the same order once every key is answered.
- `Result(value)`: ends the task with `value` as the tool result.
- `Delegate(helper(...))`: runs a helper async generator as part of the body; evaluates to the
  value of the helper's `Result` (None when it just ends).

An input request whose client capability (`elicitation`, `sampling`, `roots`) the client did not
declare is never sent: the `yield` evaluates to `Unsupported` instead, or, for a request made with
`required=True`, the call fails with -32021 naming the capability.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar
from weakref import WeakKeyDictionary

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from mcptasks.errors import InvalidAnswer as InvalidAnswer
from mcptasks.wire import shared_json

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)


Yields: TypeAlias = AsyncGenerator[Any, Any]
"""The return annotation of a generator body (`async def tool(...) -> Yields:`): it may yield any
of the values above, and each `yield` evaluates to an untyped value; annotate the variable that
takes an answer (`answer: Answer[Model] = yield Elicit(...)`) to have it checked."""


@dataclass(frozen=True)
class Status:
    """Set the task's `statusMessage` (the extension's only progress channel).

    `yield "text"` says the same and is the usual form; `Status` is for code that builds the
    value to yield elsewhere."""

    message: str


@dataclass(frozen=True)
class Result:
    """End the task; `value` becomes the `CallToolResult` exactly like a plain tool's return value."""

    value: Any


class Delegate:
    """Run a helper async generator as part of the body: `value = yield Delegate(helper(...))`.

    Everything the helper yields is handled as if the body had yielded it (its statuses are
    published, its questions asked and their answers sent back into the helper). The helper ends
    with `yield Result(value)` (an async generator cannot `return` a value), and `value` becomes
    what the body's `yield` evaluates to (None when the helper just ends). An exception the helper
    raises is raised at the body's `yield`; a cancellation reaches the helper first. Helpers may
    delegate in turn.
    """

    __slots__ = ("helper",)

    def __init__(self, helper: AsyncGenerator[Any, Any]) -> None:
        if not isinstance(helper, AsyncGenerator):
            raise TypeError(
                f"Delegate takes an async generator (call the helper: helper(...)), not {helper!r}"
            )
        self.helper = helper

    def __repr__(self) -> str:
        return f"Delegate({getattr(self.helper, '__qualname__', self.helper)!r})"


class InputRequest:
    """A raw input request: the escape hatch for any client method.

    The answer is the client's response object, unparsed. Subclasses parse it; a subclass raises
    `InvalidAnswer` to have the request issued again under a fresh key.
    """

    __slots__ = ("before_task", "key", "method", "params", "required", "timeout", "timeout_answer")

    method: str
    params: dict[str, Any]
    key: str | None
    before_task: bool
    required: bool
    timeout: float | None
    timeout_answer: Any

    def __init__(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        before_task: bool = False,
        required: bool = False,
    ) -> None:
        if not isinstance(method, str) or not method:
            raise ValueError("InputRequest method must be a non-empty string")
        self.method = method
        self.params = dict(params or {})
        self.key = key
        self.before_task = before_task
        self.required = required
        """When the client did not declare the capability this request needs: True fails the call
        with -32021 naming it; False (default) makes the `yield` evaluate to `Unsupported`."""
        self.timeout = None
        """Seconds a task waits for the answer before `timeout_answer` is taken (None: no deadline)."""
        self.timeout_answer = None
        """The wire answer a passed deadline gives (see `Elicit`'s `on_timeout`)."""

    def to_wire(self) -> dict[str, Any]:
        """The `inputRequests` value: `{method, params}`."""
        return {"method": self.method, "params": self.params}

    def parse(self, response: Any) -> Any:
        """Turn the client's response into what the `yield` evaluates to."""
        return response

    def retry_with(self, reason: str) -> InputRequest:
        """The request to issue again after an invalid answer (default: the same request)."""
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(method={self.method!r})"


@dataclass(frozen=True)
class Unsupported:
    """The answer to an input request the client cannot take: it did not declare `capability`.

    The request was never sent. Branch on it with `match` or `isinstance`, like the other answers.
    """

    method: str
    """The method of the request that was not sent (e.g. `elicitation/create`)."""
    capability: str
    """The client capability it needs: `elicitation`, `sampling` or `roots`."""
    action: ClassVar[Literal["unsupported"]] = "unsupported"


@dataclass(frozen=True)
class Accepted(Generic[T]):
    """The user accepted an `Elicit`: `data` is the content, validated into the schema's model."""

    data: T
    content: dict[str, Any] = field(default_factory=dict, repr=False)
    """The raw content as the client sent it."""
    action: ClassVar[Literal["accept"]] = "accept"


@dataclass(frozen=True)
class Declined:
    """The user declined an `Elicit` (explicitly said no)."""

    action: ClassVar[Literal["decline"]] = "decline"


@dataclass(frozen=True)
class Cancelled:
    """The user dismissed an `Elicit` without choosing (closed the dialog)."""

    action: ClassVar[Literal["cancel"]] = "cancel"


Elicitation: TypeAlias = Accepted[T] | Declined | Cancelled
"""What the client answered to an `Elicit`; narrow it with `match` or `isinstance`."""

Answer: TypeAlias = Accepted[T] | Declined | Cancelled | Unsupported
"""What `yield Elicit(message, Model)` evaluates to: annotate with `Answer[Model]`.

A generator has one send type, so the `yield` expression itself is untyped; annotating the
variable (`answer: Answer[Publish] = yield Elicit(..., Publish)`) lets a type checker narrow it:
`match answer: case Accepted(data=d): ...` gives `d` the type `Publish`.
"""


_EMPTY_SCHEMA: dict[str, Any] = shared_json({"type": "object", "properties": {}})

_MODEL_SCHEMAS: WeakKeyDictionary[type[BaseModel], dict[str, Any]] = WeakKeyDictionary()
"""Each model's `requestedSchema`, made once and shared (read-only) by every `Elicit` of it."""


def _elicitation_schema(schema: type[BaseModel] | dict[str, Any] | None) -> dict[str, Any]:
    if schema is None:
        return _EMPTY_SCHEMA
    if isinstance(schema, dict):
        if schema.get("type") != "object":
            raise ValueError("an elicitation schema must be a JSON object schema ({'type': 'object', ...})")
        return schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        shared = _MODEL_SCHEMAS.get(schema)
        if shared is None:
            generated = schema.model_json_schema()
            generated.pop("title", None)
            shared = _MODEL_SCHEMAS[schema] = shared_json(generated)
        return shared
    raise TypeError(f"schema must be a pydantic model class or a JSON schema dict, not {schema!r}")


OnTimeout: TypeAlias = Literal["decline", "cancel"] | BaseModel | dict[str, Any]
"""What a passed `Elicit` deadline answers: declined, cancelled, or this content accepted."""


def _timeout_answer(on_timeout: object) -> dict[str, Any]:
    """The wire answer an `Elicit`'s `on_timeout` stands for."""
    if on_timeout == "decline":
        return {"action": "decline"}
    if on_timeout == "cancel":
        return {"action": "cancel"}
    if isinstance(on_timeout, BaseModel):
        return {"action": "accept", "content": on_timeout.model_dump(mode="json")}
    if isinstance(on_timeout, dict):
        return {"action": "accept", "content": dict(on_timeout)}
    raise ValueError(
        f"Elicit on_timeout must be 'decline', 'cancel', a model instance or a dict, not {on_timeout!r}"
    )


class Elicit(InputRequest, Generic[ModelT]):
    """Ask the user for structured input (`elicitation/create`).

    With a pydantic model as `schema`, an accepted answer is validated into an instance; content
    that does not validate is asked for again, with the validation error added to the message.
    Evaluates to `Accepted(data)`, `Declined()` or `Cancelled()` (or `Unsupported`): annotate
    the variable with `Answer[Model]` to have it type-checked.

    With `timeout` (seconds), a task that has no answer that long after it asked takes the one
    `on_timeout` says: `"decline"` (default), `"cancel"`, or a default content (a model instance
    or a dict, taken as accepted). The deadline is kept in the task's record, so any replica, or
    this one after a restart, keeps it; the answer is logged as given by the deadline.
    """

    __slots__ = ("message", "schema")

    def __init__(
        self,
        message: str,
        schema: type[ModelT] | dict[str, Any] | None = None,
        *,
        key: str | None = None,
        before_task: bool = False,
        required: bool = False,
        timeout: float | None = None,
        on_timeout: OnTimeout = "decline",
    ) -> None:
        self.message = message
        self.schema = schema
        super().__init__(
            "elicitation/create",
            {"message": message, "requestedSchema": _elicitation_schema(schema)},
            key=key,
            before_task=before_task,
            required=required,
        )
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
                raise ValueError(f"Elicit timeout must be a positive number of seconds, not {timeout!r}")
            self.timeout = float(timeout)
            self.timeout_answer = _timeout_answer(on_timeout)
            try:
                self.parse(self.timeout_answer)
            except InvalidAnswer as exc:
                raise ValueError(f"Elicit on_timeout does not fit the schema: {exc}") from None

    def parse(self, response: Any) -> Elicitation[Any]:
        """Validate `{action, content}`; the content against the model when one was given."""
        if not isinstance(response, dict):
            raise InvalidAnswer("the answer must be an object with an 'action'")
        action = response.get("action")
        if action == "decline":
            return Declined()
        if action == "cancel":
            return Cancelled()
        if action != "accept":
            raise InvalidAnswer(f"unknown elicitation action {action!r}")
        content = response.get("content", {})
        if not isinstance(content, dict):
            raise InvalidAnswer("accepted content must be an object")
        schema = self.schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            try:
                data: Any = schema.model_validate(content)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or 'content'}: {err['msg']}"
                    for err in exc.errors()
                )
                raise InvalidAnswer(problems) from None
        else:
            data = content
        return Accepted(data=data, content=content)

    def retry_with(self, reason: str) -> Elicit[ModelT]:
        """The same question, telling the user what was wrong with the last answer."""
        base = self.message.split("\n\n(Previous answer rejected:", 1)[0]
        again: Elicit[ModelT] = Elicit(
            f"{base}\n\n(Previous answer rejected: {reason})",
            self.schema,
            key=self.key,
            before_task=self.before_task,
            required=self.required,
        )
        again.timeout, again.timeout_answer = self.timeout, self.timeout_answer
        return again


class Sampled(BaseModel):
    """The answer to `Sample`: the client's `CreateMessageResult`."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    role: str
    content: Any
    model: str | None = None
    stop_reason: str | None = None

    @property
    def text(self) -> str:
        """The text of the message (text blocks joined), or '' when it has none."""
        blocks = self.content if isinstance(self.content, list) else [self.content]
        return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _message(item: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, dict) and "role" in item and "content" in item:
        return item
    raise ValueError("a sampling message is a str or a {'role', 'content'} dict")


SampleAnswer: TypeAlias = Sampled | Unsupported
"""What `yield Sample(...)` evaluates to."""


class Sample(InputRequest):
    """Ask the client's model for a completion (`sampling/createMessage`); evaluates to `Sampled`
    (or `Unsupported`): annotate the variable with `SampleAnswer`."""

    __slots__ = ()

    def __init__(
        self,
        messages: str | Sequence[str | dict[str, Any]],
        *,
        max_tokens: int = 1024,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: Sequence[str] | None = None,
        model_preferences: dict[str, Any] | None = None,
        key: str | None = None,
        before_task: bool = False,
        required: bool = False,
    ) -> None:
        items = [messages] if isinstance(messages, str) else list(messages)
        params: dict[str, Any] = {"messages": [_message(m) for m in items], "maxTokens": max_tokens}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        if stop_sequences:
            params["stopSequences"] = list(stop_sequences)
        if model_preferences is not None:
            params["modelPreferences"] = model_preferences
        super().__init__(
            "sampling/createMessage", params, key=key, before_task=before_task, required=required
        )

    def parse(self, response: Any) -> Sampled:
        """Validate the `CreateMessageResult`."""
        try:
            return Sampled.model_validate(_camel_to_snake(response))
        except ValidationError as exc:
            raise InvalidAnswer(f"invalid sampling result: {exc.errors()[0]['msg']}") from None


def _camel_to_snake(response: Any) -> Any:
    if isinstance(response, dict) and "stopReason" in response:
        response = {**response, "stop_reason": response["stopReason"]}
    return response


class Root(BaseModel):
    """One client root."""

    model_config = ConfigDict(extra="allow")

    uri: str
    name: str | None = None


_ROOTS = TypeAdapter(list[Root])


@dataclass(frozen=True)
class Roots:
    """The answer to `ListRoots`: the client's roots."""

    roots: list[Root]


RootsAnswer: TypeAlias = Roots | Unsupported
"""What `yield ListRoots()` evaluates to."""


class ListRoots(InputRequest):
    """Ask the client for its roots (`roots/list`); evaluates to `Roots` (or `Unsupported`):
    annotate the variable with `RootsAnswer`."""

    __slots__ = ()

    def __init__(self, *, key: str | None = None, before_task: bool = False, required: bool = False) -> None:
        super().__init__("roots/list", {}, key=key, before_task=before_task, required=required)

    def parse(self, response: Any) -> Roots:
        """Validate `{roots: [...]}`."""
        if not isinstance(response, dict):
            raise InvalidAnswer("the answer must be an object with 'roots'")
        try:
            return Roots(_ROOTS.validate_python(response.get("roots")))
        except ValidationError as exc:
            raise InvalidAnswer(f"invalid roots: {exc.errors()[0]['msg']}") from None


class Inputs:
    """Several input requests outstanding at once; evaluates to a tuple of their answers."""

    def __init__(self, *requests: InputRequest) -> None:
        if not requests:
            raise ValueError("Inputs needs at least one request")
        for request in requests:
            if not isinstance(request, InputRequest):
                raise TypeError(f"Inputs takes input requests, not {request!r}")
        self.requests: tuple[InputRequest, ...] = requests

    def __repr__(self) -> str:
        return f"Inputs{self.requests!r}"


def as_input_requests(item: object) -> tuple[InputRequest, ...] | None:
    """The requests a yielded value asks for, or None when it is not an input yield."""
    if isinstance(item, InputRequest):
        return (item,)
    if isinstance(item, Inputs):
        return item.requests
    if isinstance(item, (tuple, list)) and item and all(isinstance(r, InputRequest) for r in item):
        return tuple(item)
    return None
