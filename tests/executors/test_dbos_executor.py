"""The DBOS executor on real DBOS system databases (a SQLite file, and a fresh PostgreSQL database
per module): a serving engine enqueues, a worker engine runs (real `mcptasks worker` processes:
`tests/executors/test_executor_processes.py`).

Two in-process engines share one SQLite task store file. DBOS keeps one instance per process, so
each test launches (and destroys) the worker's DBOS once; a process can launch it again after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
from engines import dbos_postgres_database, dbos_sqlite_url, drop_database, postgres_available
from helpers import accept, wait_for_status

from mcptasks import Elicit, EngineConfig, Result, TaskContext, Yields, task_tool
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.protocol import ANONYMOUS_OWNER

dbos = pytest.importorskip("dbos")
from mcptasks.executors import _reconcile  # noqa: E402
from mcptasks.executors.dbos import DBOSExecutor, workflow_id  # noqa: E402

pytestmark = pytest.mark.anyio

QUICK = {"lease_ttl": 2.0, "input_poll_interval": 0.2, "claim_interval": 0.1}
BOUND = 60.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """DBOS runs on asyncio (its own loop thread); the engines too."""
    return "asyncio"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this module's DBOS system database, dropped afterwards."""
    if not postgres_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (trust auth)")
    url = dbos_postgres_database()
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture(params=["sqlite", "postgres"])
def system_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The DBOS system database URL (without `dbos+`)."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return dbos_sqlite_url(tmp_path)


@pytest.fixture
def executor_url(system_db: str) -> str:
    return "dbos+" + system_db


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/tasks.db"


# -- tools ----------------------------------------------------------------------------------------


class Calls:
    """Counts the steps a body really ran."""

    def __init__(self) -> None:
        self.made: list[str] = []

    def __call__(self, what: str) -> str:
        self.made.append(what)
        return f"did {what}"


def approval_tool(calls: Calls, *, parks: bool = True) -> Any:
    """A step, a question, a step; with `parks` False, a `with` block is open around the
    question, so the body waits for the answer inside its workflow instead of parking."""

    @task_tool(durable=True)
    async def approve(ctx: TaskContext) -> Yields:
        before = await ctx.step(calls, "before")
        yield "asking"
        question = Elicit("ship it?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        if parks:
            answer = yield question
        else:
            with nullcontext():  # a block open around the question: the body cannot park
                answer = yield question
        after = await ctx.step(calls, "after")
        yield Result({"before": before, "after": after, "ok": answer.data["ok"]})

    return approve


def endless_tool(seen: list[str]) -> Any:
    @task_tool(durable=True)
    async def endless(ctx: TaskContext) -> Yields:
        seen.append("start")
        try:
            while True:
                yield "working"
                await anyio.sleep(0.05)
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    return endless


# -- helpers --------------------------------------------------------------------------------------


@asynccontextmanager
async def engines(
    store: str, url: str, *tools: Any, worker: bool = True
) -> AsyncIterator[tuple[TaskEngine, TaskEngine | None]]:
    """A serving engine and (with `worker`) a worker engine, both with the DBOS executor."""
    serve_config = EngineConfig(executor=url, run_tasks=False, **QUICK)  # type: ignore[arg-type]
    async with TaskEngine(store, config=serve_config, tools=tools) as serve:
        if not worker:
            yield serve, None
            return
        work_config = EngineConfig(executor=url, run_tasks=True, **QUICK)  # type: ignore[arg-type]
        async with TaskEngine(store, config=work_config, tools=tools) as work:
            yield serve, work


def client_for(system_db: str) -> Any:
    return dbos.DBOSClient(system_database_url=system_db, application_name="mcptasks")


async def workflow_status(system_db: str, task_id: str) -> str | None:
    def read() -> str | None:
        client = client_for(system_db)
        try:
            found = client.list_workflows(
                workflow_ids=[workflow_id(task_id)], load_input=False, load_output=False
            )
            return found[0].status if found else None
        finally:
            client.destroy()

    return await anyio.to_thread.run_sync(read)


async def until(check: Callable[[], object], what: str) -> None:
    """Poll `check()` until it is truthy (fail after `BOUND` seconds)."""
    with anyio.move_on_after(BOUND):
        while True:
            if check():
                return
            await anyio.sleep(0.05)
    raise AssertionError(f"timed out after {BOUND} s waiting for {what}")


async def until_status(system_db: str, task_id: str, wanted: str) -> None:
    """Wait until the task's workflow has DBOS status `wanted`."""
    last = None
    with anyio.move_on_after(BOUND):
        while True:
            last = await workflow_status(system_db, task_id)
            if last == wanted:
                return
            await anyio.sleep(0.2)
    raise AssertionError(f"the workflow of {task_id} is {last}, not {wanted}")


# -- in-process engines ---------------------------------------------------------------------------


async def test_a_durable_body_runs_on_the_worker_and_its_steps_run_once(
    store_url: str, executor_url: str, system_db: str
) -> None:
    calls = Calls()
    tool = approval_tool(calls)
    async with engines(store_url, executor_url, tool) as (serve, _):
        task_id = (await serve.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
        asked = await wait_for_status(serve, task_id, "input_required", timeout=BOUND)
        await serve.update(
            task_id, {key: accept({"ok": True}) for key in asked.input_requests}, owner=ANONYMOUS_OWNER
        )
        done = await wait_for_status(serve, task_id, "completed", timeout=BOUND)
        assert done.result is not None
        assert done.result["structuredContent"] == {"before": "did before", "after": "did after", "ok": True}
        assert calls.made == ["before", "after"]
        await until_status(system_db, task_id, "SUCCESS")


async def test_tasks_cancel_stops_the_body_and_its_workflow_ends(
    store_url: str, executor_url: str, system_db: str
) -> None:
    seen: list[str] = []
    tool = endless_tool(seen)
    async with engines(store_url, executor_url, tool) as (serve, _):
        task_id = (await serve.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
        await until(lambda: "start" in seen, "the body to start")
        await serve.cancel(task_id, owner=ANONYMOUS_OWNER)
        await until(lambda: "cancelled" in seen, "the body to see the cancellation")
        await until_status(system_db, task_id, "SUCCESS")  # it ended by itself: nothing raced it
        ended = await serve.store.get(task_id)
        assert ended is not None and ended.status == "cancelled"


async def test_tasks_cancel_cancels_a_workflow_no_worker_started(
    store_url: str, executor_url: str, system_db: str
) -> None:
    seen: list[str] = []
    tool = endless_tool(seen)
    async with engines(store_url, executor_url, tool, worker=False) as (serve, _):
        task_id = (await serve.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
        await until_status(system_db, task_id, "ENQUEUED")
        await serve.cancel(task_id, owner=ANONYMOUS_OWNER)
        await until_status(system_db, task_id, "CANCELLED")
    assert seen == []


async def test_cancelling_the_workflow_in_dbos_cancels_the_task(
    store_url: str, executor_url: str, system_db: str
) -> None:
    seen: list[str] = []
    tool = endless_tool(seen)
    async with engines(store_url, executor_url, tool) as (serve, _):
        task_id = (await serve.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
        await until(lambda: "start" in seen, "the body to start")
        client = client_for(system_db)
        try:
            await client.cancel_workflow_async(workflow_id(task_id))
        finally:
            client.destroy()
        ended = await wait_for_status(serve, task_id, "cancelled", timeout=BOUND)
        assert "Cancelled in DBOS" in (ended.status_message or "")
        await until(lambda: "cancelled" in seen, "the body to see the cancellation")


async def test_without_a_worker_the_task_stays_working_and_submit_is_idempotent(
    store_url: str, executor_url: str, system_db: str
) -> None:
    calls = Calls()
    tool = approval_tool(calls)
    async with engines(store_url, executor_url, tool, worker=False) as (serve, _):
        record = await serve.start(tool, {}, owner=ANONYMOUS_OWNER)
        assert serve.executor is not None
        await serve.executor.submit(record)  # a second submit enqueues nothing new
        await anyio.sleep(2.0)
        current = await serve.store.get(record.task_id)
        assert current is not None and (current.status, current.runner) == ("working", None)
        assert await workflow_status(system_db, record.task_id) == "ENQUEUED"
    # a worker arriving later runs it once
    async with engines(store_url, executor_url, tool) as (serve, _):
        await wait_for_status(serve, record.task_id, "input_required", timeout=BOUND)
    assert calls.made == ["before"]


async def test_reconcile_enqueues_a_missing_workflow_and_cancels_a_task_whose_workflow_was_cancelled(
    store_url: str, executor_url: str, system_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_reconcile, "SUBMIT_GRACE", 0.0)
    tool = approval_tool(Calls())
    async with engines(store_url, executor_url, tool, worker=False) as (serve, _):
        executor = serve.executor
        assert isinstance(executor, DBOSExecutor)
        lost = await serve.start(tool, {}, owner=ANONYMOUS_OWNER)
        ended = await serve.start(tool, {}, owner=ANONYMOUS_OWNER)
        await executor.client.delete_workflow_async(workflow_id(lost.task_id))
        await executor.client.cancel_workflow_async(workflow_id(ended.task_id))
        records = [await serve.store.get(lost.task_id), await serve.store.get(ended.task_id)]
        assert await executor.reconcile([r for r in records if r is not None], set()) == 2
        assert await workflow_status(system_db, lost.task_id) == "ENQUEUED"
        cancelled = await serve.store.get(ended.task_id)
        assert cancelled is not None and cancelled.status == "cancelled"
        assert "Cancelled in DBOS" in (cancelled.status_message or ""), cancelled


async def test_a_workflow_left_pending_by_a_stopped_worker_is_resumed_on_the_next_one(
    store_url: str, executor_url: str, system_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_reconcile, "SUBMIT_GRACE", 0.0)
    calls = Calls()
    tool = approval_tool(calls, parks=False)  # it waits inside its workflow
    serve_config = EngineConfig(executor=executor_url, run_tasks=False, **QUICK)  # type: ignore[arg-type]
    work_config = EngineConfig(executor=executor_url, run_tasks=True, **QUICK)  # type: ignore[arg-type]
    async with TaskEngine(store_url, config=serve_config, tools=[tool]) as serve:
        async with TaskEngine(store_url, config=work_config, tools=[tool]) as first:
            task_id = (await serve.start(tool, {}, owner=ANONYMOUS_OWNER)).task_id
            asked = await wait_for_status(serve, task_id, "input_required", timeout=BOUND)
        # the stopped worker handed the body over; DBOS left its workflow PENDING on that executor
        assert await workflow_status(system_db, task_id) == "PENDING"
        async with TaskEngine(store_url, config=work_config, tools=[tool]) as second:
            assert second.instance_id != first.instance_id
            await serve.update(
                task_id, {key: accept({"ok": False}) for key in asked.input_requests}, owner=ANONYMOUS_OWNER
            )
            done = await wait_for_status(serve, task_id, "completed", timeout=BOUND)
            assert done.result is not None and done.result["structuredContent"]["ok"] is False
            await until_status(system_db, task_id, "SUCCESS")
    assert calls.made == ["before", "after"]


async def test_one_engine_per_process_works_for_dbos(store_url: str, executor_url: str) -> None:
    async with engines(store_url, executor_url) as _:
        other = TaskEngine(store_url, config=EngineConfig(executor=executor_url, run_tasks=True, **QUICK))  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="one instance per process"):
            async with other:
                pass


def test_urls() -> None:
    assert DBOSExecutor.from_url("dbos+sqlite:///tmp/x.db").system_database_url == "sqlite:///tmp/x.db"
    pg = DBOSExecutor.from_url("dbos+postgresql://u:secret@h:5432/db")
    assert pg.system_database_url == "postgresql://u:secret@h:5432/db" and "secret" not in repr(pg)
    with pytest.raises(ValueError):
        DBOSExecutor.from_url("dbos+mysql://h/db")
    assert workflow_id("abc") == workflow_id("abc") and "abc" not in workflow_id("abc")
