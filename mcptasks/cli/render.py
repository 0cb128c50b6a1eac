"""What `mcptasks call` and `mcptasks tasks` print: tool results as text or JSON, tasks as JSON
(printed through `mcptasks.cli.output`, which escapes control characters)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mcptasks.cli.output import to_json

if TYPE_CHECKING:
    from mcp_types import CallToolResult

    from mcptasks.client import DetailedTask


def pretty_json(text: str) -> str:
    """`text` indented when it is a JSON object or array, else unchanged."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        return to_json(json.loads(stripped))
    except ValueError:
        return text


def render_result(result: CallToolResult, *, pretty: bool = False) -> str:
    """A tool result as text: text blocks as they are, other blocks summarised, and the
    structured content as JSON when there is no text.

    `pretty` (stdout is a terminal) indents JSON, also JSON held in a text block; otherwise
    JSON stays on one line, as the tool sent it, for pipes and scripts."""
    from mcp_types import TextContent

    parts = [_block_text(block, pretty) for block in result.content]
    if not any(isinstance(block, TextContent) for block in result.content) and result.structured_content:
        structured = result.structured_content
        parts.append(to_json(structured, indent=2 if pretty else None))
    return "\n".join(parts)


def _block_text(block: Any, pretty: bool) -> str:
    """One content block as text."""
    from mcp_types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    if isinstance(block, TextContent):
        return pretty_json(block.text) if pretty else block.text
    if isinstance(block, (ImageContent, AudioContent)):
        return f"[{block.type} {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, ResourceLink):
        return f"[resource {block.uri}]"
    if isinstance(block, EmbeddedResource):
        contents = block.resource
        if isinstance(contents, TextResourceContents):
            return contents.text
        return f"[resource {contents.uri}]"
    # a content type newer than this code
    return to_json(block.model_dump(by_alias=True, mode="json", exclude_none=True))  # pragma: no cover


def task_json(task: DetailedTask) -> dict[str, Any]:
    """The task as JSON: its fields, without the response's `resultType` (an envelope field:
    `complete` only says the `tasks/get` request itself completed)."""
    data = task.to_wire()
    data.pop("resultType", None)
    return data


def result_json(result: CallToolResult) -> dict[str, Any]:
    """The whole `CallToolResult` as JSON (`--json-output`), without `_meta`."""
    data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    data.pop("_meta", None)
    return data


def current_message(task: DetailedTask) -> str | None:
    """The statusMessage worth showing now: a completed task's message is whatever the body
    said last while working, so it is left out; failed and cancelled ones say why."""
    return None if task.status == "completed" else task.status_message


def elapsed(seconds: float) -> str:
    """`seconds` as MM:SS, or H:MM:SS from an hour on."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
