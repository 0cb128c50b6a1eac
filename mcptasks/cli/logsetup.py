"""Logging for the `mcptasks serve` and `worker` commands: a readable or a JSON line per record.

The library itself only logs to named loggers (`mcptasks.tasks` for task transitions, see
`mcptasks._runtime.tasklog`); this module is what the command line installs on top.

Log lines carry text from clients, task bodies and stores (error messages, a client's name). Both
formats escape it (`mcptasks._runtime.safe_text`): in a text line the message is kept on its line
with control characters, bidi overrides and newlines escaped, and a traceback keeps its own line
breaks while each exception's message in it is escaped the same way; a JSON line writes them as
`\\uXXXX` escapes. A client's "\\n2026-... CRITICAL ..." cannot forge a line, OSC or CSI sequences
cannot reach the operator's terminal.
"""

from __future__ import annotations

import logging
import sys
import time
import traceback
from types import TracebackType
from typing import Any, Literal, TextIO, TypeAlias

from mcptasks._runtime.safe_text import escape_controls, json_text, one_line
from mcptasks._runtime.tasklog import FIELDS

LogFormat = Literal["text", "json"]
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _utc(seconds: float) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{int(seconds % 1 * 1000):03d}Z"


ExcInfo: TypeAlias = (
    "tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]"
)


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc`, its causes and contexts, and the members of exception groups among them."""
    found: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if any(current is seen for seen in found):
            continue
        found.append(current)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        todo.extend(e for e in getattr(current, "exceptions", ()) if isinstance(e, BaseException))
    return found


def exception_text(exc_info: ExcInfo) -> str:
    """A traceback with its own line breaks, each exception's message (and notes) on one line with
    its control characters escaped: a message cannot start a line of its own."""
    kind, exc, tb = exc_info
    text = "".join(traceback.format_exception(kind, exc, tb)).rstrip("\n")
    if exc is not None:
        for each in _chain(exc):
            if isinstance(each, SyntaxError):  # its lines are the file, the code and the caret
                continue
            own = "".join(traceback.format_exception_only(type(each), each)).rstrip("\n")
            text = text.replace(own, one_line(own))
    return escape_controls(text, keep="\n")


class EscapingFormatter(logging.Formatter):
    """A `logging.Formatter` whose lines cannot carry terminal escapes or forged lines: the
    message (its arguments interpolated) escaped onto one line, tracebacks as `exception_text`.

    `mcptasks serve` and `worker` install it; a program that hosts mcptasks and configures its
    own logging can use it too (`EscapingFormatter(fmt)` takes what `logging.Formatter` takes)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as escaped text (the record itself is left unchanged)."""
        safe = logging.makeLogRecord(record.__dict__)
        safe.msg, safe.args = one_line(record.getMessage()), None
        safe.exc_info, safe.exc_text, safe.stack_info = None, None, None
        text = super().format(safe)
        if record.exc_info:
            text += "\n" + exception_text(record.exc_info)
        elif record.exc_text:
            text += "\n" + escape_controls(record.exc_text, keep="\n")
        if record.stack_info:
            text += "\n" + escape_controls(self.formatStack(record.stack_info), keep="\n")
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: `time`, `level`, `logger`, `message`, the task fields of
    `mcptasks._runtime.tasklog` that are set (`event`, `task_id`, `tool`, `status`, `code`, `reason`,
    `detail`), and `exception` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        data = json_fields(record.levelname, record.name, record.getMessage(), record.created)
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                data[name] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json_text(data, default=str)


def json_fields(level: str, logger: str, message: str, created: float | None = None) -> dict[str, Any]:
    """The fields every JSON log line starts with."""
    return {
        "time": _utc(time.time() if created is None else created),
        "level": level.lower(),
        "logger": logger,
        "message": message,
    }


def configure_logging(
    level: str = "info", log_format: LogFormat = "text", stream: TextIO | None = None
) -> None:
    """Send log records to `stream` (stderr): `mcptasks` loggers at `level`, other libraries'
    loggers at warning (at debug too when `level` is debug). Replaces handlers others installed
    on the root logger (the SDK's `MCPServer` installs one)."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    numeric = logging.getLevelName(level.upper())
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else EscapingFormatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    others = logging.DEBUG if level == "debug" else logging.WARNING
    logging.basicConfig(level=others, handlers=[handler], force=True)
    logging.getLogger("mcptasks").setLevel(numeric)
