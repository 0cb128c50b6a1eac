"""The journal of a durable run: what its body did (steps, questions, answers), by position.

A durable body is replayed from the top when its run is lost or handed over. While the replay is
behind the journal, each step or question the body reaches is matched against the entry at its
position and answered from it; past the end, the body runs live and appends. The entries are
JSON objects with a `kind` (`step`, `ask`, `answer`) and a `name` (the step's function, the
questions' methods); a mismatch means the body is not the one that wrote the journal.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcptasks._authoring.steps import JournalDiverged, JournalFull
from mcptasks._authoring.values import InvalidValue, unstorable
from mcptasks._runtime.limits import Limits
from mcptasks.stores.base import KeepsJournal

_DIVERGED_HINT = (
    "its code changed while the task was in flight, or it decided on time or randomness outside "
    "a step (use ctx.step, ctx.now() and ctx.random())"
)


def encoded(entry: dict[str, Any]) -> str:
    """An entry as the compact JSON text stored (`ValueError` when it is not plain JSON)."""
    return json.dumps(entry, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def _what(kind: str, name: str) -> str:
    if kind == "step":
        return f"step {name!r}"
    if kind == "ask":
        return f"a question ({name})"
    return f"{kind} {name!r}"


class OwnerJournals:
    """Bytes of journal the running durable tasks of each owner hold on one engine, for
    `Limits.max_journal_bytes_per_owner` (a journal counts from its run's start to its end)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def add(self, owner: str, size: int) -> None:
        """Count `size` more bytes (fewer, when negative) for `owner`."""
        held = self.held.get(owner, 0) + size
        if held > 0:
            self.held[owner] = held
        else:
            self.held.pop(owner, None)


class Journal:
    """The entries of one durable run, read back when it started, and the body's position."""

    __slots__ = (
        "broken",
        "counted",
        "entries",
        "limits",
        "owner",
        "owners",
        "position",
        "size",
        "store",
        "stored",
        "task_id",
        "tool",
    )

    def __init__(
        self,
        store: KeepsJournal,
        task_id: str,
        tool: str,
        limits: Limits,
        entries: list[str] | None = None,
        *,
        owner: str = "",
        owners: OwnerJournals | None = None,
    ) -> None:
        self.store = store
        self.task_id = task_id
        self.tool = tool
        self.limits = limits
        texts = entries or []
        self.entries: list[dict[str, Any]] = [json.loads(text) for text in texts]
        self.size = sum(len(text.encode()) for text in texts)
        """Bytes of JSON the journal holds."""
        self.owner = owner
        self.owners = owners
        """The engine's tally of journal bytes by owner (None: no per-owner bound is kept)."""
        self.counted = 0
        """The bytes of this journal counted in `owners` (until `release`)."""
        if owners is not None:
            owners.add(owner, self.size)
            self.counted = self.size
        self.position = 0
        """The position of the next step or question the body reaches."""
        self.stored = bool(texts)
        """Whether the task's record is known to be in the store (a deferred one may not be yet)."""
        self.broken: JournalDiverged | JournalFull | None = None
        """Set once the body diverged or the journal is full: every later step raises it again."""

    @property
    def replaying(self) -> bool:
        """Whether the body is behind the journal (its steps and questions are answered from it)."""
        return self.position < len(self.entries)

    def recorded(self, kind: str, name: str) -> dict[str, Any] | None:
        """The entry at the body's position while it replays (moving past it), None past the end.

        `JournalDiverged` when the entry there is of another kind or name.
        """
        if self.broken is not None:
            raise self.broken
        if not self.replaying:
            return None
        entry = self.entries[self.position]
        if entry.get("kind") != kind or entry.get("name") != name:
            self._diverged(
                f"the journal holds {_what(str(entry.get('kind')), str(entry.get('name')))}, "
                f"this run asked for {_what(kind, name)}"
            )
        self.position += 1
        return entry

    def peek(self) -> dict[str, Any] | None:
        """The entry at the body's position, without moving past it (None past the end)."""
        return self.entries[self.position] if self.replaying else None

    def diverge(self, what: str) -> None:
        """Raise `JournalDiverged` at the body's position, saying `what` differs."""
        self._diverged(what)

    def ended(self) -> JournalDiverged | None:
        """At the body's end: the divergence when it ended before replaying its whole journal."""
        if self.broken is not None or not self.replaying:
            return None
        try:
            self._diverged(f"this run ended there, but the journal holds {len(self.entries)} entries")
        except JournalDiverged as exc:
            return exc
        return None  # pragma: no cover

    def _diverged(self, what: str) -> None:
        message = (
            f"Task tool {self.tool!r} diverged from its journal at position {self.position}: {what}; "
            f"{_DIVERGED_HINT}."
        )
        self.broken = JournalDiverged(message, self.position)
        raise self.broken

    def check_room(self) -> None:
        """`JournalFull` when one more entry would go over `max_journal_entries`, or the journal
        is at `max_journal_bytes` already."""
        if self.broken is not None:
            raise self.broken
        limits = self.limits
        if len(self.entries) >= limits.max_journal_entries:
            self._full(f"{len(self.entries)} entries, the most `Limits.max_journal_entries` allows")
        if self.size >= limits.max_journal_bytes:
            self._full(f"{self.size} bytes, the most `Limits.max_journal_bytes` allows")

    def _full(self, what: str) -> None:
        self.broken = JournalFull(
            f"The journal of task tool {self.tool!r} is full ({what}); a durable body records each "
            "step and question: record ids and paths, not data, and fewer, larger steps"
        )
        raise self.broken

    def oversized(self, text: str) -> int | None:
        """The size of an entry's `text` when it is over `max_journal_entry_bytes` (else None)."""
        size = len(text.encode())
        return size if size > self.limits.max_journal_entry_bytes else None

    async def append(
        self,
        entry: dict[str, Any],
        write: Callable[[Callable[[], Awaitable[str | None]]], Awaitable[str | None]],
    ) -> dict[str, Any] | None:
        """Write `entry` at the body's position through `write` (which retries the store call);
        return the entry stored there (this one, or an earlier run's), None when the task ended.

        `JournalFull` when the entry would take the journal over `max_journal_bytes`;
        `InvalidValue` when it holds text UTF-8 cannot encode (nothing is written).
        """
        text = encoded(entry)
        try:
            size = len(text.encode())
        except UnicodeEncodeError:
            raise InvalidValue(f"a journal entry cannot be stored: {unstorable(entry)}") from None
        if self.size + size > self.limits.max_journal_bytes:
            self._full(f"{self.size} bytes and an entry of {size} more, over `Limits.max_journal_bytes`")
        self._check_owner_room(size)
        position = self.position
        stored = await write(lambda: self.store.append_journal(self.task_id, position, text))
        if stored is None:
            return None
        kept = entry if stored == text else json.loads(stored)
        self.entries.append(kept)
        added = len(stored.encode())
        self.size += added
        if self.owners is not None and self.counted >= 0:
            self.owners.add(self.owner, added)
            self.counted += added
        self.position += 1
        return kept

    def _check_owner_room(self, size: int) -> None:
        """`JournalFull` when an entry of `size` bytes would take the journals of this task's
        owner on this engine over `Limits.max_journal_bytes_per_owner`."""
        bound = self.limits.max_journal_bytes_per_owner
        if self.owners is None or bound is None:
            return
        held = self.owners.held.get(self.owner, 0)
        if held + size > bound:
            self._full(
                f"the running durable tasks of its owner hold {held} bytes of journal on this server, "
                f"and an entry of {size} more would go over `Limits.max_journal_bytes_per_owner`"
            )

    def release(self) -> None:
        """The run ended on this engine: its bytes no longer count for its owner."""
        if self.owners is not None and self.counted >= 0:
            self.owners.add(self.owner, -self.counted)
            self.counted = -1  # released: later appends (none are expected) are not counted
