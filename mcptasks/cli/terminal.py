"""The terminal side of a followed task: cancellable line input, Ctrl-C as an event, the Ctrl-C menu."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal, TextIO, TypeVar

import anyio

from mcptasks.cli.output import one_line, write

T = TypeVar("T")

MenuChoice = Literal["cancel", "detach", "wait"]

INTERRUPT_WORDS = {"c": "cancel", "l": "detach", "w": "wait"}
"""The Ctrl-C menu: cancel the task (`tasks/cancel`), leave it running (detach), or wait."""


class TerminalInput:
    """Cancellable line input from a file descriptor (stdin, normally a terminal)."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    async def readline(self) -> str | None:
        """The next line without its newline, or None at end of input."""
        while b"\n" not in self.buffer and not self.eof:
            await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            self.buffer += chunk
        if b"\n" in self.buffer:
            line, _, self.buffer = self.buffer.partition(b"\n")
        elif self.buffer:
            line, self.buffer = self.buffer, b""
        else:
            return None
        return line.decode(errors="replace").rstrip("\r")


def word(text: str, words: dict[str, str], *aliases: tuple[str, str]) -> str | None:
    """The action `text` names: a listed letter or word (or an alias), case-insensitive."""
    lowered = text.strip().lower()
    if lowered in words.values():
        return lowered
    named = dict(aliases).get(lowered)
    return named if named is not None else words.get(lowered)


class Interrupted:
    """The outcome of work that Ctrl-C stopped (`INTERRUPTED`)."""


INTERRUPTED = Interrupted()


async def until_interrupted(work: Callable[[], Awaitable[T]], signals: AsyncIterator[Any]) -> T | Interrupted:
    """Run `work`, or stop it at the next signal from `signals` and return `INTERRUPTED`.

    `signals` is an open `anyio.open_signal_receiver(SIGINT)` kept open across calls, so a
    Ctrl-C between two calls is queued rather than lost (or raised as `KeyboardInterrupt`).
    """
    outcome: T | Interrupted = INTERRUPTED
    failure: BaseException | None = None
    async with anyio.create_task_group() as group:

        async def watch_signals() -> None:
            async for _ in signals:
                group.cancel_scope.cancel()
                return

        async def run() -> None:
            nonlocal outcome, failure
            try:
                outcome = await work()
            except Exception as exc:
                failure = exc
            group.cancel_scope.cancel()

        group.start_soon(watch_signals)
        group.start_soon(run)
    if failure is not None:
        raise failure
    return outcome


async def _no_signals() -> AsyncIterator[Any]:
    await anyio.sleep_forever()
    yield  # pragma: no cover - never reached


@contextlib.contextmanager
def interrupts() -> Iterator[AsyncIterator[Any]]:
    """SIGINT as an async iterator while the block runs (nothing where the platform cannot,
    in which case Ctrl-C stays a `KeyboardInterrupt`)."""
    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT)
        signals = receiver.__enter__()
    except NotImplementedError:
        yield _no_signals()
        return
    try:
        yield signals
    finally:
        receiver.__exit__(None, None, None)


async def interrupt_menu(
    stream: TextIO,
    line_input: TerminalInput,
    task_id: str,
    signals: AsyncIterator[Any],
    question: str | None = None,
) -> MenuChoice:
    """Ask on the terminal what Ctrl-C should do to the task (detach on a second Ctrl-C).

    `question` is the elicitation that was on screen: the menu repeats it."""
    state = f"is waiting for your answer to: {one_line(question)}" if question else "is still running."
    wait = "[w]ait and answer" if question else "[w]ait"
    while True:
        write(
            stream,
            f"\nTask {task_id} {state}\n[c]ancel the task, [l]eave it running (detach), or {wait}? [w] ",
        )
        answer = await until_interrupted(line_input.readline, signals)
        if isinstance(answer, Interrupted) or answer is None:
            write(stream, "\n")
            return "detach"
        choice = "wait" if not answer.strip() else word(answer, INTERRUPT_WORDS, ("leave", "detach"))
        if choice == "cancel":
            return "cancel"
        if choice == "detach":
            return "detach"
        if choice == "wait":
            return "wait"
        write(stream, "  answer c (cancel the task), l (leave it running) or w (wait)\n")
