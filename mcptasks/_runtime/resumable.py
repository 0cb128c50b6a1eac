"""Whether a generator suspended at a `yield` may be resumed by another task than the one it ran in.

A body waiting for answers can give up its task (see `TaskRun.ask_or_park`) only if nothing it
holds open is tied to that task: a cancel scope or a task group must be exited in the task that
entered it (anyio and trio raise otherwise). Each of those is a `with` or `async with` block, and
CPython keeps the `__exit__` / `__aexit__` of every block open in a suspended frame on that
frame's value stack, which the garbage collector's traversal shows. So a body holding no such
method (nor a suspended generator or coroutine that does, such as an `async for` over a
generator inside a task group) holds no block open across its `yield`. Where the check cannot
see what it relies on (`CAN_TELL` is False, checked once on this interpreter at import), no body
moves.
"""

from __future__ import annotations

import contextlib
import gc
import types
from typing import Any

_EXITS = frozenset({"__exit__", "__aexit__"})
_SUSPENDED = (types.AsyncGeneratorType, types.GeneratorType, types.CoroutineType)
_DEPTH = 4
"""How deep suspended generators held by the body are looked into."""


def _holds_open_block(suspended: object, depth: int) -> bool:
    for referent in gc.get_referents(suspended):
        if isinstance(referent, (types.MethodType, types.FunctionType)):
            if referent.__name__ in _EXITS:
                return True
        elif isinstance(referent, types.FrameType):  # before 3.11 a generator holds a frame object
            if _holds_open_block(referent, depth):
                return True
        elif depth and isinstance(referent, _SUSPENDED) and _holds_open_block(referent, depth - 1):
            return True
    return False


def movable(generator: Any) -> bool:
    """Whether `generator`, suspended at a `yield`, holds no `with` block open across it."""
    return CAN_TELL and not _holds_open_block(generator, _DEPTH)


class _Block:
    def __enter__(self) -> _Block:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


async def _inside_block() -> Any:
    with _Block():
        yield 1


async def _outside_block() -> Any:
    with _Block():
        pass
    yield 1


def _suspended(generator: Any) -> Any:
    step = generator.asend(None)
    try:
        step.send(None)
    except StopIteration:
        return generator
    raise AssertionError("the sample generator did not yield")  # pragma: no cover


def _can_tell() -> bool:
    inside, outside = _suspended(_inside_block()), _suspended(_outside_block())
    try:
        return _holds_open_block(inside, 0) and not _holds_open_block(outside, 0)
    finally:
        for generator in (inside, outside):
            with contextlib.suppress(StopIteration):
                generator.aclose().send(None)


CAN_TELL = _can_tell()
"""Whether `movable` can see open blocks on this interpreter (else it answers False)."""
