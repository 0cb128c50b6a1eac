"""Inline MRTR calls kept suspended between rounds, so a body's code runs once per call.

When an inline body (a call without the tasks extension) asks a question, the call answers
`input_required` and the body stays suspended at its question in this process, under an id that
travels in the signed `requestState`. The retry carrying that state resumes the same body with the
answers: nothing before the question runs again. A body is kept for at most `seconds` after it
asked, at most `limit` bodies are kept at once and at most `per_owner` of one owner; when the
retry cannot find it (another replica, a restart, expiry, a full registry) the call is replayed
from the start with the gathered answers
(`mcptasks._runtime.mrtr`), or, for a tool declared `replay_safe=False`, refused with -32021 so the client
calls it as a task instead.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from mcptasks._authoring.results import error_result
from mcptasks._authoring.yields import InputRequest
from mcptasks._runtime.driver import Outcome
from mcptasks._runtime.mrtr import ReplayChannel

logger = logging.getLogger("mcptasks")


class _SessionChannel(ReplayChannel):
    """A replay channel that suspends the body at a missing answer instead of ending the round."""

    def __init__(
        self,
        session: InlineSession,
        tool: str,
        answers: Mapping[str, Any],
        *,
        allowed: Callable[[InputRequest], bool],
    ) -> None:
        super().__init__(tool, answers, allowed=allowed)
        self.session = session

    async def wait_for(self, missing: dict[str, dict[str, Any]]) -> None:
        """Hand the questions to the waiting round, then wait for the next round's answers."""
        await self.session.suspend(missing)


class InlineSession:
    """One inline call's body, run in the background so it can outlive a round.

    The round that starts it (or resumes it) waits in `next_stop` until the body either asks for
    input (the questions) or ends (`outcome`).
    """

    def __init__(
        self,
        calls: ParkedCalls,
        *,
        tool: str,
        owner: str,
        digest: str,
        answers: Mapping[str, Any],
        allowed: Callable[[InputRequest], bool],
    ) -> None:
        self.id = secrets.token_urlsafe(16)
        self.calls = calls
        self.tool = tool
        self.owner = owner
        self.digest = digest
        self.channel = _SessionChannel(self, tool, answers, allowed=allowed)
        self.scope = anyio.CancelScope()
        self.outcome: Outcome | None = None
        """How the body ended (None while it runs, or when it was cancelled)."""
        self.needed: dict[str, dict[str, Any]] | None = None
        """The questions the body waits on, while it is suspended."""
        self._stopped = anyio.Event()
        self._resumed = anyio.Event()

    async def run(self, body: Callable[[], Any]) -> None:
        """Run `body()` (which returns the `Outcome`) inside this session's cancel scope.

        It runs in the engine's task group, so an odd `BaseException` from a tool body becomes
        the call's tool error here instead of taking the engine down.
        """
        try:
            with self.scope:
                self.outcome = await body()
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            logger.error("task tool %r raised %s", self.tool, type(exc).__name__, exc_info=exc)
            self.outcome = Outcome("completed", result=error_result(f"{type(exc).__name__}: {exc}"))
        finally:
            self.needed = None
            self.calls.forget(self)
            self._stopped.set()

    async def suspend(self, needed: dict[str, dict[str, Any]]) -> None:
        """Body side: publish the questions and wait until a round resumes the session.

        When no round claims it within the registry's `seconds`, the body is cancelled.
        """
        self.needed = needed
        self._resumed = anyio.Event()
        self._stopped.set()
        with anyio.move_on_after(self.calls.seconds) as waiting:
            await self._resumed.wait()
        if waiting.cancelled_caught:
            if self.calls.forget(self):  # nobody claimed it: give up on this call
                self.scope.cancel()
                await anyio.lowlevel.checkpoint()
            await self._resumed.wait()  # a round claimed it just now and will resume it

    def resume(self, responses: Mapping[str, Any]) -> None:
        """Round side: add the round's answers and let the body continue."""
        self.channel.answers.update(responses)
        self.needed = None
        self._stopped = anyio.Event()
        self._resumed.set()

    async def next_stop(self) -> dict[str, dict[str, Any]] | None:
        """Round side: wait until the body asks (its questions) or ends (None; see `outcome`).

        If the waiting round is cancelled (the client went away), the body is cancelled too.
        """
        try:
            await self._stopped.wait()
        except BaseException:
            self.scope.cancel()
            raise
        return self.needed

    def cancel(self) -> None:
        """Stop the body (its `finally:` blocks run)."""
        self.calls.forget(self)
        self.scope.cancel()


class ParkedCalls:
    """The inline bodies suspended at a question in this process, by session id.

    `limit`: how many at once (a question asked beyond it is not kept); `per_owner`: how many of
    one owner (None: up to `limit`); `seconds`: how long a suspended body waits for the retry
    before it is cancelled.
    """

    def __init__(self, *, limit: int = 1000, seconds: float = 600.0, per_owner: int | None = None) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"the parked-call limit must be a non-negative integer, got {limit!r}")
        if per_owner is not None and (
            isinstance(per_owner, bool) or not isinstance(per_owner, int) or per_owner < 0
        ):
            raise ValueError(
                f"the per-owner parked-call limit must be a non-negative integer, got {per_owner!r}"
            )
        if not seconds > 0:
            raise ValueError(f"the parked-call time must be positive, got {seconds!r}")
        self.limit = limit
        self.per_owner = per_owner
        self.seconds = float(seconds)
        self._sessions: dict[str, InlineSession] = {}
        self._by_owner: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def full(self, owner: str) -> tuple[str, int] | None:
        """The bound a call of `owner` would go over if kept: `("owner", per_owner)` or
        `("server", limit)`; None while there is room."""
        if self.per_owner is not None and self._by_owner.get(owner, 0) >= self.per_owner:
            return ("owner", self.per_owner)
        if len(self._sessions) >= self.limit:
            return ("server", self.limit)
        return None

    def park(self, session: InlineSession) -> bool:
        """Keep `session` for the next round; False when a bound is reached (see `full`)."""
        if self.full(session.owner) is not None:
            return False
        self._sessions[session.id] = session
        self._by_owner[session.owner] = self._by_owner.get(session.owner, 0) + 1
        return True

    def _drop(self, session: InlineSession) -> None:
        del self._sessions[session.id]
        left = self._by_owner[session.owner] - 1
        if left:
            self._by_owner[session.owner] = left
        else:
            del self._by_owner[session.owner]

    def claim(self, session_id: str | None, *, tool: str, digest: str, owner: str) -> InlineSession | None:
        """Take the session a retry continues, if it is kept here for this very call and owner."""
        if session_id is None:
            return None
        session = self._sessions.get(session_id)
        if session is None or (session.tool, session.digest, session.owner) != (tool, digest, owner):
            return None
        self._drop(session)
        return session

    def forget(self, session: InlineSession) -> bool:
        """Drop `session` if it is kept; True when it was."""
        if self._sessions.get(session.id) is session:
            self._drop(session)
            return True
        return False
