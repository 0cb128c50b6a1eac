"""The exit statuses of the `mcptasks` command and its one error type for bad input (exit 2)."""

from __future__ import annotations

from typing import TextIO

from mcptasks.cli.output import one_line, write
from mcptasks.errors import MCPTasksError

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_HELP",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "PROG",
    "CliError",
]

PROG = "mcptasks"

EXIT_OK = 0
EXIT_TOOL_ERROR = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_CANCELLED = 4
EXIT_INTERRUPTED = 130

EXIT_HELP = (
    "exit status: 0 success, 1 tool error (isError), 2 usage error, 3 failed (task failed or "
    "server/connection error), 4 cancelled, 130 interrupted"
)
"""The epilog of the client subcommands' help."""


class CliError(MCPTasksError):
    """A bad command line or setting, reported in one line: exit status 2.

    `prog` is the command the line names (`mcptasks admin: error: ...`)."""

    def __init__(self, message: str, *, prog: str = PROG) -> None:
        super().__init__(message)
        self.prog = prog

    def report(self, stream: TextIO) -> int:
        """Write the one error line to `stream`; the exit status (2)."""
        write(stream, f"{self.prog}: error: {one_line(str(self))}\n")
        return EXIT_USAGE
