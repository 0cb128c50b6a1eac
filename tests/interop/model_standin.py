"""A scripted stand-in for the Anthropic Messages API on 127.0.0.1, for driving a real Claude Code.

Claude Code reaches its model at `ANTHROPIC_BASE_URL` (`POST /v1/messages`, streamed as SSE). This
server answers those requests from a script instead of a model, and records every request, so a
test can see exactly what Claude Code handed the model: tool results, notifications, reminders.

Several Claude Code processes may share one stand-in at once: each conversation's prompt starts
with `[case NAME]`, and the stand-in answers it from the script registered under NAME. A script is a
list of steps, one per main-loop request, in order (a tool result and a notification each bring a
new request). A step is a list of content blocks or a function of the `Turn` that returns them.
MCP tools are deferred behind Claude Code's tool search, so a script first loads them with
`select(...)`; while the MCP server is still connecting the search finds nothing, and the stand-in
repeats that step (after a short pause) until it does. Side requests (a title, a summary: requests
without the `ToolSearch` tool) get a short text answer. `count_tokens` is answered with a small
count; any other path is 404.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]
Step = Sequence[Block] | Callable[["Turn"], Sequence[Block]]

CASE = re.compile(r"\[case ([\w.-]+)\]")
NOT_LOADED = "No matching deferred tools found"
_ids = itertools.count(1)


def text(value: str) -> Block:
    """A text block the model says."""
    return {"type": "text", "text": value}


def _fresh_id() -> str:
    return f"toolu_standin{next(_ids):06d}"


def tool_use(name: str, arguments: dict[str, Any] | None = None) -> Block:
    """A tool call the model makes (each answer gives it a fresh `toolu_` id)."""
    return {"type": "tool_use", "id": _fresh_id(), "name": name, "input": arguments or {}}


def select(*names: str) -> Block:
    """Load deferred tools (MCP tools, TaskStop) through Claude Code's tool search."""
    return tool_use("ToolSearch", {"query": "select:" + ",".join(names), "max_results": len(names)})


def flatten(content: Any) -> str:
    """The text of a message's or a tool result's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(flatten(block.get("content")))
        elif "content" in block:
            parts.append(flatten(block["content"]))
    return "\n".join(parts)


@dataclass
class ToolResult:
    """A tool result Claude Code handed the model."""

    tool_use_id: str
    name: str
    text: str
    is_error: bool
    raw: Any


@dataclass
class Turn:
    """One main-loop request of a conversation, as the model receives it."""

    case: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far."""
        return list(self.body.get("messages", []))

    def tool_results(self) -> list[ToolResult]:
        """Every tool result in the conversation, oldest first, with the name of the tool called."""
        names: dict[str, str] = {}
        results: list[ToolResult] = []
        for message in self.messages:
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
                elif block.get("type") == "tool_result":
                    use_id = str(block.get("tool_use_id"))
                    results.append(
                        ToolResult(
                            use_id,
                            names.get(use_id, ""),
                            flatten(block.get("content")),
                            bool(block.get("is_error")),
                            block.get("content"),
                        )
                    )
        return results

    def result_of(self, tool: str) -> ToolResult:
        """The latest result of `tool` (its full name, `mcp__server__tool` for an MCP tool)."""
        matching = [result for result in self.tool_results() if result.name == tool]
        assert matching, f"no result of {tool} in {[r.name for r in self.tool_results()]}"
        return matching[-1]

    def user_texts(self) -> list[str]:
        """The text of every user message after the first (notifications, reminders, typed input)."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return [flatten(m.get("content")) for m in users[1:]]

    def transcript(self) -> str:
        """The whole conversation as one text, for assertions and failure messages."""
        return json.dumps(self.messages, indent=1, ensure_ascii=False)


@dataclass
class _Conversation:
    steps: list[Step]
    turns: list[Turn] = field(default_factory=list)
    position: int = 0

    def next_step(self, turn: Turn) -> Step:
        """The step that answers `turn`: the next one, or the tool search again if it found nothing."""
        results = turn.tool_results()
        if self.position and results and results[-1].name == "ToolSearch" and NOT_LOADED in results[-1].text:
            again = self.steps[self.position - 1]

            def after_a_pause(turn: Turn) -> Sequence[Block]:
                time.sleep(0.5)  # the MCP server is still connecting
                return again(turn) if callable(again) else again

            return after_a_pause
        self.position += 1
        return self.steps[self.position - 1] if self.position <= len(self.steps) else [text("Done.")]


class ModelStandIn:
    """The Messages API stand-in: `with ModelStandIn() as model:`, then `model.url`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._cases: dict[str, _Conversation] = {}
        self.side_requests: list[dict[str, Any]] = []
        self.unknown_paths: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL for `ANTHROPIC_BASE_URL`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ModelStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, case: str, steps: Sequence[Step]) -> str:
        """Register the model's steps for conversation `case`; return the prompt's tag for it."""
        with self._lock:
            self._cases[case] = _Conversation(list(steps))
        return f"[case {case}]"

    def turns(self, case: str) -> list[Turn]:
        """The main-loop requests of `case` so far."""
        with self._lock:
            return list(self._cases[case].turns)

    def wait_for(self, case: str, done: Callable[[list[Turn]], bool], timeout: float) -> list[Turn]:
        """Block until `done(turns)` holds for `case` (or `timeout` s pass); return the turns."""
        with self._changed:
            self._changed.wait_for(lambda: done(self._cases[case].turns), timeout=timeout)
            return list(self._cases[case].turns)

    def _answer(self, body: dict[str, Any]) -> list[Block]:
        tools = {str(tool.get("name")) for tool in body.get("tools", []) if isinstance(tool, dict)}
        messages = body.get("messages", [])
        first = flatten(messages[0].get("content")) if messages else ""
        found = CASE.search(first)
        with self._changed:
            conversation = self._cases.get(found.group(1)) if found else None
            if conversation is None or "ToolSearch" not in tools:
                self.side_requests.append(body)
                return [text("ok")]
            turn = Turn(found.group(1) if found else "", body)
            conversation.turns.append(turn)
            self._changed.notify_all()
            planned = conversation.next_step(turn)
        blocks = planned(turn) if callable(planned) else planned
        # A fresh id for every call, also when a step is repeated.
        return [block | {"id": _fresh_id()} if block["type"] == "tool_use" else block for block in blocks]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"standin": self})

    def respond(self, method: str, path: str, raw: bytes) -> tuple[int, str, bytes]:
        """The answer to one HTTP request: status, content type, body."""
        path = path.partition("?")[0]
        if method == "POST" and path == "/v1/messages/count_tokens":
            return 200, "application/json", json.dumps({"input_tokens": 1000}).encode()
        if method == "POST" and path == "/v1/messages":
            body = json.loads(raw)
            try:
                blocks = self._answer(body)
            except Exception as exc:  # a failing script step: tell the model, end the turn
                blocks = [text(f"stand-in script error: {exc!r}")]
            if body.get("stream"):
                return 200, "text/event-stream", b"".join(_sse(blocks, body))
            return 200, "application/json", json.dumps(_message(blocks, body)).encode()
        with self._lock:
            self.unknown_paths.append(f"{method} {path}")
        return 404, "application/json", b'{"type":"error","error":{"type":"not_found_error"}}'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    standin: ModelStandIn

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(*self.standin.respond("POST", self.path, raw))

    def do_GET(self) -> None:
        self._send(*self.standin.respond("GET", self.path, b""))

    def _send(self, status: int, kind: str, payload: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up on this request (the user pressed Esc)
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _stop_reason(blocks: Sequence[Block]) -> str:
    return "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"


def _message(blocks: Sequence[Block], body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"msg_standin{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-standin"),
        "content": list(blocks),
        "stop_reason": _stop_reason(blocks),
        "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 10},
    }


def _sse(blocks: Sequence[Block], body: dict[str, Any]) -> Iterator[bytes]:
    start = _message([], body) | {"stop_reason": None}
    yield _event("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opening: Block = {"type": "text", "text": ""}
            delta: Block = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield _event(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        )
        yield _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(blocks), "stop_sequence": None},
            "usage": {"output_tokens": 10},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
