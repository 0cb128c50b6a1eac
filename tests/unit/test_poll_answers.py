"""`PollAnswers`: an unchanged task's `tasks/get` result is encoded once; any change renders anew."""

from __future__ import annotations

from mcptasks.server.poll_answers import MAX_ANSWER_BYTES, MAX_ANSWERS, PollAnswers
from mcptasks.stores.base import TaskRecord


class Renders:
    """A render function that counts its calls and returns `body`."""

    def __init__(self, body: bytes = b'{"status":"working"}') -> None:
        self.body = body
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.body


def record(task_id: str = "t", version: int = 1) -> TaskRecord:
    return TaskRecord(task_id=task_id, owner="o", tool="x", version=version)


def test_an_unchanged_task_is_rendered_once() -> None:
    answers, render = PollAnswers(), Renders()
    assert [answers.answer(record(), 50, render) for _ in range(3)] == [render.body] * 3
    assert render.calls == 1


def test_a_new_version_or_interval_renders_again() -> None:
    answers, render = PollAnswers(), Renders()
    answers.answer(record(version=1), 50, render)
    answers.answer(record(version=2), 50, render)
    answers.answer(record(version=2), 100, render)
    answers.answer(record(version=2), 100, render)
    assert render.calls == 3


def test_large_answers_are_not_kept() -> None:
    answers, render = PollAnswers(), Renders(b"x" * (MAX_ANSWER_BYTES + 1))
    answers.answer(record(), 50, render)
    answers.answer(record(), 50, render)
    assert (render.calls, len(answers)) == (2, 0)


def test_the_oldest_task_goes_first_when_full() -> None:
    answers, render = PollAnswers(), Renders()
    for number in range(MAX_ANSWERS + 1):
        answers.answer(record(f"t{number}"), 50, render)
    assert len(answers) == MAX_ANSWERS
    answers.answer(record(f"t{MAX_ANSWERS}"), 50, render)  # the newest: still kept
    answers.answer(record("t0"), 50, render)  # the oldest: dropped, rendered again
    assert render.calls == MAX_ANSWERS + 2
