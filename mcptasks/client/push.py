"""Following a task by push: `subscriptions/listen` streams and the `notifications/tasks` router."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Literal

import anyio
from mcp import ClientSession, MCPError

from mcptasks.client.requests import Ack, ListenTasksRequest
from mcptasks.client.state import DetailedTask, signature
from mcptasks.wire import (
    CLOSE_REASON_META,
    INVALID_PARAMS,
    LEGACY_MISSING_CAPABILITY,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
)

_LISTEN_TIMEOUT = 10 * 365 * 86400.0
"""A listen request has no read timeout: its response arrives when the stream ends."""

_NO_PUSH_CODES = frozenset(
    {METHOD_NOT_FOUND, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, LEGACY_MISSING_CAPABILITY}
)
"""Errors that mean a server does not serve task listen streams (poll it instead)."""

PushOutcome = Literal["state", "silent", "quiet", "ended", "dropped", "unsupported"]
"""How one listen ended; see `listen_once`."""


class Mailbox:
    """The newest pushed state of one task, for one waiting handle (older states are replaced)."""

    def __init__(self) -> None:
        self.latest: DetailedTask | None = None
        self.wake = anyio.Event()

    def put(self, task: DetailedTask) -> None:
        """Keep `task` as the newest state and wake the waiter."""
        self.latest = task
        self.wake.set()

    def take(self) -> DetailedTask | None:
        """The newest state not taken yet (None when there is none)."""
        task, self.latest = self.latest, None
        self.wake = anyio.Event()
        return task


class PushRouter:
    """Routes `notifications/tasks` to the handles listening for each task id, and remembers the
    sessions whose server refused to push."""

    def __init__(self) -> None:
        self._mailboxes: dict[str, set[Mailbox]] = {}
        self._no_push: weakref.WeakSet[ClientSession] = weakref.WeakSet()

    def enabled(self, session: ClientSession) -> bool:
        """Whether listening is worth trying on `session`."""
        return session not in self._no_push

    def disable(self, session: ClientSession) -> None:
        """Poll on `session` from now on (its server does not push)."""
        self._no_push.add(session)

    @contextlib.contextmanager
    def mailbox(self, task_id: str) -> Iterator[Mailbox]:
        """A mailbox receiving the pushed states of `task_id` while the block runs."""
        box = Mailbox()
        self._mailboxes.setdefault(task_id, set()).add(box)
        try:
            yield box
        finally:
            boxes = self._mailboxes.get(task_id)
            if boxes is not None:
                boxes.discard(box)
                if not boxes:
                    del self._mailboxes[task_id]

    async def deliver(self, task: DetailedTask) -> None:
        """The `notifications/tasks` handler: hand the state to every mailbox of its task."""
        for box in tuple(self._mailboxes.get(task.task_id, ())):
            box.put(task)


class _Listen:
    """One listen stream and the wait for a new state on it; the first outcome recorded wins."""

    def __init__(self, session: ClientSession, router: PushRouter, current: DetailedTask) -> None:
        self.session = session
        self.router = router
        self.current = current
        self.outcomes: list[tuple[PushOutcome, DetailedTask | None]] = []

    def end(self, outcome: PushOutcome, scope: anyio.CancelScope, task: DetailedTask | None = None) -> None:
        self.outcomes.append((outcome, task))
        scope.cancel()

    async def stream(self, scope: anyio.CancelScope, first_within: float) -> None:
        request = ListenTasksRequest.of(self.current.task_id)
        try:
            closing = await self.session.send_request(
                request, Ack, request_read_timeout_seconds=_LISTEN_TIMEOUT
            )
        except MCPError as exc:
            if exc.code not in _NO_PUSH_CODES:
                return self.end("dropped", scope)
            self.router.disable(self.session)
            return self.end("unsupported", scope)
        except Exception:  # a broken transport surfaces as the transport's own error
            return self.end("dropped", scope)
        if (closing.meta or {}).get(CLOSE_REASON_META) == "done":
            # The task ended, so its terminal state was sent before this response; the session
            # delivers notifications on tasks of its own, so the response can overtake it. Wait
            # for it (states() ends the group).
            await anyio.sleep(first_within)
        self.end("ended", scope)

    async def states(self, box: Mailbox, scope: anyio.CancelScope, first_within: float) -> None:
        with anyio.move_on_after(first_within):
            await box.wake.wait()
        if not box.wake.is_set():
            return self.end("silent", scope)
        known = signature(self.current)
        while True:
            pushed = box.take()
            if pushed is not None and (pushed.terminal or signature(pushed) != known):
                return self.end("state", scope, pushed)
            await box.wake.wait()

    def outcome(self) -> tuple[PushOutcome, DetailedTask | None]:
        if not self.outcomes:
            return "quiet", None
        return next((o for o in self.outcomes if o[0] == "state"), self.outcomes[0])


async def listen_once(
    session: ClientSession, router: PushRouter, current: DetailedTask, first_within: float, within: float
) -> tuple[PushOutcome, DetailedTask | None]:
    """Listen for a task until the server pushes a state that differs from `current`.

    Outcomes: `state` (the new state); `silent` (no frame at all within `first_within` seconds:
    the server may not push, so poll now); `quiet` (nothing changed within `within` seconds:
    check with one `tasks/get`); `ended` (the server closed the stream) and `dropped` (it broke):
    catch up with `tasks/get`; `unsupported` (the server refused: poll from now on).
    """
    listen = _Listen(session, router, current)
    with router.mailbox(current.task_id) as box, anyio.move_on_after(within):
        async with anyio.create_task_group() as group:
            group.start_soon(listen.stream, group.cancel_scope, first_within)
            group.start_soon(listen.states, box, group.cancel_scope, first_within)
    return listen.outcome()
