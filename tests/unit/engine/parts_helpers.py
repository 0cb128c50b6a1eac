"""Engine parts built on their own over a real store, for the unit tests of tests/unit/engine."""

from __future__ import annotations

from typing import Any

from mcptasks import EngineConfig, MemoryTaskStore, Result, Yields, task_tool
from mcptasks._runtime.engine.ends import RunEnds
from mcptasks._runtime.engine.host import LocalHost
from mcptasks._runtime.engine.records import RecordWriter
from mcptasks._runtime.engine.runs import RunRegistry
from mcptasks.stores.base import TaskRecord

ME = "engine-under-test"


@task_tool
async def quick(word: str = "hi") -> Yields:
    """Ends at once with `word`."""
    yield Result(word)


def record(
    task_id: str = "t1", *, runner: str | None = ME, owner: str = "alice", **fields: Any
) -> TaskRecord:
    """A record of the `quick` tool."""
    return TaskRecord(task_id=task_id, owner=owner, tool="quick", ttl_ms=60_000, runner=runner, **fields)


class Parts:
    """RecordWriter, RunRegistry, RunEnds and LocalHost over one memory store."""

    def __init__(self, config: EngineConfig | None = None, store: MemoryTaskStore | None = None) -> None:
        self.store = store if store is not None else MemoryTaskStore()
        self.config = config if config is not None else EngineConfig(push=False)
        self.tools = {quick.name: quick}
        self.records = RecordWriter(self.store, self.config, self.tools, ME, None)
        self.runs = RunRegistry(self.config, None)
        self.ends = RunEnds(self.store, self.config, self.tools, self.records, self.runs, None)
        self.host = LocalHost(
            self.store, self.config, self.tools, ME, None, self.records, self.runs, self.ends
        )
