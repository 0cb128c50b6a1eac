"""`TaskWatch`: the states of one task as they change, by push or polling.

No async generator: each `__anext__` is one plain coroutine that advances the follow loop to the
next new state, so no `yield` ever sits inside a cancel scope or task group, and leaving the loop
early (`break`, an exception, a cancellation) needs no closing.
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import Protocol

import anyio
from mcp import ClientSession

from mcptasks.client.errors import TaskStuck
from mcptasks.client.policy import TaskPolicy
from mcptasks.client.push import PushRouter, listen_once
from mcptasks.client.state import DetailedTask, Signature, signature

_QUIET_POLLS = 10
"""Poll intervals a listen stream may stay quiet before one `tasks/get` checks the task."""

_MAX_FRUITLESS_LISTENS = 3
"""Listen streams in a row that end without a new state before a handle falls back to polling."""


class Followed(Protocol):
    """What a `TaskWatch` uses of the task it follows (`TaskHandle.watch` gives it one)."""

    @property
    def task_id(self) -> str | None:
        """The task's id; None when the server answered without creating a task."""

    @property
    def session(self) -> ClientSession:
        """The connection the task lives on."""

    @property
    def policy(self) -> TaskPolicy:
        """How to poll, when the task counts as stuck, and what to do then."""

    @property
    def push(self) -> PushRouter | None:
        """Where pushed states arrive (None: poll only)."""

    def first(self) -> DetailedTask | None:
        """The state to start from without a `tasks/get` (the creation result, for the first watch
        only); None: fetch one."""

    async def status(self) -> DetailedTask:
        """One `tasks/get`, taken as the latest state."""

    async def saw(self, task: DetailedTask) -> None:
        """Take a pushed `task` as the latest state."""

    async def answer(self, task: DetailedTask) -> bool:
        """Answer the input requests of `task` not answered yet; True when something was sent."""

    async def cancel_quietly(self) -> bool:
        """Best-effort `tasks/cancel`; whether it was sent."""


class TaskWatch:
    """An async iterator of a task's states: `async with handle.watch() as updates: async for
    task in updates: ...`.

    Each state is produced when the task's status, statusMessage or outstanding input keys
    change; the iteration ends after the terminal state (which is produced too). With
    `answer_inputs`, the input requests a state lists are answered (through the client's
    callbacks) when the next state is asked for. A handle without a task (the server answered
    the call at once) produces no state.
    """

    def __init__(self, handle: Followed, *, answer_inputs: bool = True) -> None:
        self._handle = handle
        self._answer_inputs = answer_inputs
        self._task = handle.first()
        self._fetch = self._task is None
        self._done = handle.task_id is None
        self._seen: Signature | None = None
        self._produced: DetailedTask | None = None
        self._quiet_since = anyio.current_time()
        self._relisten_at = 0.0
        self._fruitless = 0

    async def __aenter__(self) -> TaskWatch:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._done = True

    def __aiter__(self) -> TaskWatch:
        return self

    async def __anext__(self) -> DetailedTask:
        if self._done:
            raise StopAsyncIteration
        if self._produced is not None:
            produced, self._produced = self._produced, None
            await self._between(produced)
        while True:
            if self._fetch:
                self._task = await self._handle.status()
            task = self._task
            assert task is not None
            self._fetch = True
            if signature(task) != self._seen:
                self._seen = signature(task)
                self._quiet_since = anyio.current_time()
                self._done = task.terminal
                self._produced = None if task.terminal else task
                return task
            await self._between(task)

    async def _between(self, task: DetailedTask) -> None:
        """After a non-terminal state: answer its input, check for a stuck task, then wait for the
        next state (a push sets it and skips the next poll)."""
        policy = self._handle.policy
        if self._answer_inputs and task.status == "input_required" and await self._handle.answer(task):
            self._quiet_since = anyio.current_time()  # time spent answering is not the server's
        elif policy.stuck_after is not None and self._idle() >= policy.stuck_after:
            cancelled = await self._handle.cancel_quietly() if policy.cancel_on_stuck else False
            raise TaskStuck(task, policy.stuck_after, cancelled)
        delay = policy.interval(task)
        if policy.stuck_after is not None:
            delay = max(0.0, min(delay, policy.stuck_after - self._idle()))
        if self._may_listen() and not await self._listen(task, delay):
            return
        await anyio.sleep(delay)

    def _idle(self) -> float:
        return anyio.current_time() - self._quiet_since

    def _may_listen(self) -> bool:
        push = self._handle.push
        return (
            push is not None
            and push.enabled(self._handle.session)
            and anyio.current_time() >= self._relisten_at
        )

    async def _listen(self, task: DetailedTask, delay: float) -> bool:
        """One listen; False when the next state is known or due now, True to sleep `delay` first."""
        handle, policy = self._handle, self._handle.policy
        assert handle.push is not None
        # a quiet stream is checked with one tasks/get every _QUIET_POLLS intervals, so a stream
        # that died without the transport noticing costs a delay, never a hang
        within = _QUIET_POLLS * policy.interval(task)
        if policy.stuck_after is not None:
            within = min(within, max(0.0, policy.stuck_after - self._idle()))
        outcome, pushed = await listen_once(handle.session, handle.push, task, policy.interval(task), within)
        if pushed is not None:
            await handle.saw(pushed)
            self._task, self._fetch, self._fruitless = pushed, False, 0
            return False
        if outcome == "quiet":
            return False
        # the stream ended or broke without news: catch up with one tasks/get now and listen
        # again after one poll interval (polling meanwhile, never faster)
        self._fruitless += 1
        if self._fruitless >= _MAX_FRUITLESS_LISTENS:
            self._relisten_at = math.inf  # this server keeps closing streams: poll from now on
        else:
            self._relisten_at = anyio.current_time() + delay
        return outcome == "unsupported"
