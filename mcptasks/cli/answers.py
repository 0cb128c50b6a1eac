"""Answers given on the command line (`--answer`, `--answers FILE`, `--decline`, `--cancel`).

An answer is matched to a question (an `elicitation/create` input request) by, in order:

- its KEY being the question's `inputRequests` key;
- its KEY being a field of the question's `requestedSchema` (the first question asking for that
  field takes it; several such answers fill several fields of one form);
- having no KEY (`--answer JSON`): it answers the first question asked, once;
- `--decline` / `--cancel`: every question no answer matched gets that action.

A JSON object answers the whole form (it is the `content`); any other value answers a form of one
field. The content is validated against the `requestedSchema` before it is sent: `CliError`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcptasks.cli.arguments import parse_value
from mcptasks.cli.errors import CliError
from mcptasks.cli.forms import FormField, form_fields
from mcptasks.cli.schema import describe_fields, field_names, prefer_text, schema_problem

__all__ = ["Answers", "QuestionError", "Unanswered", "example_answer", "parse_answers"]

Action = Literal["accept", "decline", "cancel"]


class QuestionError(CliError):
    """A question whose answer is missing or does not fit (exit status 2; nothing was sent)."""

    def __init__(self, text: str, key: str, schema: dict[str, Any] | None) -> None:
        super().__init__(text)
        self.key = key
        """The question's `inputRequests` key."""
        self.schema = schema
        """Its `requestedSchema` (None for a question without one)."""


class Unanswered(QuestionError):
    """A question with no answer and no terminal to ask it on (exit status 2)."""


def _example_value(form_field: FormField) -> Any:
    """A value of the field's type, to be replaced by the real answer: its default when it has one."""
    if form_field.default is not None:
        return form_field.default
    if form_field.kind == "enum":
        return form_field.options[0][0]
    if form_field.kind == "multi":
        return [form_field.options[0][0]]
    if form_field.kind == "boolean":
        return True
    if form_field.kind in ("number", "integer"):
        return form_field.minimum if form_field.minimum is not None else 0
    return "..."


def example_answer(key: str, schema: dict[str, Any] | None) -> str:
    """The `--answer` value answering question `key` by its key with every field of `schema`
    (`input-1={"confirm": true}`): the real key and field names, example values to edit."""
    content = {f.name: _example_value(f) for f in form_fields(schema or {})}
    return f"{key}={json.dumps(content)}"


@dataclass
class Answers:
    """The answers of one command line, consumed as questions arrive."""

    by_key: dict[str, Any] = field(default_factory=dict)
    """KEY -> JSON value (an `inputRequests` key or a field name)."""
    bare: list[Any] = field(default_factory=list)
    """The answer without a KEY (at most one)."""
    fallback: Literal["decline", "cancel"] | None = None
    used: set[str] = field(default_factory=set)
    texts: dict[str, str] = field(default_factory=dict)
    """KEY -> the VALUE as typed (`KEY=VALUE` answers only)."""

    def __bool__(self) -> bool:
        return bool(self.by_key or self.bare or self.fallback)

    def unused(self) -> list[str]:
        """The KEYs no question took."""
        return [key for key in self.by_key if key not in self.used]

    def respond(
        self, key: str, message: str, schema: dict[str, Any] | None
    ) -> tuple[Action, dict[str, Any] | None] | None:
        """The action and content answering question `key`, or None when no answer matches.

        `CliError` when the matching answer does not fit `schema` (nothing is sent then)."""
        names = field_names(schema)
        label = f"question {key} ({message!r})"
        if key in self.by_key:
            self.used.add(key)
            value = self.by_key[key]
            if len(names) == 1 and not isinstance(value, dict):  # the value of the only field
                value = self._typed({names[0]: value}, {names[0]: key}, schema)
            return "accept", self._content(value, names, schema, key, label)
        fields = {name: self.by_key[name] for name in names if name in self.by_key and name not in self.used}
        if fields:
            self.used.update(fields)
            typed = self._typed(fields, {name: name for name in fields}, schema)
            return "accept", self._content(typed, names, schema, key, label)
        if self.bare:
            return "accept", self._content(self.bare.pop(), names, schema, key, label)
        if self.fallback is not None:
            return self.fallback, None
        return None

    def _typed(self, content: Any, keys: dict[str, str], schema: dict[str, Any] | None) -> Any:
        """`content` with a field that parsed as JSON but fits only as typed (`name=5` for a
        string) taken as the text typed (`keys`: field -> the KEY that gave it)."""
        properties = (schema or {}).get("properties")
        if not isinstance(content, dict) or not isinstance(properties, dict):
            return content
        fixed = dict(content)
        for name, key in keys.items():
            typed = self.texts.get(key)
            if name in fixed and prefer_text(fixed[name], typed, properties.get(name)):
                fixed[name] = typed
        return fixed

    @staticmethod
    def _content(
        value: Any, names: list[str], schema: dict[str, Any] | None, key: str, label: str
    ) -> dict[str, Any]:
        if isinstance(value, dict):
            content = value
        elif len(names) == 1:
            content = {names[0]: value}
        else:
            raise QuestionError(
                f"the answer to {label} must be a JSON object of its fields: {describe_fields(schema)}",
                key,
                schema,
            )
        if schema is not None:
            problem = schema_problem(content, schema)
            if problem is not None:
                raise QuestionError(
                    f"the answer to {label} does not fit its schema ({problem}); "
                    f"its fields: {describe_fields(schema)}",
                    key,
                    schema,
                )
        return content


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}") from None


def parse_answers(
    texts: Sequence[str] | None, file: str | None, decline: bool = False, cancel: bool = False
) -> Answers:
    """The answers of `--answer` (repeatable), `--answers FILE` (`-`: stdin), `--decline`, `--cancel`.

    `--answer JSON` (valid JSON as a whole) has no KEY; otherwise `KEY=VALUE`, the VALUE parsed
    as JSON when it is JSON and taken as a string otherwise (as `key=value` tool arguments are).
    """
    if decline and cancel:
        raise CliError("--decline and --cancel exclude each other")
    answers = Answers(fallback="decline" if decline else "cancel" if cancel else None)
    if file is not None:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--answers: cannot read {file}: {exc.strerror or exc}") from None
        loaded = _load(text, f"--answers {file}")
        if not isinstance(loaded, dict):
            raise CliError(f"--answers {file} must be a JSON object of KEY: answer")
        answers.by_key.update({str(k): v for k, v in loaded.items()})
    for text in texts or ():
        try:
            answers.bare.append(json.loads(text))
            continue
        except ValueError:
            pass
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise CliError(f"--answer expects KEY=JSON or one JSON value, got {text!r}")
        answers.by_key[key] = parse_value(value)
        answers.texts[key] = value
    if len(answers.bare) > 1:
        raise CliError("more than one --answer without a KEY: write KEY=JSON for each question")
    return answers
