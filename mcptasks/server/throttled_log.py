"""`ThrottledLog`: one log line per interval for an event that may recur thousands of times a second.

A server under attack or out of file descriptors meets the same condition on every connection; a
line (let alone a traceback) per occurrence fills the disk and hides everything else. The first
occurrence is logged at once; later ones within `interval` are counted and reported in one line
when the interval is over (by the next occurrence or by `flush`, which the server calls
periodically).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class ThrottledLog:
    """Log `message` at most once per `interval` seconds: a %-format whose first `%s` is the count
    of occurrences the line reports, the others the details of the latest one."""

    def __init__(
        self,
        logger: logging.Logger,
        level: int,
        message: str,
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.level = level
        self.message = message
        self.interval = interval
        self.clock = clock
        self.total = 0
        """Occurrences since the start."""
        self._pending = 0
        self._details: tuple[object, ...] = ()
        self._quiet_until = float("-inf")

    def note(self, *details: object) -> None:
        """Count one occurrence (`details` fill the message's other `%s`); log it now unless a
        line was written less than `interval` ago."""
        self.total += 1
        self._pending += 1
        self._details = details
        self.flush()

    def flush(self) -> None:
        """Log the occurrences not yet reported, if the interval since the last line is over."""
        now = self.clock()
        if self._pending and now >= self._quiet_until:
            self.logger.log(self.level, self.message, f"{self._pending:,}", *self._details)
            self._pending = 0
            self._quiet_until = now + self.interval
