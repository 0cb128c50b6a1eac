"""Steps: the side effects of a durable body, each run once and journalled with the task.

`await ctx.step(fn, *args)` (or `value = yield Step(fn, *args)` in a generator, `def` ones too)
runs `fn` and records its JSON result, or the exception it raised, in the task's journal before
returning. When the body is replayed (its server stopped, crashed or handed it over), a recorded
step returns its recorded value without calling `fn` again.
"""

from __future__ import annotations

import functools
import inspect
import json
import random as _random
import time
from collections.abc import Callable
from typing import Any

from mcptasks._authoring.threaded import ThreadShare, as_share
from mcptasks._authoring.values import storable_text, unstorable
from mcptasks.errors import JournalDiverged as JournalDiverged
from mcptasks.errors import JournalFull as JournalFull
from mcptasks.errors import ProtocolError, ToolError
from mcptasks.errors import StepFailed as StepFailed


class Step:
    """Run `fn(*args, **kwargs)` as a step of the body: `value = yield Step(fn, *args)`.

    The generator form of `TaskContext.step`, for `def` generators (which cannot await) and
    for bodies that prefer yields. `fn` may be sync (it runs in a worker thread) or async.
    """

    __slots__ = ("args", "fn", "kwargs", "name")

    def __init__(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
        if not callable(fn):
            raise TypeError(f"Step takes a callable (the function to run once), not {fn!r}")
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.name = step_name(fn)
        """What the journal records the step as (the function's qualified name)."""

    def __repr__(self) -> str:
        return f"Step({self.name!r})"


def step_name(fn: Callable[..., Any]) -> str:
    """The name a step of `fn` is journalled under: its qualified name (`functools.partial`
    and bound methods are named after the function they wrap)."""
    target = getattr(fn, "func", fn)  # functools.partial
    target = getattr(target, "__func__", target)  # bound methods
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return str(name) if name else type(fn).__qualname__


def runs_in_thread(fn: Callable[..., Any]) -> bool:
    """Whether a step of `fn` runs in a worker thread (it is no coroutine function)."""
    target = getattr(fn, "func", fn)
    return not (inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(type(target).__call__))


def now() -> float:
    """The time as epoch seconds, as a step (`ctx.now()` journals it)."""
    return time.time()


def random() -> float:
    """A random float in [0, 1), as a step (`ctx.random()` journals it)."""
    return _random.random()


async def call_step(step: Step, threads: ThreadShare | None = None) -> Any:
    """Call the step's function (a sync one in a worker thread of `threads`) and return what it
    returned (awaited, when it is awaitable).

    A cancellation (the task cancelled, the server stopping) does not wait for a sync step's
    thread: the step is abandoned unrecorded (it runs again on a replay, as any interrupted
    step), so a long blocking call cannot hold up a shutdown that hands the task over.
    """
    call = functools.partial(step.fn, *step.args, **step.kwargs)
    if runs_in_thread(step.fn):
        result = await as_share(threads).run_sync(call, abandon_on_cancel=True)
    else:
        result = call()
    if inspect.isawaitable(result):
        result = await result
    return result


async def step_entry(
    step: Step, threads: ThreadShare | None, max_bytes: int
) -> tuple[dict[str, Any], Exception | None]:
    """Run `step`; return its journal entry (its JSON value, or the error it raised) and the
    exception it raised (None when it returned).

    A value that is not plain JSON, holds text UTF-8 cannot encode (a lone surrogate), or is
    over `max_bytes` of JSON, fails the step.
    """
    try:
        value = await call_step(step, threads)
    except Exception as exc:
        entry = _error_entry(step.name, type(exc).__name__, _text(exc))
        if type(exc) is ProtocolError and _plain_json(exc.data):
            entry["error"].update(code=exc.code, data=exc.data)
        return entry, exc
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        message = (
            f"step {step.name!r} returned a {type(value).__name__}, which is not plain JSON (dict, list, "
            f"str, number, bool, None): {exc}"
        )
        return _error_entry(step.name, "TypeError", message), TypeError(message)
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        # The function ran: its failure is journalled, so a replay raises it without a second run.
        message = f"step {step.name!r} returned a value that cannot be stored: {unstorable(value)}"
        return _error_entry(step.name, "ValueError", message), ValueError(message)
    if size > max_bytes:
        message = (
            f"step {step.name!r} returned {size} bytes of JSON, over the {max_bytes} a journal entry "
            "may hold (`Limits.max_journal_entry_bytes`): return an id or a path, not the data"
        )
        return _error_entry(step.name, "ValueError", message), ValueError(message)
    return {"kind": "step", "name": step.name, "value": json.loads(text)}, None


def step_value(entry: dict[str, Any], cause: BaseException | None = None) -> Any:
    """What a step with journal `entry` evaluates to: its value, or the failure raised: a
    `ToolError` or `ProtocolError` as such (they say how the task ends), any other as `StepFailed`."""
    error = entry.get("error")
    if not isinstance(error, dict):
        return entry.get("value")
    kind, message = str(error.get("type")), str(error.get("message", ""))
    if kind == "ToolError":
        raise cause if type(cause) is ToolError else ToolError(message)
    code = error.get("code")
    if kind == "ProtocolError" and isinstance(code, int):
        raise cause if type(cause) is ProtocolError else ProtocolError(code, message, error.get("data"))
    raise StepFailed(str(entry.get("name")), kind, message) from cause


async def unjournalled(step: Step) -> Any:
    """Run `step` where there is no journal (an inline call): same values and errors, kept nowhere."""
    entry, cause = await step_entry(step, None, MAX_UNJOURNALLED_BYTES)
    return step_value(entry, cause)


MAX_UNJOURNALLED_BYTES = 1024 * 1024
"""The JSON size a step's value may have without a journal (the default journal entry bound)."""


def _plain_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode()
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return True


def _error_entry(name: str, type_name: str, message: str) -> dict[str, Any]:
    return {"kind": "step", "name": name, "error": {"type": type_name, "message": message}}


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a hostile __str__
        return ""
    text = storable_text(text)
    return text if len(text) <= 4000 else f"{text[:4000]}… ({len(text)} characters)"
