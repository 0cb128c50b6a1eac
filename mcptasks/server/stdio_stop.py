"""Make a stdio server stop on Ctrl-C (SIGINT) or SIGTERM instead of when stdin closes.

A stdio transport reads stdin in a worker thread, which no cancellation can interrupt, so a
signal alone leaves the server waiting for the next line. `serve_stdio` puts a pipe on fd 0
and copies the real stdin into it from a cancellable reader; a signal closes the pipe, the
transport sees end of input, and the server shuts down the ordinary way (its lifespan exits,
running tasks are recorded as ended by shutdown).
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable

import anyio

_CHUNK = 65536


def _needs_forwarding(fd: int) -> bool:
    """Whether reading `fd` can block (a terminal, pipe or socket; not a file or /dev/null).

    Windows cannot wait for a console or pipe to be readable: there the stdio server keeps
    reading stdin directly (Ctrl-C then takes effect with the next line or end of input)."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return os.isatty(fd) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _copy(source: int, sink: int) -> None:
    """Copy `source` into the non-blocking `sink` until end of input."""
    while True:
        await anyio.wait_readable(source)
        try:
            data = os.read(source, _CHUNK)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            return
        view = memoryview(data)
        while view:
            await anyio.wait_writable(sink)
            try:
                written = os.write(sink, view)
            except BlockingIOError:
                continue
            view = view[written:]


async def serve_stdio(
    run: Callable[[], Awaitable[object]], ready: Callable[[], object] | None = None
) -> bool:
    """Run `run` (a server reading fd 0) until it returns or a signal stops it.

    `ready` is called once the signals are handled (say so then: a signal before it would kill
    the process outright). Returns True when SIGINT stopped the server (the caller exits as
    interrupted), False otherwise (end of input, or SIGTERM). A second signal while the server
    shuts down cancels it outright.
    """
    interrupted = False
    forwarding = _needs_forwarding(0)
    real_stdin = feed = -1
    if forwarding:
        real_stdin = os.dup(0)
        read_end, feed = os.pipe()
        os.set_blocking(feed, False)
        os.dup2(read_end, 0)
        os.close(read_end)
    try:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            if ready is not None:
                ready()
            async with anyio.create_task_group() as group:
                copier = anyio.CancelScope()

                async def forward() -> None:
                    try:
                        with copier:
                            await _copy(real_stdin, feed)
                    finally:
                        os.close(feed)  # end of input for the server

                async def serve() -> None:
                    await run()
                    group.cancel_scope.cancel()

                if forwarding:
                    group.start_soon(forward)
                group.start_soon(serve)
                async for signum in signals:
                    interrupted = interrupted or signum == signal.SIGINT
                    if copier.cancel_called or not forwarding:
                        group.cancel_scope.cancel()
                        break
                    copier.cancel()
    finally:
        if forwarding:
            os.dup2(real_stdin, 0)
            os.close(real_stdin)
    return interrupted
