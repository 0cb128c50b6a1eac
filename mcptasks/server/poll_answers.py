"""`PollAnswers`: the encoded `tasks/get` results of recently polled tasks, sent again while the
task is unchanged.

A client polls a running task every `pollIntervalMs`, and most polls find it as it was: the same
record version, so the same result to render and encode. The fast path keeps that result's bytes
per task, with the record version and the poll interval they were rendered for, and answers an
unchanged task's next poll with them. Only the store's record decides: every poll still reads it
(the owner check, expiry and poll limiting apply as before), and a new version or interval renders
afresh. Bounded in entries and in the size of what it keeps.
"""

from __future__ import annotations

from collections.abc import Callable

from mcptasks.stores.base import TaskRecord

MAX_ANSWERS = 1024
"""How many tasks' answers are kept (the oldest kept is dropped first)."""
MAX_ANSWER_BYTES = 8192
"""Larger answers (big results) are rendered each time and not kept."""


class PollAnswers:
    """Encoded results of `tasks/get`, by task id, for the record version and poll interval they
    were rendered for."""

    __slots__ = ("_answers",)

    def __init__(self) -> None:
        self._answers: dict[str, tuple[int, int, bytes]] = {}

    def __len__(self) -> int:
        """How many tasks' answers are kept."""
        return len(self._answers)

    def answer(self, record: TaskRecord, interval: int, render: Callable[[], bytes]) -> bytes:
        """The encoded result for `record` advertising `interval`: kept bytes when the task is
        unchanged since they were rendered, else `render()` (kept when small enough)."""
        kept = self._answers.get(record.task_id)
        if kept is not None and kept[0] == record.version and kept[1] == interval:
            return kept[2]
        body = render()
        if len(body) > MAX_ANSWER_BYTES:
            if kept is not None:
                del self._answers[record.task_id]
            return body
        if kept is None and len(self._answers) >= MAX_ANSWERS:
            del self._answers[next(iter(self._answers))]
        self._answers[record.task_id] = (record.version, interval, body)
        return body
