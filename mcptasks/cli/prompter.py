"""Elicitation requests answered on the terminal: accept / decline / skip, then one prompt a field."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from mcptasks.cli.answers import Answers, Unanswered
from mcptasks.cli.errors import PROG
from mcptasks.cli.forms import FormField, form_fields, parse_answer
from mcptasks.cli.output import one_line, write
from mcptasks.cli.schema import describe_fields
from mcptasks.cli.status import StatusLine
from mcptasks.cli.terminal import TerminalInput, word

if TYPE_CHECKING:
    from mcp.client.context import ClientRequestContext
    from mcp_types import ElicitRequestParams, ElicitResult, ErrorData

QUESTION_WORDS = {"a": "accept", "d": "decline", "s": "skip"}
"""The answers to a question: accept (answer it), decline (say no), skip (leave it unanswered:
the MCP action `cancel`). Their letters differ from the Ctrl-C menu's (`INTERRUPT_WORDS`)."""

_EOF = object()
_SKIP = object()

_HINTS = {
    "boolean": "[y/n]",
    "integer": "(integer)",
    "number": "(number)",
    "multi": "(comma-separated)",
    "string": "",
}


def _hint(form_field: FormField) -> str:
    """What the prompt says after the label: the expected input, the default, optional."""
    hint = f"[1-{len(form_field.options)}]" if form_field.kind == "enum" else _HINTS[form_field.kind]
    if form_field.kind == "boolean" and isinstance(form_field.default, bool):
        hint = "[Y/n]" if form_field.default else "[y/N]"
    elif form_field.default is not None:
        hint += f" [default: {one_line(form_field.default)}]"
    if not form_field.required and form_field.default is None:
        hint += " (optional)"
    return hint.strip()


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
        write(self.stream, prompt)
        try:
            line = await self.input.readline()
        except BaseException:
            write(self.stream, "\n")  # interrupted: keep the prompt line on screen
            raise
        if line is None:
            write(self.stream, "\n")
        return line

    async def _form(self, params: ElicitRequestParams) -> ElicitResult:
        from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

        write(self.stream, f"\n? {one_line(params.message)}\n")
        if isinstance(params, ElicitRequestURLParams):
            write(self.stream, f"  open: {one_line(params.url)}\n")
        fields = form_fields(params.requested_schema) if isinstance(params, ElicitRequestFormParams) else []
        if len(fields) == 1 and fields[0].kind == "boolean":
            return await self._yes_no(fields[0])
        while True:
            answer = await self._ask("  [a]ccept, [d]ecline or [s]kip? [a] ")
            if answer is None:
                return ElicitResult(action="cancel")
            action = "accept" if not answer.strip() else word(answer, QUESTION_WORDS)
            if action is not None:
                break
            write(self.stream, "    answer a (accept), d (decline) or s (skip)\n")
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

        label = one_line(form_field.description or form_field.label)
        default = form_field.default if isinstance(form_field.default, bool) else None
        choices = {True: "[Y/n]", False: "[y/N]", None: "[y/n]"}[default]
        prompt = f"  {label} {choices} (or d: decline, s: skip): "
        while True:
            text = await self._ask(prompt)
            if text is None:
                return ElicitResult(action="cancel")
            if not text.strip() and default is not None:
                return ElicitResult(action="accept", content={form_field.name: default})
            action = word(text, {"d": "decline", "s": "skip"})
            if action is not None:
                return ElicitResult(action="decline" if action == "decline" else "cancel")
            try:
                value = parse_answer(form_field, text)
            except ValueError:
                write(self.stream, "    answer y or n (or d to decline, s to skip)\n")
                continue
            return ElicitResult(action="accept", content={form_field.name: value})

    def _prompt(self, form_field: FormField) -> str:
        """The field's prompt, its options listed above it first."""
        label = f"  {one_line(form_field.label)}"
        if form_field.description and form_field.description != form_field.label:
            label += f" ({one_line(form_field.description)})"
        if form_field.options:
            write(self.stream, label + "\n")
            for index, (value, title) in enumerate(form_field.options, 1):
                shown = one_line(title) if title == value else f"{one_line(title)} [{one_line(value)}]"
                write(self.stream, f"    {index}) {shown}\n")
            label = "  choice"
        hint = _hint(form_field)
        return f"{label} {hint}: " if hint else f"{label}: "

    async def _field(self, form_field: FormField) -> Any:
        prompt = self._prompt(form_field)
        while True:
            text = await self._ask(prompt)
            if text is None:
                return _EOF
            if not text.strip():
                if form_field.default is not None:
                    return form_field.default
                if not form_field.required:
                    return _SKIP
                write(self.stream, "    a value is required\n")
                continue
            try:
                return parse_answer(form_field, text)
            except ValueError as exc:
                write(self.stream, f"    {exc}\n")


class Unasked:
    """The elicitation callback without a terminal on stdin: a question no answer matched stops
    the command (`Unanswered`, exit status 2); nothing is sent for it, so the task keeps waiting."""

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """Raise `Unanswered` naming the question, its key and its fields."""
        from mcp_types import ElicitRequestFormParams

        schema = params.requested_schema if isinstance(params, ElicitRequestFormParams) else None
        raise Unanswered(
            f"question {context.request_id} ({params.message!r}) has no answer and there is no "
            f"terminal to ask on; its fields: {describe_fields(schema)} "
            f"(give --answer {context.request_id}=JSON, --answers FILE, --decline or --cancel)",
            str(context.request_id),
            schema,
        )


class AnswerFirst:
    """The elicitation callback that answers from the command line's `Answers`, and passes the
    questions they do not match to `ask` (the terminal prompter, or `Unasked`)."""

    def __init__(self, answers: Answers, ask: FormPrompter | Unasked, status: StatusLine) -> None:
        self.answers = answers
        self.ask = ask
        self.status = status

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """Answer `params` from the command line, else ask."""
        from mcp_types import ElicitRequestFormParams, ElicitResult

        schema = params.requested_schema if isinstance(params, ElicitRequestFormParams) else None
        found = self.answers.respond(str(context.request_id), params.message, schema)
        if found is None:
            return await self.ask(context, params)
        action, content = found
        shown = f" {json.dumps(content)}" if content is not None else ""
        self.status.note(f"{PROG}: answered {params.message!r}: {action}{shown}")
        return ElicitResult(action=action, content=content)
