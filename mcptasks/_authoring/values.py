"""Check values where a body hands them over: plain JSON, finite numbers, MCP content blocks.

A task's status, input-request params and result are stored and later sent as JSON. Checking them
when they are yielded (not when a store or a transport first chokes on them) lets the engine fail
that one task with a message that names the offending value, instead of breaking `tasks/get`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mcptasks.errors import InvalidValue as InvalidValue


def _where(path: str) -> str:
    return path or "the value"


_LEAVE = object()
"""Marks, on `check_json`'s stack, where the children of a container end."""


def check_json(value: Any, path: str = "") -> None:
    """Raise `InvalidValue` unless `value` is plain JSON: dict with str keys, list, str, bool,
    None, int, or a finite float. Tuples count as lists. NaN and Infinity are rejected, and so is
    a container that contains itself (JSON is a tree; a shared, acyclic part is fine), and a
    string or key that is no Unicode text (see `check_text`)."""
    stack: list[tuple[Any, Any]] = [(value, path)]
    inside: set[int] = set()  # the containers on the path to the item being looked at
    while stack:
        item, where = stack.pop()
        if item is _LEAVE:
            inside.discard(where)
        elif isinstance(item, str):
            if not item.isascii():
                check_text(item, where)
        elif item is None or isinstance(item, (bool, int)):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidValue(f"{_where(where)} is {item!r}: JSON has no NaN or Infinity")
        elif isinstance(item, (dict, list, tuple)):
            if id(item) in inside:
                raise InvalidValue(f"{_where(where)} contains itself (a cycle); JSON values are trees")
            inside.add(id(item))
            stack.append((_LEAVE, id(item)))
            stack.extend(_children(item, where))
        else:
            raise InvalidValue(f"{_where(where)} is of type {type(item).__name__}, which is not JSON")


def _children(item: dict[Any, Any] | list[Any] | tuple[Any, ...], where: str) -> list[tuple[Any, str]]:
    """A container's items with their paths (`InvalidValue` for a dict key that is no str)."""
    if not isinstance(item, dict):
        return [(child, f"{where}[{i}]") for i, child in enumerate(item)]
    children = []
    for key, child in item.items():
        if not isinstance(key, str):
            raise InvalidValue(
                f"{_where(where)} has a key of type {type(key).__name__} ({key!r}); JSON keys are strings"
            )
        if not key.isascii():
            check_text(key, f"a key of {_where(where)}")
        children.append((child, f"{where}.{key}" if where else key))
    return children


def check_text(text: str, where: str = "") -> None:
    """Raise `InvalidValue` when `text` is no Unicode text: it holds a lone surrogate (a half of
    a UTF-16 pair, such as "\\ud800", which JSON parsers in Python let through), which UTF-8
    cannot encode, so no store can keep it and no client can be sent it."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidValue(
            f"{_where(where)} is not Unicode text: it holds a lone surrogate "
            f"({text[exc.start]!r} at character {exc.start}), which UTF-8 cannot encode, so it "
            "cannot be stored or sent"
        ) from None


def unstorable(value: Any) -> str:
    """Why `value`, which JSON encodes, cannot be stored: the part holding a lone surrogate."""
    try:
        check_json(value, "value")
    except InvalidValue as exc:
        return str(exc)
    return "it is not Unicode text"  # pragma: no cover (check_json finds what UTF-8 refused)


def storable_text(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`): for messages taken
    from exceptions, which are stored and sent whatever they hold."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode()


def json_size(value: Any) -> int:
    """The size in bytes of `value` encoded as compact UTF-8 JSON (the value must be checked)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Text(_Block):
    text: str


class _Binary(_Block):
    data: str
    mimeType: str


class _ResourceLink(_Block):
    uri: str
    name: str


class _ResourceContents(_Block):
    uri: str


class _Resource(_Block):
    resource: _ResourceContents


_BLOCKS: dict[str, type[_Block]] = {
    "text": _Text,
    "image": _Binary,
    "audio": _Binary,
    "resource_link": _ResourceLink,
    "resource": _Resource,
}


def check_content(content: Any) -> None:
    """Raise `InvalidValue` unless `content` is a list of MCP content blocks of a known type
    with the fields that type needs (text, image, audio, resource_link, resource)."""
    if not isinstance(content, list):
        raise InvalidValue(
            f"content is of type {type(content).__name__}; it must be a list of content blocks"
        )
    for index, block in enumerate(content):
        where = f"content[{index}]"
        if not isinstance(block, dict):
            raise InvalidValue(f"{where} is of type {type(block).__name__}; a content block is an object")
        kind = block.get("type")
        model = _BLOCKS.get(kind) if isinstance(kind, str) else None
        if model is None:
            known = ", ".join(_BLOCKS)
            raise InvalidValue(f"{where} has type {kind!r}; a content block's type is one of {known}")
        try:
            model.model_validate(block)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"])
            raise InvalidValue(f"{where} ({kind}): {field}: {error['msg']}") from None
