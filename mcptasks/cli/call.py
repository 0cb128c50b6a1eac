"""`mcptasks call` and `mcptasks tasks`: call a tool from the shell and follow its task.

    mcptasks call URL TOOL [key=value ...] [--json ARGS] [--detach] [--resume=ID] [--json-output]
    mcptasks call --stdio "CMD ..." TOOL [key=value ...]
    mcptasks tasks get (URL | --stdio "CMD ...") [--] TASK_ID
    mcptasks tasks cancel (URL | --stdio "CMD ...") [--] TASK_ID
    mcptasks tasks pending [--ledger PATH]

Task ids are opaque and may start with `-`: write `--resume=ID`, and put `--` before a TASK_ID
given as a positional argument (the hints this command prints do so).

A `key=value` argument is parsed as JSON when it is valid JSON (`n=3`, `ok=true`, `tags=["a"]`)
and taken as a string otherwise (`name=Ada`); `--json '{...}'` gives the arguments as one object
(`key=value` pairs override its keys). The `key=value` pairs follow TOOL directly.

While a task runs, a live status line (spinner, elapsed time, status, statusMessage) is drawn on
stderr when stderr is a terminal; otherwise each change is printed as a timestamped line.
Elicitation requests become prompts on the terminal, driven by the requested schema (strings,
numbers, integers, booleans, enums, multi-select enums; defaults). A single yes/no question is
one prompt; other questions first ask accept / decline / skip (skip is the MCP action `cancel`).
Without a terminal on stdin questions are skipped. Ctrl-C asks whether to cancel the task, leave
it running (detach, printing the command that resumes it), or wait; without a terminal it
detaches. The result goes to stdout: text content as text (structured content as JSON when
there is no text; JSON indented when stdout is a terminal), or the whole `CallToolResult` as
JSON with `--json-output`.

Exit status: 0 success (also `--detach`, `tasks get`, `tasks cancel`); 1 the tool reported an
error (`isError`); 2 usage error; 3 failed (the task failed, or the server or the connection
reported an error); 4 the task was cancelled; 130 interrupted (Ctrl-C, including detaching after
Ctrl-C).

`--ledger PATH` (or `$MCPTASKS_LEDGER`) records started tasks in a `TaskLedger`; `tasks pending`
lists the ones not known to be finished, with the command that resumes each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters
    from mcp.client.context import ClientRequestContext
    from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData

    from mcptasks.client import DetailedTask, TaskHandle, TaskLedger, TasksClient

# The SDK (and `mcptasks.client`, which needs it) is imported where it is used, so that building
# the `mcptasks` argument parser with these subcommands stays cheap.

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_INTERRUPTED = 130

LEDGER_ENV = "MCPTASKS_LEDGER"
PROG = "mcptasks"

T = TypeVar("T")


class UsageError(Exception):
    """A bad command line: reported in one line, exit status 2."""


# -- arguments -------------------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """A `key=value` value: JSON when it parses as JSON, the string itself otherwise."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_arguments(pairs: Sequence[str], json_arguments: str | None) -> dict[str, Any]:
    """The tool arguments from `--json` and `key=value` pairs (pairs win)."""
    arguments: dict[str, Any] = {}
    if json_arguments is not None:
        try:
            loaded = json.loads(json_arguments)
        except ValueError as exc:
            raise UsageError(f"--json is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError("--json must be a JSON object")
        arguments.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected key=value, got {pair!r}")
        arguments[key] = parse_value(value)
    return arguments


@dataclass(frozen=True)
class Target:
    """The server a command talks to: a Streamable HTTP URL or a stdio command."""

    url: str | None = None
    command: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def identity(self) -> str:
        """The ledger's name for this server."""
        from mcptasks.client import server_identity

        return server_identity(self.url if self.url is not None else self._stdio())

    def _stdio(self) -> StdioServerParameters:
        from mcp import StdioServerParameters

        return StdioServerParameters(
            command=self.command[0], args=list(self.command[1:]), env=dict(os.environ)
        )

    def words(self) -> list[str]:
        """The command-line words naming this target (for the resume hint; headers left out)."""
        if self.url is not None:
            return [self.url]
        return ["--stdio", shlex.join(self.command)]

    def client(self, extension: TasksClient, **options: Any) -> Client:
        """An `mcp.Client` for this target with `extension` installed."""
        from mcp import Client

        server: Any
        if self.url is None:
            server = self._stdio()
        elif self.headers:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(
                headers=dict(self.headers), timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=False
            )
            server = streamable_http_client(self.url, http_client=http)
        else:
            server = self.url
        return Client(server, extensions=[extension], **options)


def split_target(words: Sequence[str], stdio: str | None, headers: Sequence[str]) -> tuple[Target, list[str]]:
    """Take the target off the front of the positional words: a URL unless `--stdio` was given."""
    parsed_headers: list[tuple[str, str]] = []
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header must look like 'Name: value', got {header!r}")
        parsed_headers.append((name.strip(), value.strip()))
    if stdio is not None:
        if parsed_headers:
            raise UsageError("--header applies to HTTP servers only, not to --stdio")
        try:
            command = shlex.split(stdio)
        except ValueError as exc:
            raise UsageError(f"--stdio: {exc}") from None
        if not command:
            raise UsageError("--stdio needs a command")
        return Target(command=tuple(command)), list(words)
    if not words:
        raise UsageError("missing the server: give a URL (http://...) or --stdio 'COMMAND ...'")
    url, *rest = words
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"expected the server's URL (http://... or https://...) or --stdio, got {url!r}")
    return Target(url=url, headers=tuple(parsed_headers)), rest


def _ledger(path: str | None) -> TaskLedger | None:
    """The ledger named by --ledger or the environment, read once (`UsageError` when unusable)."""
    path = path or os.environ.get(LEDGER_ENV)
    if not path:
        return None
    from mcptasks.client import TaskLedger
    from mcptasks.stores.url import store_error_hint

    ledger = TaskLedger(path)
    try:
        ledger.pending()
    except (sqlite3.Error, OSError) as exc:
        text = str(exc).rstrip(". ") or type(exc).__name__
        raise UsageError(f"cannot use the ledger {path}: {text}; {store_error_hint(exc)}") from None
    return ledger


# -- output ----------------------------------------------------------------------------------------


def _write(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _pretty_json(text: str) -> str:
    """`text` indented when it is a JSON object or array, else unchanged."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return text
    try:
        return _json(json.loads(stripped))
    except ValueError:
        return text


def render_result(result: CallToolResult, *, pretty: bool = False) -> str:
    """A tool result as text: text blocks as they are, other blocks summarised, and the
    structured content as JSON when there is no text.

    `pretty` (stdout is a terminal) indents JSON, also JSON held in a text block; otherwise
    JSON stays on one line, as the tool sent it, for pipes and scripts."""
    from mcp_types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(_pretty_json(block.text) if pretty else block.text)
        elif isinstance(block, (ImageContent, AudioContent)):
            parts.append(f"[{block.type} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, EmbeddedResource):
            contents = block.resource
            if isinstance(contents, TextResourceContents):
                parts.append(contents.text)
            else:
                parts.append(f"[resource {contents.uri}]")
        else:  # pragma: no cover - a content type newer than this code
            parts.append(_json(block.model_dump(by_alias=True, mode="json", exclude_none=True)))
    if not any(isinstance(block, TextContent) for block in result.content) and result.structured_content:
        structured = result.structured_content
        parts.append(_json(structured) if pretty else json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


def task_json(task: DetailedTask) -> dict[str, Any]:
    """The task as JSON: its fields, without the response's `resultType` (an envelope field:
    `complete` only says the `tasks/get` request itself completed)."""
    data = task.to_wire()
    data.pop("resultType", None)
    return data


def _result_wire(result: CallToolResult) -> dict[str, Any]:
    data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    data.pop("_meta", None)
    return data


def current_message(task: DetailedTask) -> str | None:
    """The statusMessage worth showing now: a completed task's message is whatever the body
    said last while working, so it is left out; failed and cancelled ones say why."""
    return None if task.status == "completed" else task.status_message


def _elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class StatusLine:
    """Task progress on stderr: a redrawn line on a terminal, timestamped lines otherwise."""

    def __init__(self, stream: TextIO, *, live: bool) -> None:
        self.stream = stream
        self.live = live
        unicode = (getattr(stream, "encoding", None) or "").lower().replace("-", "").startswith("utf")
        self.frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if unicode else "|/-\\"
        self.dot = " · " if unicode else " - "
        self.ellipsis = "…" if unicode else "~"
        self.task: DetailedTask | None = None
        self.started = time.time()
        self.frame = 0
        self.paused = 0
        self.drawn = False
        self.asked: dict[str, Any] | None = None

    def show(self, task: DetailedTask) -> None:
        """A new task state."""
        changed = self.task is None or (task.status, task.status_message) != (
            self.task.status,
            self.task.status_message,
        )
        self.task = task
        created = task.created_at_epoch()
        if created is not None:
            self.started = min(created, time.time())
        if self.live:
            self.redraw()
        elif changed:
            stamp = time.strftime("%H:%M:%S")
            shown = current_message(task)
            message = f": {shown}" if shown else ""
            _write(self.stream, f"[{stamp}] {task.status}{message}\n")
        elif task.status == "input_required" and task.input_requests != self.asked:
            stamp = time.strftime("%H:%M:%S")
            _write(self.stream, f"[{stamp}] {task.status}\n")
        self.asked = task.input_requests

    def tick(self) -> None:
        """Advance the spinner."""
        self.frame += 1
        self.redraw()

    def redraw(self) -> None:
        """Draw the line again (live mode, not paused)."""
        if not self.live or self.paused or self.task is None:
            return
        task = self.task
        text = f"{self.frames[self.frame % len(self.frames)]} {_elapsed(time.time() - self.started)} {task.status}"
        shown = current_message(task)
        if shown:
            text += self.dot + " ".join(shown.split())
        width = shutil.get_terminal_size((80, 24)).columns
        if len(text) > width - 1:
            text = text[: max(1, width - 2)] + self.ellipsis
        _write(self.stream, "\r\x1b[K" + text)
        self.drawn = True

    def clear(self) -> None:
        """Erase the live line."""
        if self.live and self.drawn:
            _write(self.stream, "\r\x1b[K")
            self.drawn = False

    def note(self, text: str) -> None:
        """Print a line of its own (above the live line)."""
        self.clear()
        _write(self.stream, text + "\n")
        self.redraw()

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Keep the line erased while prompting."""
        self.clear()
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1
            self.redraw()

    async def spin(self) -> None:
        """Redraw every 0.1 s (live mode) until cancelled."""
        if not self.live:
            return
        while True:
            await anyio.sleep(0.1)
            self.tick()


# -- terminal input --------------------------------------------------------------------------------


class TerminalInput:
    """Cancellable line input from a file descriptor (stdin, normally a terminal)."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    async def readline(self) -> str | None:
        """The next line without its newline, or None at end of input."""
        while b"\n" not in self.buffer and not self.eof:
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            self.buffer += chunk
        if b"\n" in self.buffer:
            line, _, self.buffer = self.buffer.partition(b"\n")
        elif self.buffer:
            line, self.buffer = self.buffer, b""
        else:
            return None
        return line.decode(errors="replace").rstrip("\r")


# -- elicitation forms -----------------------------------------------------------------------------

FieldKind = Literal["string", "number", "integer", "boolean", "enum", "multi"]


@dataclass
class FormField:
    """One property of an elicitation's `requestedSchema`, as a prompt."""

    name: str
    kind: FieldKind
    label: str
    description: str | None = None
    required: bool = False
    default: Any = None
    options: list[tuple[str, str]] = field(default_factory=list)
    """(value, title) pairs of an enum."""
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None


def _options(schema: dict[str, Any]) -> list[tuple[str, str]]:
    if isinstance(schema.get("enum"), list):
        values = [str(v) for v in schema["enum"]]
        names = schema.get("enumNames")
        titles = [str(n) for n in names] if isinstance(names, list) and len(names) == len(values) else values
        return list(zip(values, titles, strict=True))
    for key in ("oneOf", "anyOf"):
        choices = schema.get(key)
        if (
            isinstance(choices, list)
            and choices
            and all(isinstance(c, dict) and "const" in c for c in choices)
        ):
            return [(str(c["const"]), str(c.get("title", c["const"]))) for c in choices]
    return []


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def form_fields(schema: dict[str, Any]) -> list[FormField]:
    """The prompts for a `requestedSchema` (a flat object of primitive properties)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or ())
    fields: list[FormField] = []
    for name, raw in properties.items():
        prop = raw if isinstance(raw, dict) else {}
        kind: FieldKind
        options = _options(prop)
        items = prop.get("items") if isinstance(prop.get("items"), dict) else None
        if prop.get("type") == "array" and items is not None and _options(items):
            kind, options = "multi", _options(items)
        elif options:
            kind = "enum"
        elif prop.get("type") in ("number", "integer", "boolean"):
            kind = prop["type"]
        else:
            kind = "string"
        title = prop.get("title")
        description = prop.get("description")
        fields.append(
            FormField(
                name=str(name),
                kind=kind,
                label=str(title) if isinstance(title, str) and title else str(name),
                description=str(description) if isinstance(description, str) and description else None,
                required=name in required,
                default=prop.get("default"),
                options=options,
                minimum=_number(prop.get("minimum")),
                maximum=_number(prop.get("maximum")),
                min_length=_integer(prop.get("minLength")),
                max_length=_integer(prop.get("maxLength")),
                min_items=_integer(prop.get("minItems")),
                max_items=_integer(prop.get("maxItems")),
            )
        )
    return fields


_YES = {"y", "yes", "true", "1", "on"}
_NO = {"n", "no", "false", "0", "off"}


def _choice(field: FormField, text: str) -> str:
    text = text.strip()
    if text.isdigit() and 1 <= int(text) <= len(field.options):
        return field.options[int(text) - 1][0]
    for value, title in field.options:
        if text == value or text.lower() == title.lower():
            return value
    raise ValueError(f"choose one of 1-{len(field.options)} or a listed value")


def _check_range(field: FormField, number: float) -> None:
    if field.minimum is not None and number < field.minimum:
        raise ValueError(f"must be at least {field.minimum:g}")
    if field.maximum is not None and number > field.maximum:
        raise ValueError(f"must be at most {field.maximum:g}")


def parse_answer(field: FormField, text: str) -> Any:
    """Turn typed text into the field's value (`ValueError` with a reason when it does not fit).

    Empty text is handled by the caller (default / optional / required).
    """
    if field.kind == "boolean":
        lowered = text.strip().lower()
        if lowered in _YES:
            return True
        if lowered in _NO:
            return False
        raise ValueError("answer y or n")
    if field.kind == "integer":
        try:
            integer = int(text.strip())
        except ValueError:
            raise ValueError("enter a whole number") from None
        _check_range(field, integer)
        return integer
    if field.kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise ValueError("enter a number") from None
        _check_range(field, number)
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if field.kind == "enum":
        return _choice(field, text)
    if field.kind == "multi":
        values = [_choice(field, part) for part in text.split(",") if part.strip()]
        if field.min_items is not None and len(values) < field.min_items:
            raise ValueError(f"choose at least {field.min_items}")
        if field.max_items is not None and len(values) > field.max_items:
            raise ValueError(f"choose at most {field.max_items}")
        return values
    if field.min_length is not None and len(text) < field.min_length:
        raise ValueError(f"must be at least {field.min_length} characters")
    if field.max_length is not None and len(text) > field.max_length:
        raise ValueError(f"must be at most {field.max_length} characters")
    return text


_EOF = object()
_SKIP = object()


QUESTION_WORDS = {"a": "accept", "d": "decline", "s": "skip"}
"""The answers to a question: accept (answer it), decline (say no), skip (leave it unanswered:
the MCP action `cancel`). Their letters differ from the Ctrl-C menu's (`INTERRUPT_WORDS`)."""

INTERRUPT_WORDS = {"c": "cancel", "l": "detach", "w": "wait"}
"""The Ctrl-C menu: cancel the task (`tasks/cancel`), leave it running (detach), or wait."""


def _word(text: str, words: dict[str, str], *aliases: tuple[str, str]) -> str | None:
    """The action `text` names: a listed letter or word (or an alias), case-insensitive."""
    lowered = text.strip().lower()
    if lowered in words.values():
        return lowered
    named = dict(aliases).get(lowered)
    return named if named is not None else words.get(lowered)


class FormPrompter:
    """Answers elicitation requests with prompts on the terminal (one form at a time)."""

    def __init__(self, line_input: TerminalInput, status: StatusLine, stream: TextIO) -> None:
        self.input = line_input
        self.status = status
        self.stream = stream
        self.lock = anyio.Lock()
        self.asking: str | None = None
        """The question on screen, or the one Ctrl-C interrupted (the menu names it, then clears it)."""

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """The `elicitation_callback` of the client."""
        async with self.lock:
            with self.status.pause():
                self.asking = params.message
                answer = await self._form(params)  # on Ctrl-C, `asking` stays set for the menu
                self.asking = None
                return answer

    async def _ask(self, prompt: str) -> str | None:
        _write(self.stream, prompt)
        try:
            line = await self.input.readline()
        except BaseException:
            _write(self.stream, "\n")  # interrupted: keep the prompt line on screen
            raise
        if line is None:
            _write(self.stream, "\n")
        return line

    async def _form(self, params: ElicitRequestParams) -> ElicitResult:
        from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

        _write(self.stream, f"\n? {params.message}\n")
        if isinstance(params, ElicitRequestURLParams):
            _write(self.stream, f"  open: {params.url}\n")
        fields = form_fields(params.requested_schema) if isinstance(params, ElicitRequestFormParams) else []
        if len(fields) == 1 and fields[0].kind == "boolean":
            return await self._yes_no(fields[0])
        while True:
            answer = await self._ask("  [a]ccept, [d]ecline or [s]kip? [a] ")
            if answer is None:
                return ElicitResult(action="cancel")
            action = "accept" if not answer.strip() else _word(answer, QUESTION_WORDS)
            if action is not None:
                break
            _write(self.stream, "    answer a (accept), d (decline) or s (skip)\n")
        if action != "accept":
            return ElicitResult(action="decline" if action == "decline" else "cancel")
        content: dict[str, Any] = {}
        for form_field in fields:
            value = await self._field(form_field)
            if value is _EOF:
                return ElicitResult(action="cancel")
            if value is not _SKIP:
                content[form_field.name] = value
        return ElicitResult(action="accept", content=content)

    async def _yes_no(self, form_field: FormField) -> ElicitResult:
        """A form of one boolean: one prompt, y/n answering it, or decline / skip."""
        from mcp_types import ElicitResult

        label = form_field.description or form_field.label
        default = form_field.default if isinstance(form_field.default, bool) else None
        choices = {True: "[Y/n]", False: "[y/N]", None: "[y/n]"}[default]
        prompt = f"  {label} {choices} (or d: decline, s: skip): "
        while True:
            text = await self._ask(prompt)
            if text is None:
                return ElicitResult(action="cancel")
            if not text.strip() and default is not None:
                return ElicitResult(action="accept", content={form_field.name: default})
            action = _word(text, {"d": "decline", "s": "skip"})
            if action is not None:
                return ElicitResult(action="decline" if action == "decline" else "cancel")
            try:
                value = parse_answer(form_field, text)
            except ValueError:
                _write(self.stream, "    answer y or n (or d to decline, s to skip)\n")
                continue
            return ElicitResult(action="accept", content={form_field.name: value})

    async def _field(self, form_field: FormField) -> Any:
        label = f"  {form_field.label}"
        if form_field.description and form_field.description != form_field.label:
            label += f" ({form_field.description})"
        if form_field.options:
            _write(self.stream, label + "\n")
            for index, (value, title) in enumerate(form_field.options, 1):
                shown = title if title == value else f"{title} [{value}]"
                _write(self.stream, f"    {index}) {shown}\n")
            label = "  choice"
        hint = {
            "boolean": "[y/n]",
            "integer": "(integer)",
            "number": "(number)",
            "enum": f"[1-{len(form_field.options)}]",
            "multi": "(comma-separated)",
            "string": "",
        }[form_field.kind]
        if form_field.kind == "boolean" and isinstance(form_field.default, bool):
            hint = "[Y/n]" if form_field.default else "[y/N]"
        elif form_field.default is not None:
            hint += f" [default: {form_field.default}]"
        if not form_field.required and form_field.default is None:
            hint += " (optional)"
        prompt = f"{label} {hint.strip()}: " if hint.strip() else f"{label}: "
        while True:
            text = await self._ask(prompt)
            if text is None:
                return _EOF
            if not text.strip():
                if form_field.default is not None:
                    return form_field.default
                if not form_field.required:
                    return _SKIP
                _write(self.stream, "    a value is required\n")
                continue
            try:
                return parse_answer(form_field, text)
            except ValueError as exc:
                _write(self.stream, f"    {exc}\n")


class SkipWithoutTerminal:
    """The elicitation callback without a terminal on stdin: say so, skip the question."""

    def __init__(self, status: StatusLine) -> None:
        self.status = status

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """Note the question on stderr and skip it (the MCP action `cancel`)."""
        from mcp_types import ElicitResult

        self.status.note(f"{PROG}: cannot ask without a terminal on stdin; skipped: {params.message}")
        return ElicitResult(action="cancel")


# -- running a command -----------------------------------------------------------------------------


class _Interrupted:
    pass


INTERRUPTED = _Interrupted()


async def until_interrupted(
    work: Callable[[], Awaitable[T]], signals: AsyncIterator[Any]
) -> T | _Interrupted:
    """Run `work`, or stop it at the next signal from `signals` and return `INTERRUPTED`.

    `signals` is an open `anyio.open_signal_receiver(SIGINT)` kept open across calls, so a
    Ctrl-C between two calls is queued rather than lost (or raised as `KeyboardInterrupt`).
    """
    outcome: T | _Interrupted = INTERRUPTED
    failure: BaseException | None = None
    async with anyio.create_task_group() as group:

        async def watch_signals() -> None:
            async for _ in signals:
                group.cancel_scope.cancel()
                return

        async def run() -> None:
            nonlocal outcome, failure
            try:
                outcome = await work()
            except Exception as exc:
                failure = exc
            group.cancel_scope.cancel()

        group.start_soon(watch_signals)
        group.start_soon(run)
    if failure is not None:
        raise failure
    return outcome


async def _no_signals() -> AsyncIterator[Any]:
    await anyio.sleep_forever()
    yield  # pragma: no cover - never reached


@contextlib.contextmanager
def _interrupts() -> Iterator[AsyncIterator[Any]]:
    """SIGINT as an async iterator while the block runs (nothing where the platform cannot,
    in which case Ctrl-C stays a `KeyboardInterrupt`)."""
    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT)
        signals = receiver.__enter__()
    except NotImplementedError:
        yield _no_signals()
        return
    try:
        yield signals
    finally:
        receiver.__exit__(None, None, None)


def _leaf(exc: BaseException) -> BaseException:
    while True:
        inner = getattr(exc, "exceptions", None)
        if not inner:
            return exc
        exc = inner[0]


def _not_found(url: str) -> str:
    """The error for an HTTP 404 from `url`, with the likely right URL."""
    parts = urlsplit(url)
    if parts.path.rstrip("/") != "/mcp":
        likely = urlunsplit(parts._replace(path="/mcp", query="", fragment=""))
        return (
            f"no MCP endpoint at {url} (HTTP 404 Not Found); `mcptasks serve` and most servers "
            f"answer at the path /mcp: try {likely}"
        )
    return (
        f"no MCP endpoint at {url} (HTTP 404 Not Found); check the path the server was started "
        "with (`mcptasks serve --path`)"
    )


def _describe(exc: BaseException, target: Target | None = None) -> str:
    import httpx2
    from mcp import MCPError

    from mcptasks.errors import ProtocolError, TaskError

    leaf = _leaf(exc)
    url = target.url if target is not None else None
    # The SDK's HTTP client turns a 404 response into this error (a JSON-RPC method-not-found
    # from a server says "Method not found").
    if url is not None and isinstance(leaf, MCPError) and leaf.message == "Not Found":
        return _not_found(url)
    if url is not None and isinstance(leaf, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        reason = str(leaf) or type(leaf).__name__
        if reason == "All connection attempts failed":
            reason = "connection refused"
        return f"cannot connect to {url} ({reason}): is the server running there?"
    if isinstance(leaf, (MCPError, ProtocolError)):
        return f"{leaf.message} (code {leaf.code})"
    text = str(leaf) or type(leaf).__name__
    return text if isinstance(leaf, TaskError) else f"{type(leaf).__name__}: {text}"


@dataclass
class CallCommand:
    """Everything `mcptasks call` needs, parsed."""

    target: Target
    tool: str
    arguments: dict[str, Any]
    detach: bool = False
    resume: str | None = None
    json_output: bool = False
    ledger: TaskLedger | None = None
    stuck_after: float | None = None
    interactive: bool = False
    live: bool = False
    pretty: bool = False
    """Indent JSON results (stdout is a terminal)."""
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    handle: TaskHandle | None = field(default=None, init=False)
    """The task being followed (set once it exists)."""
    prompter: FormPrompter | None = field(default=None, init=False)
    """The terminal prompter (interactive runs only)."""

    def resume_hint(self, task_id: str) -> str:
        """The command line that resumes following `task_id`."""
        words = [PROG, "call", *self.target.words(), self.tool, f"--resume={task_id}"]
        return shlex.join(words)

    def error(self, text: str) -> None:
        """One `mcptasks: error:` line on stderr."""
        _write(self.stderr, f"{PROG}: error: {text}\n")

    async def run(self) -> int:
        """Call the tool and follow the task; the exit status.

        When following fails for another reason than the task's own end (the connection broke,
        say), the command that resumes the task is printed before the error propagates.
        """
        try:
            return await self._run()
        except Exception as exc:
            from mcptasks.errors import TaskNotFound

            handle = self.handle
            leaf = _leaf(exc)
            ended = isinstance(leaf, TaskNotFound) or getattr(leaf, "cancelled", False) is True
            if handle is None or handle.task_id is None:
                raise
            if not ended and (handle.last is None or not handle.last.terminal):
                _write(self.stderr, f"\n{PROG}: task {handle.task_id} may still be running; resume with:\n")
                _write(self.stderr, f"  {self.resume_hint(handle.task_id)}\n")
            raise

    async def _run(self) -> int:
        from mcptasks.client import TaskHandle, TasksClient, start_tool_call

        status = StatusLine(self.stderr, live=self.live)
        prompter: FormPrompter | SkipWithoutTerminal
        if self.interactive:
            prompter = self.prompter = FormPrompter(TerminalInput(sys.stdin.fileno()), status, self.stderr)
        else:
            prompter = SkipWithoutTerminal(status)
        extension = TasksClient(
            ledger=self.ledger, server_id=self.target.identity, stuck_after=self.stuck_after
        )
        async with self.target.client(extension, elicitation_callback=prompter) as client:
            if self.resume is not None:
                handle = TaskHandle.resume(client, self.resume, tool=self.tool)
                self.handle = handle
            else:
                handle = await start_tool_call(client, self.tool, self.arguments)
                if handle.task_id is None:  # answered at once, without a task
                    return self.report_result(await handle.result())
                self.handle = handle
                if self.detach:
                    return self.report_detached(handle)
            with _interrupts() as signals:
                if self.resume is None:
                    status.note(f"{PROG}: task {handle.task_id} started (Ctrl-C to cancel or detach)")
                return await self.follow(handle, status, signals)

    def report_detached(self, handle: TaskHandle) -> int:
        """Print the new task's id (stdout) and how to resume it (stderr)."""
        assert handle.last is not None and handle.task_id is not None
        if self.json_output:
            _write(self.stdout, _json(task_json(handle.last)) + "\n")
        else:
            _write(self.stdout, handle.task_id + "\n")
        _write(self.stderr, f"{PROG}: task {handle.task_id} is {handle.last.status}; resume with:\n")
        _write(self.stderr, f"  {self.resume_hint(handle.task_id)}\n")
        return EXIT_OK

    async def follow(self, handle: TaskHandle, status: StatusLine, signals: AsyncIterator[Any]) -> int:
        """Watch the task to its end, handling Ctrl-C."""
        assert handle.task_id is not None
        while True:

            async def watch() -> DetailedTask:
                final: DetailedTask | None = None
                async with anyio.create_task_group() as spinner:
                    spinner.start_soon(status.spin)
                    async with handle.watch() as updates:
                        async for task in updates:
                            status.show(task)
                            final = task
                    spinner.cancel_scope.cancel()
                assert final is not None
                return final

            try:
                outcome = await until_interrupted(watch, signals)
            finally:
                status.clear()
            if not isinstance(outcome, _Interrupted):
                return self.report_task(outcome)
            question = self.prompter.asking if self.prompter is not None else None
            if self.prompter is not None:
                self.prompter.asking = None
            choice = await self.ask_after_interrupt(handle, signals, question)
            if choice == "detach":
                _write(self.stderr, f"{PROG}: detached; task {handle.task_id} keeps running. Resume with:\n")
                _write(self.stderr, f"  {self.resume_hint(handle.task_id)}\n")
                if self.target.url is None:
                    _write(
                        self.stderr,
                        f"{PROG}: note: the stdio server stops with this command; resuming works only "
                        "if it keeps its tasks in a durable store\n",
                    )
                return EXIT_INTERRUPTED
            if choice == "cancel":
                return await self.cancel(handle)

    async def ask_after_interrupt(
        self, handle: TaskHandle, signals: AsyncIterator[Any], question: str | None = None
    ) -> Literal["cancel", "detach", "wait"]:
        """Ask what Ctrl-C should do (detach when there is no terminal or on a second Ctrl-C).

        `question` is the elicitation that was on screen: the menu repeats it, and waiting
        asks it again."""
        if not self.interactive:
            return "detach"
        line_input = TerminalInput(sys.stdin.fileno())
        state = f"is waiting for your answer to: {question}" if question else "is still running."
        wait = "[w]ait and answer" if question else "[w]ait"
        while True:
            _write(
                self.stderr,
                f"\nTask {handle.task_id} {state}\n"
                f"[c]ancel the task, [l]eave it running (detach), or {wait}? [w] ",
            )
            answer = await until_interrupted(line_input.readline, signals)
            if isinstance(answer, _Interrupted) or answer is None:
                _write(self.stderr, "\n")
                return "detach"
            choice = "wait" if not answer.strip() else _word(answer, INTERRUPT_WORDS, ("leave", "detach"))
            if choice == "cancel":
                return "cancel"
            if choice == "detach":
                return "detach"
            if choice == "wait":
                return "wait"
            _write(self.stderr, "  answer c (cancel the task), l (leave it running) or w (wait)\n")

    async def cancel(self, handle: TaskHandle) -> int:
        """Cancel the task and report how it ended (it may have finished first)."""
        await handle.cancel()
        task = await handle.status()
        with anyio.move_on_after(10):
            while not task.terminal:
                await anyio.sleep(handle.policy.interval(task))
                task = await handle.status()
        if task.terminal:
            return self.report_task(task)
        _write(
            self.stderr,
            f"{PROG}: cancellation of task {handle.task_id} requested; it is still {task.status}\n",
        )
        return EXIT_CANCELLED

    def report_task(self, task: DetailedTask) -> int:
        """Print a terminal task's outcome; the exit status."""
        if task.status == "completed":
            return self.report_result(task.call_tool_result())
        from mcptasks.client import TaskFailed

        if self.json_output:
            _write(self.stdout, _json(task_json(task)) + "\n")
        if task.status == "failed":
            failure = TaskFailed(task)
            detail = (
                f": {json.dumps(failure.data)}" if failure.data is not None and not self.json_output else ""
            )
            self.error(f"task {task.task_id} failed: {failure.message} (code {failure.code}){detail}")
            return EXIT_FAILED
        reason = f": {task.status_message}" if task.status_message else ""
        _write(self.stderr, f"{PROG}: task {task.task_id} was cancelled{reason}\n")
        return EXIT_CANCELLED

    def report_result(self, result: CallToolResult) -> int:
        """Print a tool result; 0, or 1 for `isError`."""
        if self.json_output:
            _write(self.stdout, _json(_result_wire(result)) + "\n")
        else:
            text = render_result(result, pretty=self.pretty)
            if result.is_error:
                _write(self.stderr, f"{PROG}: the tool reported an error:\n{text}\n")
            elif text:
                _write(self.stdout, text + ("" if text.endswith("\n") else "\n"))
        return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def _run(work: Callable[[], Awaitable[int]], stderr: TextIO, target: Target | None = None) -> int:
    try:
        return anyio.run(work)
    except UsageError as exc:
        _write(stderr, f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _write(stderr, f"\n{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, UsageError):
            _write(stderr, f"{PROG}: error: {leaf}\n")
            return EXIT_USAGE
        _write(stderr, f"{PROG}: error: {_describe(exc, target)}\n")
        return EXIT_FAILED


def run_call(args: argparse.Namespace) -> int:
    """The `call` handler."""
    args = _reparse(args, _add_call_options, f"{PROG} call", _CALL_USAGE, _CALL_DESCRIPTION)
    try:
        target, words = split_target(args.words, args.stdio, args.header)
        if not words:
            raise UsageError("missing the TOOL to call")
        tool, *pairs = words
        arguments = parse_arguments(pairs, args.json)
        if args.resume is not None and (arguments or args.detach):
            raise UsageError("--resume follows an existing task: it takes no arguments and no --detach")
        if args.stuck_after is not None and not args.stuck_after > 0:
            raise UsageError("--stuck-after must be a positive number of seconds")
        ledger = _ledger(args.ledger)
    except UsageError as exc:
        _write(sys.stderr, f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    command = CallCommand(
        target=target,
        tool=tool,
        arguments=arguments,
        detach=args.detach,
        resume=args.resume,
        json_output=args.json_output,
        ledger=ledger,
        stuck_after=args.stuck_after,
        interactive=_isatty(sys.stdin),
        live=_isatty(sys.stderr),
        pretty=_isatty(sys.stdout),
    )
    return _run(command.run, sys.stderr, target)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def run_tasks(args: argparse.Namespace) -> int:
    """The `tasks get` / `tasks cancel` handler."""
    name = args.tasks_command
    description = "Print the task as JSON." if name == "get" else "Cancel the task."
    args = _reparse(args, _add_target_options, f"{PROG} tasks {name}", _TASK_USAGE, description)
    try:
        target, words = split_target(args.words, args.stdio, args.header)
        if len(words) != 1:
            raise UsageError("expected exactly one TASK_ID after the server")
        ledger = _ledger(args.ledger)
    except UsageError as exc:
        _write(sys.stderr, f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    (task_id,) = words

    async def work() -> int:
        from mcptasks.client import TaskHandle, TasksClient

        extension = TasksClient(ledger=ledger, server_id=target.identity)
        async with target.client(extension) as client:
            handle = TaskHandle.resume(client, task_id)
            if args.tasks_command == "cancel":
                await handle.cancel()
                task = await handle.status()
                _write(sys.stdout, f"cancellation requested; task {task_id} is {task.status}\n")
            else:
                task = await handle.status()
                _write(sys.stdout, _json(task_json(task)) + "\n")
        return EXIT_OK

    return _run(work, sys.stderr, target)


def run_pending(args: argparse.Namespace) -> int:
    """The `tasks pending` handler: the ledger's unfinished tasks and how to resume them."""
    try:
        ledger = _ledger(args.ledger)
    except UsageError as exc:
        _write(sys.stderr, f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    if ledger is None:
        _write(sys.stderr, f"{PROG}: error: no ledger: pass --ledger PATH or set ${LEDGER_ENV}\n")
        return EXIT_USAGE
    entries = ledger.pending()
    if args.json_output:
        rows = [
            {
                "server": e.server,
                "taskId": e.task_id,
                "tool": e.tool,
                "status": e.status,
                "createdAt": e.created_at,
            }
            for e in entries
        ]
        _write(sys.stdout, _json(rows) + "\n")
        return EXIT_OK
    for entry in entries:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.created_at))
        _write(
            sys.stdout,
            f"{stamp}  {entry.status:<15} {entry.tool or '?'}  {entry.task_id}  ({entry.server})\n",
        )
        where: list[str] | None = None
        if entry.server.startswith("stdio:"):
            where = ["--stdio", entry.server.removeprefix("stdio:")]
        elif entry.server.startswith(("http://", "https://")):
            where = [entry.server]
        if where is not None:
            hint = shlex.join([PROG, "call", *where, entry.tool or "TOOL", f"--resume={entry.task_id}"])
            _write(sys.stdout, f"  {hint}\n")
    return EXIT_OK


# -- argparse --------------------------------------------------------------------------------------

_EXIT_HELP = (
    "exit status: 0 success, 1 tool error (isError), 2 usage error, 3 failed (task failed or "
    "server/connection error), 4 cancelled, 130 interrupted"
)


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stdio",
        metavar="CMD",
        help="run the server as this command (one shell-quoted string) and talk over stdio",
    )
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for every request (repeatable), e.g. 'Authorization: Bearer ...'",
    )
    parser.add_argument(
        "--ledger", metavar="PATH", help=f"record started tasks in this SQLite ledger (also ${LEDGER_ENV})"
    )


_CALL_USAGE = "%(prog)s (URL | --stdio CMD) TOOL [key=value ...] [options]"
_TASK_USAGE = "%(prog)s (URL | --stdio CMD) [options] [--] TASK_ID"


def _add_call_options(parser: argparse.ArgumentParser) -> None:
    _add_target_options(parser)
    parser.add_argument("--json", metavar="ARGS", help="the tool arguments as one JSON object")
    parser.add_argument("--detach", action="store_true", help="print the task id once it exists and exit")
    parser.add_argument(
        "--resume",
        metavar="TASK_ID",
        help="follow an existing task instead of calling (write --resume=ID: ids may start with '-')",
    )
    parser.add_argument("--json-output", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--stuck-after",
        type=float,
        metavar="SECONDS",
        help="give up (and cancel) when the task shows no change for this long",
    )


def _reparse(
    args: argparse.Namespace,
    add_options: Callable[[argparse.ArgumentParser], None],
    prog: str,
    usage: str,
    description: str,
) -> argparse.Namespace:
    """Parse the words after the first positional again, options and positionals intermixed.

    The subcommand parsers collect everything from the first positional on (`REMAINDER`), so
    options may come before, between or after URL, TOOL and the `key=value` pairs even inside
    the `mcptasks` parser, which cannot parse subcommands intermixed.
    """
    parser = argparse.ArgumentParser(prog=prog, usage=usage, description=description, epilog=_EXIT_HELP)
    add_options(parser)
    parser.add_argument("words", nargs="*", help=argparse.SUPPRESS)
    namespace = argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "words"})
    words = list(args.words)
    tail: list[str] = []
    if (
        "--" in words
    ):  # everything after `--` is positional (split here: 3.11's intermixed parsing trips on it)
        cut = words.index("--")
        words, tail = words[:cut], words[cut + 1 :]
    parsed = parser.parse_intermixed_args(words, namespace=namespace)
    parsed.words = [*parsed.words, *tail]
    return parsed


_CALL_DESCRIPTION = "Call a tool on an MCP server; follow the task it creates to its end."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `call` and `tasks` subcommands; each sets `handler(args) -> int`."""
    call = commands.add_parser(
        "call",
        help="call a tool and follow its task",
        description=_CALL_DESCRIPTION,
        epilog=_EXIT_HELP,
        usage=_CALL_USAGE,
    )
    _add_call_options(call)
    call.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    call.set_defaults(handler=run_call)

    tasks = commands.add_parser(
        "tasks",
        help="inspect or cancel a task by id",
        description="Inspect or cancel a task by id, or list the ledger's unfinished tasks.",
    )
    actions = tasks.add_subparsers(dest="tasks_command", required=True, metavar="{get,cancel,pending}")
    for name, text in (("get", "print the task as JSON"), ("cancel", "cancel the task")):
        action = actions.add_parser(
            name,
            help=text,
            description=f"{text[0].upper()}{text[1:]}.",
            usage=_TASK_USAGE,
            epilog=_EXIT_HELP,
        )
        _add_target_options(action)
        action.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        action.set_defaults(handler=run_tasks)
    pending = actions.add_parser(
        "pending",
        help="list the ledger's unfinished tasks",
        description="List the ledger's unfinished tasks.",
    )
    pending.add_argument("--ledger", metavar="PATH", help=f"the ledger file (also ${LEDGER_ENV})")
    pending.add_argument("--json-output", action="store_true", help="print JSON")
    pending.set_defaults(handler=run_pending)


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser with just `call` and `tasks` (what `main` uses)."""
    parser = argparse.ArgumentParser(prog=PROG, description="Call MCP tools and follow their tasks.")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `call` / `tasks` from `argv` (for `python -c` and tests until the CLI wires them in)."""
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
