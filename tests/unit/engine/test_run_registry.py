"""`RunRegistry`: admission, per-owner counts, early answers, shutdown."""

from __future__ import annotations

import anyio
import pytest
from parts_helpers import Parts

from mcptasks import EngineConfig, Limits
from mcptasks._runtime.limits import TooManyTasks
from mcptasks._runtime.run import TaskRun


def run_of(parts: Parts, task_id: str, owner: str = "alice") -> TaskRun:
    return TaskRun(parts.host, task_id, None, owner=owner, tool="quick")


def test_admission_counts_per_owner_and_in_all() -> None:
    parts = Parts(EngineConfig(push=False, limits=Limits(max_active=3, max_active_per_owner=2)))
    runs = parts.runs
    runs.add(run_of(parts, "a1"))
    runs.add(run_of(parts, "a2"))
    with pytest.raises(TooManyTasks):
        runs.check_room("alice")
    runs.check_room("bob")
    runs.add(run_of(parts, "b1", "bob"))
    with pytest.raises(TooManyTasks):
        runs.check_room("carol")
    runs.drop("a1")
    runs.check_room("alice")
    assert len(runs) == 2 and runs.get("a1") is None


def test_dropping_a_run_ends_it_and_frees_its_early_answer() -> None:
    parts = Parts(EngineConfig(push=False, limits=Limits(max_unwritten_results=1)))
    first, second = run_of(parts, "a1"), run_of(parts, "a2")
    parts.runs.add(first)
    parts.runs.add(second)
    assert parts.runs.answer_early(first)
    assert not parts.runs.answer_early(second)  # the bound is reached
    parts.runs.drop("a1")
    assert first.ended.is_set()
    assert parts.runs.answer_early(second)
    assert not parts.runs.answer_early(run_of(parts, "elsewhere"))  # not hosted here


@pytest.mark.anyio
async def test_stop_all_stops_every_run_and_reports_the_stuck_ones() -> None:
    stuck: list[list[str]] = []
    parts = Parts(EngineConfig(push=False, limits=Limits(cancel_grace=0.05)))
    parts.runs.on_stuck_shutdown = stuck.append
    run = parts.runs.add(run_of(parts, "a1"))
    with anyio.fail_after(5):
        await parts.runs.stop_all()
    assert run.stopped_at is not None
    assert stuck == [["'quick' (task a1)"]]
