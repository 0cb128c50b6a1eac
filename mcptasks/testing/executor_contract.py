"""The contract suite every `Executor` adapter must pass (requires pytest and anyio's plugin).

Subclass `ExecutorContract` in a module pytest collects (the class name must start with `Test`)
and say where the executor and the store are::

    from mcptasks.testing.executor_contract import ExecutorContract

    class TestMyExecutor(ExecutorContract):
        def executor_url(self) -> str:
            return "myexec://127.0.0.1:9999/?queue=" + uuid.uuid4().hex  # a fresh queue per test

        def store_url(self, tmp_path) -> str:
            return f"sqlite:///{tmp_path / 'tasks.db'}"

Each test runs two `TaskEngine`s in this process on the same store: a *serving* one
(`EngineConfig(executor=..., run_tasks=False)`, as `mcptasks serve --executor`) that creates the
tasks and answers `get` / `update` / `cancel`, and a *working* one (`run_tasks=True`, as
`mcptasks worker --executor`) in which the executor runs the bodies. Every check goes through the
engines' public methods and the store. `executor_url` is called once per test (both engines get
the URL it returned), so returning a fresh task queue each call keeps the tests apart on one
shared executor server; override `executor` instead to build the executor object yourself (it is
called once per engine: each engine needs an instance of its own).

Nothing here synchronises by sleeping: every wait polls the record under the generous `timeout`.
The one negative check (no body runs without a working engine) watches for `quiet` seconds.
The tests run on asyncio (`anyio_backend`): executor SDKs such as temporalio require it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from mcptasks._authoring.context import TaskContext
from mcptasks._authoring.tool import TaskTool, task_tool
from mcptasks._authoring.yields import Accepted, Elicit, Result
from mcptasks._runtime.config import EngineConfig
from mcptasks._runtime.engine import TaskEngine
from mcptasks._runtime.executor import Executor, executor_from_url
from mcptasks.stores.base import TaskRecord

__all__ = ["ExecutorContract"]

OWNER = "executor-contract"
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@dataclass
class BodyTrace:
    """What the bodies of one test really did, in order (they run in this process)."""

    events: list[str] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)
    """Set by the test to let `contract_hold` finish."""

    def note(self, event: str) -> None:
        """Record that `event` happened."""
        self.events.append(event)

    def count(self, event: str) -> int:
        """How many times `event` happened."""
        return self.events.count(event)


@dataclass
class ContractTools:
    """The task tools of one test, recording into `trace`."""

    trace: BodyTrace
    quick: TaskTool[..., Any]
    approve: TaskTool[..., Any]
    hold: TaskTool[..., Any]
    unknown: TaskTool[..., Any]

    @property
    def known(self) -> list[TaskTool[..., Any]]:
        """The tools a working engine can run (every one but `unknown`)."""
        return [self.quick, self.approve, self.hold]


def contract_tools() -> ContractTools:
    """Fresh contract tools (and their trace) for one test."""
    trace = BodyTrace()

    @task_tool(name="contract_quick", poll_interval=0.1)
    async def quick(x: int = 1) -> dict[str, Any]:
        """No work at all: returns at once."""
        trace.note("quick")
        return {"doubled": 2 * x}

    def prepare(label: str) -> str:
        trace.note("prepare")
        return f"plan-{label}"

    def apply(plan: str, confirmed: bool) -> str:
        trace.note("apply")
        return f"{plan} {'applied' if confirmed else 'skipped'}"

    @task_tool(name="contract_approve", durable=True, poll_interval=0.1)
    async def approve(ctx: TaskContext, label: str = "x") -> Any:
        """A step, a question, another step."""
        trace.note("approve")
        plan = await ctx.step(prepare, label)
        yield f"prepared {plan}"
        answer = yield Elicit(f"Apply {plan}?", CONFIRM)
        confirmed = isinstance(answer, Accepted) and bool(answer.data["confirm"])
        outcome = await ctx.step(apply, plan, confirmed)
        yield Result({"outcome": outcome})

    @task_tool(name="contract_hold", poll_interval=0.1)
    async def hold() -> Any:
        """Reports a status, then waits for `trace.release` (or its cancellation)."""
        trace.note("hold")
        yield "holding"
        finished = False
        try:
            await trace.release.wait()
            finished = True
        finally:
            trace.note("hold released" if finished else "hold stopped")
        yield Result({"held": True})

    @task_tool(name="contract_unknown", poll_interval=0.1)
    async def unknown() -> dict[str, Any]:
        """Registered on the serving engine only: no worker knows it."""
        trace.note("unknown")
        return {}

    return ContractTools(trace, quick, approve, hold, unknown)


class ExecutorContract:
    """Base class of the executor contract tests; subclass it and override `executor_url` (or
    `executor`) and `store_url`."""

    timeout: ClassVar[float] = 60.0
    """Upper bound, in seconds, of any wait for an effect (never a synchronisation delay)."""
    quiet: ClassVar[float] = 2.0
    """How long the no-worker test watches a task to see that nothing runs it."""
    lease_ttl: ClassVar[float] = 3.0
    """The engines' lease (an executor may derive its heartbeat timeout from it)."""
    no_worker_timeout: ClassVar[float] = 2.0
    """The engines' `no_worker_timeout`: how long a task whose tool no worker offers waits before
    it fails (the unknown-tool test); a worker lacking the tool raises `NotServedHere`, which the
    executor must answer by running the task elsewhere (or retrying later), never by failing it."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        """The async backend the tests run on (executor SDKs need asyncio)."""
        return "asyncio"

    # -- what a subclass provides ------------------------------------------------------------------

    def executor_url(self) -> str:
        """Override: the URL of the executor under test (called once per test)."""
        raise NotImplementedError("subclasses of ExecutorContract must define executor_url (or executor)")

    def executor(self) -> Executor:
        """A new executor object for one engine (default: `executor_from_url` of the test's URL)."""
        return executor_from_url(self._url())

    def store_url(self, tmp_path: Path) -> str:
        """Override: a store URL shared by both engines of a test, empty at its start
        (`sqlite:///` in `tmp_path`, or a fresh prefix / schema on a shared server)."""
        raise NotImplementedError("subclasses of ExecutorContract must define store_url")

    # -- helpers -----------------------------------------------------------------------------------

    def _url(self) -> str:
        url: str | None = self.__dict__.get("_contract_url")
        if url is None:
            url = self.__dict__["_contract_url"] = self.executor_url()
        return url

    def _engine(
        self,
        store: str,
        kit: ContractTools,
        *,
        working: bool,
        recover: bool = True,
        executor: Executor | None = None,
    ) -> TaskEngine:
        config = EngineConfig(
            executor=executor if executor is not None else self.executor(),
            run_tasks=working,
            lease_ttl=self.lease_ttl,
            claim_interval=0.2,
            input_poll_interval=0.5,
            recover_orphans=recover,
            immediate_results=False,
            no_worker_timeout=self.no_worker_timeout,
        )
        return TaskEngine(store, config=config, tools=kit.known if working else ())

    @asynccontextmanager
    async def _engines(
        self, tmp_path: Path, kit: ContractTools, *, working: bool = True, recover: bool = True
    ) -> AsyncIterator[tuple[TaskEngine, TaskEngine | None]]:
        """The serving engine and (with `working`) the working one, both running."""
        store = self.store_url(tmp_path)
        async with AsyncExitStack() as stack:
            serving = await stack.enter_async_context(
                self._engine(store, kit, working=False, recover=recover)
            )
            worker = None
            if working:
                worker = await stack.enter_async_context(
                    self._engine(store, kit, working=True, recover=recover)
                )
            yield serving, worker

    async def _until(self, check: Callable[[], Any], what: str) -> Any:
        """Poll `check()` (sync or async) until it returns something truthy; return that."""
        last: Any = None
        with anyio.move_on_after(self.timeout):
            while True:
                last = check()
                if hasattr(last, "__await__"):
                    last = await last
                if last:
                    return last
                await anyio.sleep(0.05)
        raise AssertionError(f"timed out after {self.timeout} s waiting for {what}; last: {last!r}")

    async def _status(self, engine: TaskEngine, task_id: str, *wanted: str) -> TaskRecord:
        """Poll `get` until the task's status is one of `wanted`; fail at once on another end."""

        async def reached() -> TaskRecord | None:
            record = await engine.get(task_id, owner=OWNER)
            if record.status in wanted:
                return record
            assert not record.terminal, f"the task ended {record.status}, not {wanted}: {record}"
            return None

        found: TaskRecord = await self._until(reached, f"task {task_id} to be {' or '.join(wanted)}")
        return found

    @staticmethod
    def _single_key(record: TaskRecord) -> str:
        keys = list(record.input_requests)
        assert len(keys) == 1, record.input_requests
        return keys[0]

    # -- the contract ------------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_a_zero_work_tool_completes_as_a_task(self, tmp_path: Path) -> None:
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, _):
            record = await serving.start(kit.quick, {"x": 21}, owner=OWNER)
            # never an immediate result: the serving engine runs no body, not even a quick one
            assert record.status == "working" and record.result is None, record
            assert record.runner is None, record
            done = await self._status(serving, record.task_id, "completed")
        assert done.result is not None, done
        assert done.result.get("structuredContent") == {"doubled": 42}, done.result
        assert kit.trace.count("quick") == 1, kit.trace.events

    @pytest.mark.anyio
    async def test_a_durable_body_asks_gets_its_answer_and_runs_each_step_once(self, tmp_path: Path) -> None:
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, _):
            record = await serving.start(kit.approve, {"label": "go"}, owner=OWNER)
            waiting = await self._status(serving, record.task_id, "input_required")
            key = self._single_key(waiting)
            assert "Apply plan-go?" in str(waiting.input_requests[key]), waiting.input_requests
            await serving.update(
                record.task_id, {key: {"action": "accept", "content": {"confirm": True}}}, owner=OWNER
            )
            done = await self._status(serving, record.task_id, "completed")
        assert done.result is not None and done.result.get("structuredContent") == {
            "outcome": "plan-go applied"
        }
        assert (kit.trace.count("prepare"), kit.trace.count("apply")) == (1, 1), kit.trace.events

    @pytest.mark.anyio
    async def test_cancel_reaches_the_body(self, tmp_path: Path) -> None:
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, _):
            record = await serving.start(kit.hold, {}, owner=OWNER)
            await self._until(lambda: kit.trace.count("hold") == 1, "the body to start on the worker")
            await serving.cancel(record.task_id, owner=OWNER)
            cancelled = await serving.get(record.task_id, owner=OWNER)
            assert cancelled.status == "cancelled", cancelled
            await self._until(lambda: "hold stopped" in kit.trace.events, "the body to observe the cancel")
            again = await serving.get(record.task_id, owner=OWNER)
        assert again.status == "cancelled", again
        assert kit.trace.events == ["hold", "hold stopped"], kit.trace.events

    @pytest.mark.anyio
    async def test_without_a_working_engine_nothing_runs_until_one_starts(self, tmp_path: Path) -> None:
        kit = contract_tools()
        store = self.store_url(tmp_path)
        async with self._engine(store, kit, working=False) as serving:
            record = await serving.start(kit.quick, {}, owner=OWNER)
            watched_until = time.monotonic() + self.quiet
            while time.monotonic() < watched_until:  # a bounded negative check, not a synchronisation
                current = await serving.get(record.task_id, owner=OWNER)
                assert current.status == "working" and current.runner is None, current
                assert kit.trace.events == [], kit.trace.events
                await anyio.sleep(0.1)
            async with self._engine(store, kit, working=True):
                done = await self._status(serving, record.task_id, "completed")
        assert done.result is not None and done.result.get("structuredContent") == {"doubled": 2}
        assert kit.trace.count("quick") == 1, kit.trace.events

    @pytest.mark.anyio
    async def test_submit_is_idempotent(self, tmp_path: Path) -> None:
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, worker):
            assert serving.executor is not None and worker is not None
            record = await serving.start(kit.hold, {}, owner=OWNER)  # submitted once by start
            await self._until(lambda: kit.trace.count("hold") == 1, "the body to start")
            await serving.executor.submit(record)  # while it runs
            await serving.executor.submit(record)
            kit.trace.release.set()
            done = await self._status(serving, record.task_id, "completed")
            await serving.executor.submit(record)  # once it ended
            # a later task on the same executor ran to its end: the repeated submits had their chance
            barrier = await serving.start(kit.quick, {}, owner=OWNER)
            await self._status(serving, barrier.task_id, "completed")
            assert await worker.run_task(record.task_id) == "completed"  # a repeated run is harmless
            final = await serving.get(record.task_id, owner=OWNER)
        assert done.result is not None and done.result.get("structuredContent") == {"held": True}
        assert final.status == "completed" and final.result == done.result, final
        assert kit.trace.count("hold") == 1, kit.trace.events

    @pytest.mark.anyio
    async def test_reconcile_submits_a_task_never_submitted(self, tmp_path: Path) -> None:
        kit = contract_tools()
        # no background recovery: only the explicit reconcile below may submit the record
        async with self._engines(tmp_path, kit, recover=False) as (serving, _):
            assert serving.executor is not None
            # written straight into the store an hour ago, as by a server that died before its submit
            record = TaskRecord(
                task_id=f"contract-{uuid.uuid4().hex}",
                owner=OWNER,
                tool=kit.quick.name,
                arguments={"x": 5},
                created_at=time.time() - 3600,
                poll_interval_ms=100,
            )
            await serving.store.create(record)
            active = await serving.store.list_active()
            live = set(await serving.store.live_runners())
            assert [r.task_id for r in active] == [record.task_id], active
            assert await serving.executor.reconcile(active, live) == 1
            done = await self._status(serving, record.task_id, "completed")
            again = await serving.executor.reconcile(await serving.store.list_active(), live)
        assert again == 0
        assert done.result is not None and done.result.get("structuredContent") == {"doubled": 10}
        assert kit.trace.count("quick") == 1, kit.trace.events

    @pytest.mark.anyio
    async def test_an_unknown_tool_fails_the_task_naming_it(self, tmp_path: Path) -> None:
        """No worker offers the tool: after `no_worker_timeout` the task fails naming it, and
        no body ran."""
        kit = contract_tools()
        async with self._engines(tmp_path, kit) as (serving, _):
            record = await serving.start(kit.unknown, {}, owner=OWNER)
            failed = await self._status(serving, record.task_id, "failed")
        assert failed.error is not None and "contract_unknown" in str(failed.error.get("message")), failed
        assert kit.trace.events == [], kit.trace.events
