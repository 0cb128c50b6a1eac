"""Elicitation forms: a `requestedSchema` as a list of fields, and typed text as a field's value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

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


def _kind(prop: dict[str, Any]) -> tuple[FieldKind, list[tuple[str, str]]]:
    """The field kind of a property, with its enum options."""
    options = _options(prop)
    items = prop.get("items") if isinstance(prop.get("items"), dict) else None
    if prop.get("type") == "array" and items is not None and _options(items):
        return "multi", _options(items)
    if options:
        return "enum", options
    if prop.get("type") in ("number", "integer", "boolean"):
        kind: FieldKind = prop["type"]
        return kind, options
    return "string", options


def form_fields(schema: dict[str, Any]) -> list[FormField]:
    """The prompts for a `requestedSchema` (a flat object of primitive properties)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or ())
    fields: list[FormField] = []
    for name, raw in properties.items():
        prop = raw if isinstance(raw, dict) else {}
        kind, options = _kind(prop)
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


def _boolean(field: FormField, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _YES:
        return True
    if lowered in _NO:
        return False
    raise ValueError("answer y or n")


def _whole(field: FormField, text: str) -> int:
    try:
        integer = int(text.strip())
    except ValueError:
        raise ValueError("enter a whole number") from None
    _check_range(field, integer)
    return integer


def _real(field: FormField, text: str) -> float | int:
    try:
        number = float(text.strip())
    except ValueError:
        raise ValueError("enter a number") from None
    _check_range(field, number)
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def _multi(field: FormField, text: str) -> list[str]:
    values = [_choice(field, part) for part in text.split(",") if part.strip()]
    if field.min_items is not None and len(values) < field.min_items:
        raise ValueError(f"choose at least {field.min_items}")
    if field.max_items is not None and len(values) > field.max_items:
        raise ValueError(f"choose at most {field.max_items}")
    return values


def _string(field: FormField, text: str) -> str:
    if field.min_length is not None and len(text) < field.min_length:
        raise ValueError(f"must be at least {field.min_length} characters")
    if field.max_length is not None and len(text) > field.max_length:
        raise ValueError(f"must be at most {field.max_length} characters")
    return text


_PARSERS: dict[FieldKind, Callable[[FormField, str], Any]] = {
    "boolean": _boolean,
    "integer": _whole,
    "number": _real,
    "enum": _choice,
    "multi": _multi,
    "string": _string,
}


def parse_answer(field: FormField, text: str) -> Any:
    """Turn typed text into the field's value (`ValueError` with a reason when it does not fit).

    Empty text is handled by the caller (default / optional / required).
    """
    return _PARSERS[field.kind](field, text)
