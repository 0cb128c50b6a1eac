"""`Acceptor`: accepts uvicorn's connections in place of asyncio's accept loop, within the
`ConnectionGuard`'s bound, and backs off while the process is out of file descriptors.

asyncio's own loop (`BaseSelectorEventLoop._accept_connection`) accepts whatever arrives. Out of
file descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM), it logs "socket.accept() out of
system resource" with a traceback, schedules a retry in a second, and goes on trying the next
connection in the same batch: on Linux some 11,000 tracebacks a second for as long as the
descriptors stay taken. Here, on the same selector loop, the listening socket's reader is taken
over after uvicorn starts: connections are accepted while fewer than `max_connections` are open
(beyond that they wait in the kernel's listen backlog) and handed to the server's protocol with
`loop.connect_accepted_socket`; out of resources, accepting pauses until a connection closes or
a backoff (0.05 s doubling to 1 s) passes, and one line per interval says so.

On a loop that is not asyncio's selector loop (uvloop, say) the loop keeps accepting itself; the
read deadlines still apply.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl as ssl_module
from collections.abc import Callable, Sequence

import anyio
import anyio.lowlevel

from mcptasks.server.connection_guard import ConnectionGuard
from mcptasks.server.read_deadlines import DeadlineProtocol

OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
BATCH = 100
"""Connections accepted in a row before other tasks get a turn (asyncio's figure)."""
BACKOFF = (0.05, 1.0)
"""The first and the longest pause of accepting while out of resources, in seconds."""


class Acceptor:
    """Accepts the connections of some listening sockets while the guard has room."""

    def __init__(
        self,
        guard: ConnectionGuard,
        protocol_factory: Callable[[], asyncio.Protocol],
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        self.guard = guard
        self.protocol_factory = protocol_factory
        self.ssl = ssl
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()

    def take_over(self, servers: Sequence[asyncio.AbstractServer]) -> list[socket.socket]:
        """Stop the loop's own accepting on the listening sockets of `servers` and return their
        duplicates to accept on; none where the loop is not asyncio's selector loop."""
        loop = asyncio.get_running_loop()
        if not isinstance(loop, asyncio.SelectorEventLoop):
            return []
        taken = []
        for server in servers:
            for listening in getattr(server, "sockets", ()) or ():
                fd = listening.fileno()
                if loop.remove_reader(fd):
                    duplicate = socket.socket(listening.family, listening.type, fileno=os.dup(fd))
                    duplicate.setblocking(False)
                    taken.append(duplicate)
        return taken

    async def run(
        self,
        sockets: Sequence[socket.socket],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on `sockets` until `stop`; closes them at the end."""
        try:
            with self._scope:
                async with anyio.create_task_group() as tasks:
                    for listening in sockets:
                        tasks.start_soon(self._accept, listening, tasks)
                    task_status.started()
        finally:
            for listening in sockets:
                listening.close()
            self._done.set()

    async def stop(self) -> None:
        """Stop accepting and wait until the sockets are released."""
        self._scope.cancel()
        await self._done.wait()

    async def _accept(self, listening: socket.socket, tasks: anyio.abc.TaskGroup) -> None:
        backoff = BACKOFF[0]
        while True:
            await self.guard.room()
            await anyio.wait_readable(listening)
            for _ in range(BATCH):
                if self.guard.full:
                    break
                try:
                    connection, _ = listening.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except ConnectionAbortedError:
                    continue
                except OSError as exc:
                    if exc.errno in OUT_OF_RESOURCES:
                        self.guard.out_of_resources.note(
                            exc.strerror or exc, f"{self.guard.open_connections:,}"
                        )
                        await self.guard.next_close(within=backoff)
                        backoff = min(backoff * 2, BACKOFF[1])
                    else:
                        self.guard.accept_failures.note(exc)
                        await anyio.sleep(BACKOFF[0])
                    break
                backoff = BACKOFF[0]
                # made here, so the guard counts the connection before the next accept
                tasks.start_soon(self._hand_over, connection, self.protocol_factory())
            await anyio.lowlevel.checkpoint()

    async def _hand_over(self, connection: socket.socket, protocol: asyncio.Protocol) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: protocol, connection, ssl=self.ssl
            )
        except BaseException as exc:
            connection.close()
            if isinstance(protocol, DeadlineProtocol):
                protocol.release()
            if not isinstance(exc, Exception):
                raise
            self.guard.accept_failures.note(exc)  # a client gone before its transport started, say
