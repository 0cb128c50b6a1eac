"""Inline MRTR calls kept suspended between rounds, so a body's code runs once per call.

When an inline body (a call without the tasks extension) asks a question, the call answers
`input_required` and the body stays suspended at its question in this process, under an id that
travels in the signed `requestState`. The retry carrying that state resumes the same body with the
answers: nothing before the question runs again. A body is kept for at most `seconds` after it
asked and at most `limit` bodies are kept at once; when the retry cannot find it (another replica,
a restart, expiry, a full registry) the call is replayed from the start with the gathered answers
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

    `limit`: how many at once (a question asked beyond it is not kept); `seconds`: how long a
    suspended body waits for the retry before it is cancelled.
    """

    def __init__(self, *, limit: int = 1000, seconds: float = 600.0) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"the parked-call limit must be a non-negative integer, got {limit!r}")
        if not seconds > 0:
            raise ValueError(f"the parked-call time must be positive, got {seconds!r}")
        self.limit = limit
        self.seconds = float(seconds)
        self._sessions: dict[str, InlineSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def park(self, session: InlineSession) -> bool:
        """Keep `session` for the next round; False when the registry is full."""
        if len(self._sessions) >= self.limit:
            return False
        self._sessions[session.id] = session
        return True

    def claim(self, session_id: str | None, *, tool: str, digest: str, owner: str) -> InlineSession | None:
        """Take the session a retry continues, if it is kept here for this very call and owner."""
        if session_id is None:
            return None
        session = self._sessions.get(session_id)
        if session is None or (session.tool, session.digest, session.owner) != (tool, digest, owner):
            return None
        del self._sessions[session_id]
        return session

    def forget(self, session: InlineSession) -> bool:
        """Drop `session` if it is kept; True when it was."""
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            return True
        return False
