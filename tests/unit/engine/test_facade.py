"""`TaskEngine` over a fake placement: the facade routes new tasks to the placement it chose."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import pytest
from anyio.abc import TaskGroup
from parts_helpers import quick

from mcptasks import EngineConfig, MemoryTaskStore
from mcptasks._runtime.engine.parts import Parts
from mcptasks._runtime.executor import Executor
from mcptasks._runtime.mrtr import StartedBody
from mcptasks.lowlevel import TaskEngine
from mcptasks.stores.base import TaskRecord


class FakePlacement:
    """Stores nothing, runs nothing: records what the facade handed it."""

    executor: Executor | None = None
    takes_queued = False

    def __init__(self) -> None:
        self.placed: list[TaskRecord] = []
        self.served = False

    def runner_for(self, prepared: StartedBody | None) -> str | None:
        return "fake-runner"

    async def place(
        self, tool: Any, args: Any, record: TaskRecord, prepared: Any, *, defer: bool
    ) -> TaskRecord:
        self.placed.append(record)
        return record

    async def serve(self, stack: AsyncExitStack, task_group: TaskGroup) -> None:
        self.served = True

    async def unparked(self, record: TaskRecord) -> None:
        pass

    async def stop(self, task_id: str) -> None:
        pass

    async def reconcile(self, active: Any, live: set[str]) -> int:
        return 0


@pytest.mark.anyio
async def test_the_facade_hands_new_tasks_to_its_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePlacement()
    build = Parts.build

    def with_fake(*args: Any) -> Parts:
        return build(*args)._replace(placement=fake)

    monkeypatch.setattr(Parts, "build", staticmethod(with_fake))
    engine = TaskEngine(MemoryTaskStore(), config=EngineConfig(push=False, recover_orphans=False))
    async with engine:
        assert fake.served and engine.running
        created = await engine.start(quick, {"word": "x"}, owner="alice", client_capabilities={"a": 1})
        again = await engine.start(quick, {}, owner="alice", client_capabilities={"a": 1})
    assert [record.task_id for record in fake.placed] == [created.task_id, again.task_id]
    assert created.runner == "fake-runner" and created.arguments == {"word": "x"}
    assert created.client_capabilities is again.client_capabilities  # equal copies are shared
    assert not engine.running and engine.active_runs == 0


def test_settings_are_read_from_the_config_and_refuse_assignments() -> None:
    engine = TaskEngine(config=EngineConfig(lease_ttl=7))
    assert engine.lease_ttl == 7
    with pytest.raises(AttributeError, match="read-only"):
        engine.lease_ttl = 1  # type: ignore[misc]
    assert len(TaskEngine.__mro__) == 2
