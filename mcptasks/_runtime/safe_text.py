"""Untrusted text (from a client, a task body or a store) made safe to show on a terminal or in a log.

The one rule every output path applies: a character that is a control (C0, DEL, C1), a format
character (bidi overrides and isolates, zero-width and invisible characters, tag characters),
a line or paragraph separator, or a lone surrogate is shown as its Python escape (`\\x1b`,
`\\x9b`, `\\u202e`); everything else, every letter, emoji and symbol, stays as it is. The zero-width
joiner and non-joiner stay too: emoji sequences and several scripts need them. So OSC 52 (the
clipboard), OSC 0 (the window title), `ESC[2J` (clear the screen), the C1 CSI U+009B and a
right-to-left override cannot act, and a newline cannot start a forged line.

`escape_controls` escapes text (keeping the characters named in `keep`, such as the newlines of a
multi-line result), `one_line` escapes a value for one line of output or a log argument, and
`json_text` writes JSON with those characters as `\\uXXXX` escapes (`json.dumps(ensure_ascii=False)`
escapes only C0) and every other character readable.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["escape_controls", "json_text", "one_line"]

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_JOINERS = frozenset({"\u200c", "\u200d"})
_SAFE_RANGES = (
    "\x20-\x7e\u00a0-\u00ac\u00ae-\u05ff\u0900-\u180d\u1810-\u200a\u2030-\u205f"
    "\u2070-\ud7ff\ue000-\ufefe\uff00-\ufff8"
)
"""Ranges without a character to escape (printable ASCII, most scripts, CJK, private use): skipped
without a look at each character (tests/cli/test_escapes.py checks them against `unicodedata`)."""
_CANDIDATE = re.compile(f"[^{_SAFE_RANGES}]")
"""Every character that may need escaping."""


@lru_cache(maxsize=4096)
def _unsafe(char: str) -> bool:
    """Whether `char` can drive a terminal, reorder or hide text, or break a line."""
    return unicodedata.category(char) in _ESCAPED_CATEGORIES and char not in _JOINERS


def _python_escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\x{code:02x}")
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON spells a character beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_controls(text: str, keep: str = "") -> str:
    """`text` with every unsafe character (see the module) shown as its Python escape, except
    the characters in `keep` (`"\\n\\t"` for multi-line text)."""

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        return char if char in keep or not _unsafe(char) else _python_escape(char)

    return _CANDIDATE.sub(shown, text)


def one_line(value: object) -> str:
    """`value` as text for one line of output or one log argument: newlines, tabs and every other
    unsafe character escaped (`None` is the empty string)."""
    return "" if value is None else escape_controls(value if isinstance(value, str) else str(value))


def json_text(
    value: Any,
    *,
    indent: int | None = None,
    compact: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """`value` as JSON with non-ASCII text readable and every unsafe character a `\\uXXXX` escape
    (inside strings: `json.dumps` already escapes C0 there, and outside them it writes only
    ASCII, so the result parses to the same value). `compact`: no spaces after separators;
    `default` as for `json.dumps`."""
    separators = (",", ":") if compact else None
    dumped = json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, default=default)

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        return char if char == "\n" or not _unsafe(char) else _json_escape(char)

    return _CANDIDATE.sub(shown, dumped)
