"""`@task_tool`: turn a function into a `TaskTool`: an `async def` generator or coroutine, or a
`def` generator or function (run in worker threads).

The tool's name, description, input schema and argument validation come from the function's
signature and type hints, through pydantic, the way ordinary MCP tools get them.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, Literal, Protocol, TypedDict, overload

from anyio import CapacityLimiter
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from typing_extensions import ParamSpec, TypeVar, Unpack

from mcptasks._authoring.capabilities import INPUT_CAPABILITIES, InputCapability
from mcptasks._authoring.context import TaskContext
from mcptasks._authoring.threaded import ThreadedGenerator, ThreadShare, as_share, run_in_thread
from mcptasks.errors import InvalidArguments as InvalidArguments
from mcptasks.wire import EXTENSION_ID, TaskSupport

FallbackMode = Literal["inline", "tools", "reject"]
"""What a task tool does for a request without the extension: `"inline"`, `"tools"` or `"reject"`."""

FALLBACK_MODES: tuple[str, ...] = ("inline", "tools", "reject")

P = ParamSpec("P", default=...)
R = TypeVar("R", default=Any)
P2 = ParamSpec("P2")
R2 = TypeVar("R2")

TaskBody = Callable[..., AsyncGenerator[Any, Any]] | Callable[..., Awaitable[Any]]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")

DEFAULT_TTL_SECONDS = 3600.0
DEFAULT_POLL_INTERVAL_SECONDS = 1.0


def _to_ms(value: float | timedelta | None, option: str, *, allow_none: bool) -> int | None:
    if value is None:
        if allow_none:
            return None
        raise ValueError(f"{option} must be set")
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
        raise ValueError(f"{option} must be a positive number of seconds or a timedelta, got {value!r}")
    return max(1, round(seconds * 1000))


def _first_line_description(fn: Callable[..., Any]) -> str:
    return inspect.getdoc(fn) or ""


@dataclass(eq=False)
class TaskTool(Generic[P, R]):
    """A task tool: the body plus everything `tools/list` and the engine need to know about it.

    Generic in the function's parameters and return type, so a type checker sees the signature:
    `tool(...)` calls the undecorated function (see `__call__`).
    """

    fn: Callable[P, R]
    """The undecorated function."""
    name: str
    description: str
    input_schema: dict[str, Any]
    task_support: TaskSupport = "optional"
    ttl_ms: int | None = None
    timeout_ms: int | None = None
    poll_interval_ms: int | None = None
    title: str | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    is_generator: bool = False
    threaded: bool = False
    """A `def` body (function or generator): it runs in worker threads."""
    context_parameter: str | None = None
    arguments_model: type[BaseModel] | None = field(default=None, repr=False)
    retry_on_crash: bool = False
    max_attempts: int = 1
    durable: bool = False
    """Replay the body from its journal of steps and answers when its run is lost or handed over."""
    input_before_task: bool = False
    fallback: FallbackMode | None = None
    required_capabilities: tuple[InputCapability, ...] = ()
    replay_safe: bool = True

    def validate_arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate `arguments` against the signature; `InvalidArguments` names every problem."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise InvalidArguments(f"Invalid arguments for tool {self.name!r}: arguments must be an object")
        assert self.arguments_model is not None
        try:
            model = self.arguments_model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidArguments(f"Invalid arguments for tool {self.name!r}: {problems}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def open_body(
        self,
        arguments: dict[str, Any],
        context: TaskContext,
        limiter: CapacityLimiter | ThreadShare | None = None,
    ) -> Any:
        """Call the function: an async generator or a coroutine, not started yet.

        A `def` body becomes one too, running in worker threads bounded by `limiter` (a share of
        `OwnerThreads`, a limiter, or None: anyio's default limiter).
        """
        kwargs = dict(arguments)
        fn: Callable[..., Any] = self.fn
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context
        if self.threaded:
            share = as_share(limiter)
            if self.is_generator:
                return ThreadedGenerator(fn(**kwargs), share)
            return run_in_thread(fn, kwargs, share)
        return fn(**kwargs)

    def definition(self) -> dict[str, Any]:
        """The tool as `tools/list` shows it (task support under `_meta[EXTENSION_ID]`)."""
        tool: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.title:
            tool["title"] = self.title
        if self.annotations:
            tool["annotations"] = self.annotations
        tool["_meta"] = {**self.meta, EXTENSION_ID: {"taskSupport": self.task_support}}
        return tool

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the undecorated function: an `async def` generator's object, a coroutine, or a
        `def` body's return value (for unit tests; no task, no engine)."""
        return self.fn(*args, **kwargs)


def _is_context_annotation(annotation: Any) -> bool:
    if annotation is TaskContext:
        return True
    if typing.get_origin(annotation) is typing.Union or type(annotation).__name__ == "UnionType":
        return any(arg is TaskContext for arg in typing.get_args(annotation))
    return False


class TaskToolOptions(TypedDict, total=False):
    """The options of `@task_tool` (and of `TaskServer.task_tool` / `TasksExtension.task_tool`).

    - `name`, `title`, `description`: how `tools/list` shows the tool (defaults: the function's
      name and docstring).
    - `task_support`: `"optional"` (default) runs the tool inline for a request that did not opt in
      to the tasks extension; `"required"` rejects such a request with -32021.
    - `ttl`: seconds or timedelta (None = unlimited; default one hour) the task and its result are
      kept, counted from creation (the task's `ttl` field). It is no deadline: a task still running
      is kept, and one that ends after its first expiry is kept for another `ttl` after its end.
    - `timeout`: seconds or timedelta a run of the body may take (default None: no limit). A body
      still running then is stopped and the task fails (-32603, `data.reason: "timeout"`).
    - `poll_interval`: the `pollIntervalMs` clients are told (default one second).
    - `annotations`, `meta`: the tool's MCP annotations and extra `_meta`.
    - `input_before_task`: the body may ask for input before the task exists: on an opted-in call
      it runs on the request itself up to its first yield that is not a request marked
      `before_task=True`; those are answered with `input_required` rounds, then the task is
      created and the same body continues in it. Code before that point runs once per round.
    - `fallback`: what a request without the extension gets (`"inline"`, `"tools"`, `"reject"`);
      None (default) follows the server's setting. See `mcptasks._runtime.fallback`.
    - `retry_on_crash`: re-run the body from the start on another replica when the one running it
      is lost (only for idempotent tools); `max_attempts` bounds the runs (default 3).
    - `durable`: the body survives its server: when the run is lost (a crash, a lost lease) or
      handed over (a graceful shutdown, a rolling deploy), another run replays it from the top
      from its journal: steps (`ctx.step`, `Step`) return their recorded values without running
      again, answered questions get their recorded answers, and the question still open is
      asked again under the same key. Needs a persistent store to survive a restart (on
      `memory://` it only survives within the process). `max_attempts` (default 3) bounds the
      runs a crash may start; hand-overs do not count. The body is an `async def` or a `def`
      generator (a plain `def` function cannot run steps: `TypeError`).
    - `required_capabilities`: client capabilities (`"elicitation"`, `"sampling"`, `"roots"`) the
      tool cannot work without: a call whose request does not declare them gets -32021 naming
      them before any work (except in the fallback `"tools"` mode, where the model answers).
    - `replay_safe`: False when the code before a question must not run twice. An inline call
      (without the extension) keeps the body suspended between its `input_required` rounds;
      when a retry cannot reach it (another replica, a restart, expiry) a replay-safe tool is
      replayed from the start, and a tool with `replay_safe=False` answers -32021 (call it as a
      task) instead. Cannot be combined with `input_before_task` (those rounds always replay).
    """

    name: str | None
    title: str | None
    description: str | None
    task_support: TaskSupport
    ttl: float | timedelta | None
    timeout: float | timedelta | None
    poll_interval: float | timedelta
    annotations: Mapping[str, Any] | None
    meta: Mapping[str, Any] | None
    retry_on_crash: bool
    max_attempts: int
    durable: bool
    input_before_task: bool
    fallback: FallbackMode | None
    required_capabilities: Sequence[InputCapability]
    replay_safe: bool


def _body_kind(fn: Callable[..., Any]) -> tuple[bool, bool]:
    """`(threaded, is_generator)` for a body, or `TypeError` when `fn` cannot be one."""
    if isinstance(fn, TaskTool):
        raise TypeError(f"{fn.name!r} is already a task tool")
    if not callable(fn):
        raise TypeError(f"@task_tool decorates a function, not {fn!r}")
    threaded = not inspect.iscoroutinefunction(fn) and not inspect.isasyncgenfunction(fn)
    is_generator = inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn)
    if threaded and not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise TypeError(
            f"@task_tool decorates a function ('async def' or 'def', with or without 'yield'); "
            f"{getattr(fn, '__qualname__', fn)!r} is not one"
        )
    return threaded, is_generator


def _check_name(name: str, task_support: str, fallback: str | None) -> None:
    if not _TOOL_NAME.match(name):
        raise ValueError(f"invalid tool name {name!r}: use 1-128 characters of A-Z a-z 0-9 _ - .")
    if task_support not in ("optional", "required"):
        raise ValueError(f"task_support must be 'optional' or 'required', got {task_support!r}")
    if fallback is not None and fallback not in FALLBACK_MODES:
        raise ValueError(f"fallback must be one of {', '.join(FALLBACK_MODES)} or None, got {fallback!r}")


def _checked_capabilities(name: str, capabilities: Sequence[InputCapability]) -> tuple[InputCapability, ...]:
    required = (capabilities,) if isinstance(capabilities, str) else tuple(capabilities)
    unknown = [c for c in required if c not in INPUT_CAPABILITIES]
    if unknown:
        raise ValueError(
            f"task tool {name!r}: required_capabilities takes {', '.join(INPUT_CAPABILITIES)}; "
            f"got {', '.join(repr(c) for c in unknown)}"
        )
    return tuple(dict.fromkeys(required))  # type: ignore[arg-type]


def _check_rounds(name: str, threaded: bool, is_generator: bool, options: TaskToolOptions) -> None:
    before = options.get("input_before_task", False)
    if before and not is_generator:
        raise TypeError(f"task tool {name!r}: input_before_task needs a generator body (one with 'yield')")
    if before and not options.get("replay_safe", True):
        raise ValueError(
            f"task tool {name!r}: input_before_task rounds replay the body from its start, so "
            "they cannot be combined with replay_safe=False"
        )
    if options.get("durable", False) and threaded and not is_generator:
        raise TypeError(
            f"task tool {name!r}: durable=True needs a body that can run steps: an 'async def' "
            "(await ctx.step(...)) or a 'def' generator (yield Step(...)); a plain 'def' function "
            "cannot await a step, so a replay would run all of it again"
        )
    attempts = options.get("max_attempts", 3)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, got {attempts!r}")


def _parameter_field(name: str, parameter: inspect.Parameter, annotation: Any) -> tuple[Any, Any]:
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise TypeError(f"task tool {name!r}: *args / **kwargs parameters are not supported")
    if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise TypeError(f"task tool {name!r}: positional-only parameters are not supported")
    if parameter.name.startswith("_"):
        raise TypeError(f"task tool {name!r}: parameter names must not start with '_'")
    default = ... if parameter.default is inspect.Parameter.empty else parameter.default
    return (annotation, default)


def _arguments(fn: Callable[..., Any], name: str) -> tuple[type[BaseModel], dict[str, Any], str | None]:
    """The arguments model, its JSON schema and the `TaskContext` parameter (if any) of `fn`."""
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_parameter: str | None = None
    for parameter in inspect.signature(fn).parameters.values():
        annotation = hints.get(parameter.name, Any)
        if _is_context_annotation(annotation):
            context_parameter = parameter.name
        else:
            fields[parameter.name] = _parameter_field(name, parameter, annotation)
    model = create_model(
        f"{name}Arguments", __config__=ConfigDict(extra="ignore", arbitrary_types_allowed=False), **fields
    )
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return model, schema, context_parameter


def _build(fn: Callable[P, R], options: TaskToolOptions) -> TaskTool[P, R]:
    threaded, is_generator = _body_kind(fn)
    given = options.get("name")
    name = given if given is not None else fn.__name__
    task_support = options.get("task_support", "optional")
    fallback = options.get("fallback")
    _check_name(name, task_support, fallback)
    _check_rounds(name, threaded, is_generator, options)
    required = _checked_capabilities(name, options.get("required_capabilities", ()))
    model, schema, context_parameter = _arguments(fn, name)
    description = options.get("description")
    retry_on_crash = bool(options.get("retry_on_crash", False))
    durable = bool(options.get("durable", False))
    annotations = options.get("annotations")
    return TaskTool(
        fn=fn,
        name=name,
        title=options.get("title"),
        description=description if description is not None else _first_line_description(fn),
        input_schema=schema,
        task_support=task_support,
        ttl_ms=_to_ms(options.get("ttl", DEFAULT_TTL_SECONDS), "ttl", allow_none=True),
        timeout_ms=_to_ms(options.get("timeout"), "timeout", allow_none=True),
        poll_interval_ms=_to_ms(
            options.get("poll_interval", DEFAULT_POLL_INTERVAL_SECONDS), "poll_interval", allow_none=False
        ),
        annotations=dict(annotations) if annotations else None,
        meta=dict(options.get("meta") or {}),
        is_generator=is_generator,
        threaded=threaded,
        context_parameter=context_parameter,
        arguments_model=model,
        retry_on_crash=retry_on_crash,
        max_attempts=options.get("max_attempts", 3) if retry_on_crash or durable else 1,
        durable=durable,
        input_before_task=bool(options.get("input_before_task", False)),
        fallback=fallback,
        required_capabilities=required,
        replay_safe=bool(options.get("replay_safe", True)),
    )


class TaskToolDecorator(Protocol):
    """What `@task_tool(...)` with options returns: a decorator keeping the function's signature."""

    def __call__(self, fn: Callable[P2, R2], /) -> TaskTool[P2, R2]:
        """Make `fn` a task tool."""


@overload
def task_tool(fn: Callable[P2, R2], /) -> TaskTool[P2, R2]: ...


@overload
def task_tool(**options: Unpack[TaskToolOptions]) -> TaskToolDecorator: ...


def task_tool(
    fn: Callable[P2, R2] | None = None, /, **options: Unpack[TaskToolOptions]
) -> TaskTool[P2, R2] | TaskToolDecorator:
    """Declare a task tool: `@task_tool` bare or `@task_tool(...)` with `TaskToolOptions`.

    The function is an `async def` generator or coroutine, or a `def` generator or function (a
    `def` body runs in worker threads, bounded by `Limits.threads`). The `TaskTool` keeps the
    function's signature: calling it calls the function (handy in unit tests).
    """
    unknown = set(options) - set(TaskToolOptions.__annotations__)
    if unknown:
        raise TypeError(f"task_tool got unexpected options: {', '.join(sorted(unknown))}")

    def decorate(function: Callable[P, R]) -> TaskTool[P, R]:
        return _build(function, options)

    if fn is not None:
        return decorate(fn)
    return decorate


def registering(
    add: Callable[[TaskTool[Any, Any]], Any],
    fn: Callable[P2, R2] | None,
    options: TaskToolOptions,
) -> TaskTool[P2, R2] | TaskToolDecorator:
    """What a server's `task_tool` method returns: `task_tool` (bare or with `options`) whose
    tool is also registered with `add`; a function already decorated is registered as it is."""

    def decorate(function: Callable[P, R]) -> TaskTool[P, R]:
        tool = function if isinstance(function, TaskTool) else task_tool(**options)(function)
        add(tool)
        return tool

    return decorate(fn) if fn is not None else decorate
