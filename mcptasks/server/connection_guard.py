"""`ConnectionGuard`: the bounds `mcptasks serve` and `TaskServer.run("http")` keep on HTTP
connections, and the count of open ones.

A connection costs a file descriptor from the moment it is accepted. Without bounds, clients that
open connections and send their requests slowly (slowloris) or never finish them hold every
descriptor the process may open: requests from everyone else then wait forever, and the event
loop's accept logs a traceback per attempt. The guard gives each request head `header_timeout`
seconds and each body `body_timeout` seconds (`mcptasks.server.read_deadlines`), and lets at most
`max_connections` be open at once (`mcptasks.server.acceptor`: beyond it, new connections wait in
the kernel's listen backlog). What it closes or refuses is logged by `ThrottledLog`s, one line per
interval with a count.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from mcptasks.server.throttled_log import ThrottledLog

logger = logging.getLogger("mcptasks.http")

FILE_SHARE = 0.75
"""The share of the open-file limit that connections may take by default; the rest stays for the
store's connections, log files, worker threads and the like."""


def default_max_connections() -> int | None:
    """Three quarters of this process's open-file limit (`ulimit -n`); None when it has none."""
    try:
        import resource
    except ImportError:  # Windows: no RLIMIT_NOFILE
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, int(soft * FILE_SHARE))


@dataclass(eq=False)
class ConnectionGuard:
    """The read deadlines and the connection bound of one HTTP server, and its open connections."""

    header_timeout: float
    """Seconds a request head may take to arrive, from the connection's opening (or the next
    request's first byte)."""
    body_timeout: float
    """Seconds a request body may take to arrive, from the end of its head."""
    max_connections: int | None
    """The most connections open at once (None: no bound)."""
    log_interval: float = 10.0
    """Seconds between two lines about the same condition."""
    inner_protocol: Callable[..., asyncio.Protocol] | None = None
    """uvicorn's HTTP protocol class the deadlines wrap (set when the server's config loads)."""
    open_connections: int = 0
    _closed: anyio.Event | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        every = self.log_interval
        self.header_timeouts = ThrottledLog(
            logger,
            logging.INFO,
            f"closed %s connection(s) whose request head did not arrive within {self.header_timeout:g} s "
            "(header_timeout)",
            interval=every,
        )
        self.body_timeouts = ThrottledLog(
            logger,
            logging.INFO,
            f"closed %s connection(s) whose request body did not arrive within {self.body_timeout:g} s "
            "(body_timeout)",
            interval=every,
        )
        self.at_bound = ThrottledLog(
            logger,
            logging.WARNING,
            "connection bound reached %s time(s): %s connections open (max_connections); new "
            "connections wait in the listen backlog until one closes",
            interval=every,
        )
        self.out_of_resources = ThrottledLog(
            logger,
            logging.WARNING,
            "cannot accept connections (%s time(s)): %s; %s connections open; accepting again as "
            "connections close (lower max_connections or raise the open-file limit, ulimit -n)",
            interval=every,
        )
        self.accept_failures = ThrottledLog(
            logger, logging.ERROR, "accepting a connection failed %s time(s): %s", interval=every
        )

    @property
    def full(self) -> bool:
        """Whether `max_connections` connections are open."""
        return self.max_connections is not None and self.open_connections >= self.max_connections

    def opened(self) -> None:
        """Count a connection the server accepted."""
        self.open_connections += 1

    def closed(self) -> None:
        """Count a connection gone, and wake whoever waits for room."""
        self.open_connections -= 1
        if self._closed is not None:
            self._closed.set()
            self._closed = None

    async def room(self) -> None:
        """Return once fewer than `max_connections` connections are open."""
        while self.full:
            self.at_bound.note(f"{self.open_connections:,}")
            await self._next_close().wait()

    async def next_close(self, within: float) -> None:
        """Return when a connection closes, or after `within` seconds."""
        with anyio.move_on_after(within):
            await self._next_close().wait()

    def _next_close(self) -> anyio.Event:
        if self._closed is None:
            self._closed = anyio.Event()
        return self._closed

    def flush_logs(self) -> None:
        """Write the counts the throttled logs hold back, where their interval is over."""
        for log in (
            self.header_timeouts,
            self.body_timeouts,
            self.at_bound,
            self.out_of_resources,
            self.accept_failures,
        ):
            log.flush()
