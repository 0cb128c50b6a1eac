"""Logging for the `mcptasks serve` and `worker` commands: a readable or a JSON line per record.

The library itself only logs to named loggers (`mcptasks.tasks` for task transitions, see
`mcptasks._runtime.tasklog`); this module is what the command line installs on top.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal, TextIO

from mcptasks._runtime.tasklog import FIELDS

LogFormat = Literal["text", "json"]
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _utc(seconds: float) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{int(seconds % 1 * 1000):03d}Z"


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
        return json.dumps(data, ensure_ascii=False, default=str)


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
    formatter = JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    others = logging.DEBUG if level == "debug" else logging.WARNING
    logging.basicConfig(level=others, handlers=[handler], force=True)
    logging.getLogger("mcptasks").setLevel(numeric)
