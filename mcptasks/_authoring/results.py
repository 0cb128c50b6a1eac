"""Turn a tool's return value into a `CallToolResult` dict, the way a plain MCP tool does."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python


def text_content(text: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": text}


def error_result(message: str) -> dict[str, Any]:
    """A tool-error result (`isError: true`) with `message` as its text."""
    return {"content": [text_content(message)], "isError": True}


def _is_content_block(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str) and len(value) >= 2


def _structured(data: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return {"content": [text_content(text)], "structuredContent": data, "isError": False}


def to_call_tool_result(value: Any) -> dict[str, Any]:
    """Convert a return value.

    - None -> empty content; str -> one text block.
    - A `CallToolResult` (a dict with a `content` list, or a model with a `content` attribute) -> as is.
    - A content block or a list of content blocks -> that content.
    - dict / pydantic model -> `structuredContent` plus its JSON as text.
    - anything else JSON-able (numbers, lists, dataclasses) -> `structuredContent: {"result": ...}`.
    """
    if value is None:
        return {"content": [], "isError": False}
    if isinstance(value, str):
        return {"content": [text_content(value)], "isError": False}
    if isinstance(value, BaseModel):
        if isinstance(getattr(value, "content", None), list) and hasattr(value, "is_error"):
            dumped: dict[str, Any] = value.model_dump(by_alias=True, mode="json", exclude_none=True)
            dumped.pop("resultType", None)
            return dumped
        return _structured(value.model_dump(mode="json", by_alias=True))
    if isinstance(value, dict):
        if isinstance(value.get("content"), list):
            result = dict(value)
            result.setdefault("isError", False)
            result.pop("resultType", None)
            return result
        if _is_content_block(value) and value["type"] in (
            "text",
            "image",
            "audio",
            "resource",
            "resource_link",
        ):
            return {"content": [value], "isError": False}
        return _structured(to_jsonable_python(value))
    if isinstance(value, (list, tuple)) and value and all(_is_content_block(v) for v in value):
        return {"content": list(value), "isError": False}
    jsonable = to_jsonable_python(value, fallback=str)
    if isinstance(jsonable, dict):
        return _structured(jsonable)
    wrapped = {"result": jsonable}
    text = jsonable if isinstance(jsonable, str) else json.dumps(jsonable, ensure_ascii=False)
    return {"content": [text_content(text)], "structuredContent": wrapped, "isError": False}
