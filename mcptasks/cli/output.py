"""The one way the `mcptasks` command prints: every line, prompt, live status line and JSON document.

Text from a server, a tool body or a store may carry terminal escapes (OSC 52 writes the
clipboard, `ESC[2J` clears the screen, U+009B is a CSI) or bidi overrides. `write` escapes them
in everything it prints, keeping only newlines and tabs (a multi-line result stays multi-line);
`one_line` escapes a field that must stay on its line (a status message, a question, an error)
before it is put into one; `to_json` writes JSON with them as `\\uXXXX` escapes. The only control
sequence the command sends itself, the live line's erase, goes through `redraw_line` /
`erase_line`. The rule itself is `mcptasks._runtime.safe_text`, shared with the log formatters.
"""

from __future__ import annotations

from typing import Any, TextIO

from mcptasks._runtime.safe_text import escape_controls, json_text, one_line

__all__ = ["erase_line", "one_line", "redraw_line", "to_json", "write"]

_KEPT = "\n\t"
_ERASE = "\r\x1b[K"
"""Back to the start of the line and erase it (the live status line)."""


def write(stream: TextIO, text: str) -> None:
    """Write `text` with its control characters escaped (newlines and tabs kept) and flush (the
    status line and prompts interleave on one terminal)."""
    stream.write(escape_controls(text, keep=_KEPT))
    stream.flush()


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """`value` as JSON (indented unless `indent` is None), non-ASCII kept readable, control and
    bidi characters as `\\uXXXX` escapes."""
    return json_text(value, indent=indent)


def redraw_line(stream: TextIO, text: str) -> None:
    """Replace the current terminal line with `text` (one line: every control character escaped)."""
    stream.write(_ERASE + one_line(text))
    stream.flush()


def erase_line(stream: TextIO) -> None:
    """Erase the current terminal line."""
    stream.write(_ERASE)
    stream.flush()
