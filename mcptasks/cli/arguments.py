"""Reading the command line: subcommand registration, intermixed options, `key=value` tool arguments."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from mcptasks.cli.errors import EXIT_HELP, CliError

Handler = Callable[[argparse.Namespace], int]
"""What a subcommand sets as `handler`: run the parsed command, return the exit status."""


class Subcommands(Protocol):
    """What `ArgumentParser.add_subparsers()` returns, as the subcommand modules use it."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Add the subcommand `name`; its parser."""
        ...


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
            raise CliError(f"--json is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise CliError("--json must be a JSON object")
        arguments.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"expected key=value, got {pair!r}")
        arguments[key] = parse_value(value)
    return arguments


def reparse(
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
    parser = argparse.ArgumentParser(prog=prog, usage=usage, description=description, epilog=EXIT_HELP)
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
