"""JSON Schemas on the command line: tool arguments checked against `inputSchema`, fields described."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from mcptasks.cli.errors import CliError

__all__ = ["check_arguments", "describe_fields", "field_names", "near", "prefer_text", "schema_problem"]


def field_names(schema: dict[str, Any] | None) -> list[str]:
    """The property names of an object schema."""
    properties = (schema or {}).get("properties")
    return [str(name) for name in properties] if isinstance(properties, dict) else []


def describe_fields(schema: dict[str, Any] | None) -> str:
    """The fields of a schema in one phrase: `name (string, required), shout (boolean)`."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, dict) or not properties:
        return "no fields"
    required = set((schema or {}).get("required") or ())
    parts = []
    for name, prop in properties.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if isinstance(prop, dict) and "enum" in prop:
            kind = "one of " + "/".join(str(v) for v in prop["enum"])
        words = [str(kind if isinstance(kind, str) else "any")]
        if name in required:
            words.append("required")
        parts.append(f"{name} ({', '.join(words)})")
    return ", ".join(parts)


def schema_problem(value: Any, schema: dict[str, Any]) -> str | None:
    """Why `value` does not fit the JSON Schema `schema` (one phrase), or None when it does."""
    import jsonschema  # type: ignore[import-untyped]

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else str(error.message)


def near(name: str, names: list[str]) -> str:
    """` (did you mean X?)` for the closest of `names`, or nothing."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    return f" (did you mean {close[0]}?)" if close else ""


def prefer_text(value: Any, typed: str | None, prop: Any) -> bool:
    """Whether a `key=value` value that parsed as JSON fits only as the text typed."""
    if not isinstance(prop, dict) or typed is None or isinstance(value, str):
        return False
    return schema_problem(value, prop) is not None and schema_problem(typed, prop) is None


def check_arguments(
    tool: str, schema: Mapping[str, Any] | None, arguments: dict[str, Any], texts: Mapping[str, str]
) -> dict[str, Any]:
    """The arguments checked against the tool's `inputSchema`: `CliError` naming the tool's
    parameters for an unknown name, a missing required one or a value of the wrong type.

    `texts` are the `key=value` pairs as typed: a value that parsed as JSON but does not fit
    while its text does (`name=123` for a string) is passed as the text.
    """
    if not isinstance(schema, Mapping):
        return arguments
    full = dict(schema)
    properties = full.get("properties") if isinstance(full.get("properties"), dict) else {}
    assert isinstance(properties, dict)
    names = [str(name) for name in properties]
    params = f"{tool} takes {describe_fields(full)}" if names else f"{tool} takes no arguments"
    checked = dict(arguments)
    extra = full.get("additionalProperties", "properties" not in full)
    for name, value in arguments.items():
        prop = properties.get(name)
        if prop is None:
            if extra is False:
                raise CliError(f"{tool} has no parameter {name!r}{near(name, names)}; {params}")
            continue
        typed = texts.get(name)
        if prefer_text(value, typed, prop):
            checked[name] = typed
    missing = [name for name in full.get("required") or () if name not in checked]
    if missing:
        raise CliError(f"{tool} needs {', '.join(f'{m}=...' for m in missing)}; {params}")
    problem = schema_problem(checked, full)
    if problem is not None:
        raise CliError(f"bad arguments for {tool} ({problem}); {params}")
    return checked
