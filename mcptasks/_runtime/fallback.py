"""The two-tool fallback: task tools for hosts that cannot speak the Tasks extension.

Most hosts today drop a tool call after about a minute and never poll `tasks/get`. With the
fallback mode `"tools"`, a task tool called without the extension still starts its task and
answers at once with an ordinary `CallToolResult` holding the task id and instructions; the server
also lists three generated tools a model can follow: `task_status`, `task_answer`, `task_cancel`.
Owner scoping applies to them exactly as to `tasks/*`.

Some hosts hand the model a result's `structuredContent` instead of its text when both are present.
So a result with `structuredContent` repeats its text there under `guidance`, beside the
machine-readable fields; a result with nothing machine-readable to add (`task_answer`,
`task_cancel`, errors) sends text only, which every host shows. The generated tools declare no
`outputSchema`, and task tools declare none either, so no schema constrains these fields.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from mcptasks._authoring.results import error_result, text_content
from mcptasks._authoring.tool import FALLBACK_MODES, FallbackMode
from mcptasks._runtime.engine import TaskEngine
from mcptasks.errors import ProtocolError
from mcptasks.stores.base import TaskRecord

__all__ = ["FALLBACK_MODES", "FallbackMode", "call_fallback_tool", "fallback_tool_definitions"]


STATUS_TOOL = "task_status"
ANSWER_TOOL = "task_answer"
CANCEL_TOOL = "task_cancel"
FALLBACK_TOOL_NAMES = frozenset({STATUS_TOOL, ANSWER_TOOL, CANCEL_TOOL})
STATUS_ONLY = frozenset({STATUS_TOOL})
"""What `EngineConfig.status_tool` lists when no tool uses the `"tools"` fallback: a model reads
its native tasks' progress there, and the host answers their questions and cancels them."""

_TASK_ID = {"type": "string", "description": "The taskId returned when the task was started."}


def fallback_tool_definitions(listed: frozenset[str] = FALLBACK_TOOL_NAMES) -> list[dict[str, Any]]:
    """The generated tools in `listed`, as `tools/list` shows them."""
    answer = f" (answer them with {ANSWER_TOOL})" if ANSWER_TOOL in listed else ""
    definitions = [
        {
            "name": STATUS_TOOL,
            "title": "Check a background task",
            "description": (
                "Check on a task started by a long-running tool. Returns its status, its latest "
                f"progress message, any questions waiting for an answer{answer} and, once it is "
                "done, its result. While it is still working, call this again after the suggested "
                "delay; do not call it in a tight loop."
            ),
            "inputSchema": {"type": "object", "properties": {"taskId": _TASK_ID}, "required": ["taskId"]},
            "annotations": {"readOnlyHint": True, "idempotentHint": True},
        },
        {
            "name": ANSWER_TOOL,
            "title": "Answer a background task's question",
            "description": (
                f"Answer a question a background task asked (listed by {STATUS_TOOL}). `key` names "
                "the question; `answer` is an object with the requested fields (for a confirmation, "
                'e.g. {"confirm": true}), or text for a question that asks for text. Use '
                '`action: "decline"` to refuse.'
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "taskId": _TASK_ID,
                    "key": {"type": "string", "description": "The question's key."},
                    "answer": {"description": "The answer: an object with the requested fields, or text."},
                    "action": {
                        "type": "string",
                        "enum": ["accept", "decline", "cancel"],
                        "default": "accept",
                    },
                },
                "required": ["taskId", "key"],
            },
        },
        {
            "name": CANCEL_TOOL,
            "title": "Cancel a background task",
            "description": "Stop a task started by a long-running tool. Cancelling a finished task does nothing.",
            "inputSchema": {"type": "object", "properties": {"taskId": _TASK_ID}, "required": ["taskId"]},
            "annotations": {"destructiveHint": True, "idempotentHint": True},
        },
    ]
    return [definition for definition in definitions if definition["name"] in listed]


def _seconds(poll_interval_ms: int) -> str:
    return f"{max(poll_interval_ms / 1000.0, 1.0):g} s"


def started_result(record: TaskRecord, poll_interval_ms: int) -> dict[str, Any]:
    """What a task tool answers in fallback mode: the task id and how to follow it."""
    text = (
        f"Started background task {record.task_id} ({record.tool}). It keeps running after this reply. "
        f"Call {STATUS_TOOL} with taskId={json.dumps(record.task_id)} about every {_seconds(poll_interval_ms)} "
        f"until it is completed; answer its questions with {ANSWER_TOOL}; stop it with {CANCEL_TOOL}."
    )
    structured = {
        "guidance": text,
        "taskId": record.task_id,
        "status": record.status,
        "pollIntervalMs": poll_interval_ms,
    }
    return {"content": [text_content(text)], "structuredContent": structured, "isError": False}


def _question(key: str, request: Mapping[str, Any]) -> str:
    method = request.get("method")
    params = request.get("params") or {}
    if method == "elicitation/create":
        schema = params.get("requestedSchema") or {}
        fields = ", ".join(
            f"{name} ({spec.get('type', 'any')}{': ' + spec['description'] if spec.get('description') else ''})"
            for name, spec in (schema.get("properties") or {}).items()
        )
        expected = (
            f" Answer with an object with: {fields}."
            if fields
            else " Answer with an empty object to confirm."
        )
        return f'- key "{key}": {params.get("message", "")}{expected}'
    if method == "sampling/createMessage":
        messages = params.get("messages") or []
        last = messages[-1].get("content", {}) if messages else {}
        prompt = last.get("text", "") if isinstance(last, dict) else ""
        return f'- key "{key}": the task asks for a model completion of: {prompt!r}. Answer with text.'
    if method == "roots/list":
        return f'- key "{key}": the task asks for the client\'s root directories. Answer with a list of file:// URIs.'
    return f'- key "{key}": a {method} request: {json.dumps(params)}. Answer with the response object.'


def status_result(record: TaskRecord, poll_interval_ms: int, *, answerable: bool = True) -> dict[str, Any]:
    """`task_status`: status, progress, questions, or the final result, readable by a model
    (`answerable`: `task_answer` is served, so the text says to answer there)."""
    lines = [f"Task {record.task_id} ({record.tool}) is {record.status.replace('_', ' ')}."]
    if record.status_message:
        lines.append(f"Latest message: {record.status_message}")
    structured: dict[str, Any] = {
        "guidance": "",  # the text, filled in below (first, for a model reading top-down)
        "taskId": record.task_id,
        "status": record.status,
        "statusMessage": record.status_message,
    }
    content: list[dict[str, Any]] = []
    if record.status == "input_required":
        how = f"use {ANSWER_TOOL}" if answerable else "the client asks the user"
        lines.append(f"It is waiting for answers ({how}):")
        lines.extend(_question(key, request) for key, request in record.input_requests.items())
        structured["inputRequests"] = record.input_requests
    elif record.status == "working":
        lines.append(f"Check again with {STATUS_TOOL} in about {_seconds(poll_interval_ms)}.")
        structured["pollIntervalMs"] = poll_interval_ms
    elif record.status == "completed" and record.result is not None:
        outcome = "with an error" if record.result.get("isError") else "successfully"
        lines.append(f"It finished {outcome}. Its result follows.")
        content = list(record.result.get("content") or [])
        structured["result"] = record.result
    elif record.status == "failed" and record.error is not None:
        lines.append(f"It failed: {record.error.get('message')}")
        structured["error"] = record.error
    summary = "\n".join(lines)
    # A host that hands the model `structuredContent` instead of the text (Claude Code) must
    # still show it the result's text, which the content carries after the summary.
    texts = [
        block["text"]
        for block in content
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    ]
    structured["guidance"] = "\n".join([summary, *texts])
    return {
        "content": [text_content(summary), *content],
        "structuredContent": structured,
        "isError": False,
    }


def wire_answer(request: Mapping[str, Any], answer: Any, action: str) -> Any:
    """Turn a model's `task_answer` into the response the input request expects."""
    method = request.get("method")
    if method == "elicitation/create":
        if action != "accept":
            return {"action": action}
        if isinstance(answer, str):
            with contextlib.suppress(ValueError):
                answer = json.loads(answer)
        if answer is None:
            answer = {}
        if not isinstance(answer, dict):
            properties = list(
                ((request.get("params") or {}).get("requestedSchema") or {}).get("properties") or {}
            )
            if len(properties) != 1:
                raise ProtocolError(
                    -32602, "this question needs an object with the requested fields as its answer"
                )
            answer = {properties[0]: answer}
        return {"action": "accept", "content": answer}
    if method == "sampling/createMessage":
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": text},
            "model": "host",
            "stopReason": "endTurn",
        }
    if method == "roots/list":
        uris = answer if isinstance(answer, list) else [answer]
        return {"roots": [u if isinstance(u, dict) else {"uri": str(u)} for u in uris]}
    return answer


async def call_fallback_tool(
    engine: TaskEngine,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    owner: str,
    listed: frozenset[str] = FALLBACK_TOOL_NAMES,
) -> dict[str, Any]:
    """Answer a call to one of the generated tools in `listed` (an `isError` result for a bad
    call)."""
    arguments = dict(arguments or {})
    task_id = arguments.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        return error_result(f"{name} needs `taskId`, the id returned when the task was started.")
    try:
        if name == STATUS_TOOL:
            record = await engine.get(task_id, owner=owner)
            return status_result(record, engine.poll_interval_ms(record), answerable=ANSWER_TOOL in listed)
        if name == CANCEL_TOOL:
            await engine.cancel(task_id, owner=owner)
            return {
                "content": [text_content(f"Task {task_id} is cancelled (or had already finished).")],
                "isError": False,
            }
        if name == ANSWER_TOOL:
            key = arguments.get("key")
            action = arguments.get("action", "accept")
            if action not in ("accept", "decline", "cancel"):
                return error_result("`action` must be accept, decline or cancel.")
            record = await engine.get(task_id, owner=owner)
            request = record.input_requests.get(key) if isinstance(key, str) else None
            if request is None or not isinstance(key, str):
                waiting = ", ".join(f'"{k}"' for k in record.input_requests) or "none"
                return error_result(
                    f"Task {task_id} has no open question with key {key!r} (open questions: {waiting}). "
                    f"Call {STATUS_TOOL} to see them."
                )
            await engine.update(
                task_id, {key: wire_answer(request, arguments.get("answer"), action)}, owner=owner
            )
            return {
                "content": [text_content(f"Answer recorded. Call {STATUS_TOOL} to follow task {task_id}.")],
                "isError": False,
            }
    except ProtocolError as exc:
        if exc.code == -32602:
            return error_result(f"Unknown task {task_id!r} (it may have expired).")
        return error_result(exc.message)
    return error_result(f"Unknown fallback tool {name!r}")
