"""Containment in process (asyncio and trio): limits, status coalescing, `def` bodies and their
cancellation, the blocked-loop watchdog, bodies that ignore cancellation, inline runs."""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

import anyio
import pytest
from helpers import Client, RecordingStore, accept, parked, serve

from mcptasks import Delegate, Elicit, EngineConfig, Limits, ProtocolError, Result, TaskContext, task_tool
from mcptasks.errors import CancelRequested, TooManyTasks
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine, TasksProtocol

pytestmark = pytest.mark.anyio

WAIT = 20.0


async def test_creates_over_the_owner_limit_are_refused_and_create_nothing() -> None:
    gate = anyio.Event()
    limits = Limits(max_active_per_owner=2, retry_after=1.5)
    async with serve(parked(gate), limits=limits) as (engine, protocol):
        alice, bob = Client(protocol, owner="alice"), Client(protocol, owner="bob")
        first = [await alice.start("park") for _ in range(2)]
        with pytest.raises(TooManyTasks) as refused:
            await alice.call("park")
        error = refused.value.to_error()
        assert error["code"] == -32000
        assert error["data"] == {
            "reason": "too_many_tasks",
            "retryAfterMs": 1500,
            "limit": 2,
            "scope": "owner",
        }
        assert (
            "Too many active tasks: you have reached the per-owner limit of 2 running tasks"
            in error["message"]
        )
        assert engine.active_runs == 2
        await bob.start("park")  # another owner is not affected
        await alice.cancel(first[0])
        await alice.finish(first[0])
        with anyio.fail_after(WAIT):
            while True:  # the cancelled body's slot frees once its run ends
                try:
                    await alice.start("park")
                    break
                except TooManyTasks:
                    await anyio.sleep(0.01)
        gate.set()


async def test_creates_over_the_server_limit_are_refused() -> None:
    gate = anyio.Event()
    async with serve(parked(gate), limits=Limits(max_active=1)) as (_, protocol):
        await Client(protocol, owner="a").start("park")
        with pytest.raises(ProtocolError, match="the server limit of 1 running tasks") as refused:
            await Client(protocol, owner="b").call("park")
        assert refused.value.data["scope"] == "server"
        gate.set()


async def test_a_status_flood_costs_few_writes_and_the_last_status_wins() -> None:
    @task_tool
    async def flood():
        for i in range(5000):
            yield f"step {i}"
        yield Elicit("done?")
        yield Result("ok")

    store = RecordingStore()
    async with serve(flood, store=store, limits=Limits(status_interval=0.5)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("flood")
        waiting = await client.wait(task_id, "input_required")
        assert waiting["statusMessage"] == "step 4999"
        await client.answer_only(task_id, accept({}))
        await client.finish(task_id)
    # 5,000 statuses, at most one write per 0.5 s plus the transitions: far fewer writes.
    assert len(store.of(task_id)) < 50


async def test_a_long_status_is_cut_to_the_limit() -> None:
    @task_tool
    async def long_status():
        yield "x" * 100
        yield Elicit("?")

    async with serve(long_status, limits=Limits(max_status_length=10)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("long_status")
        task = await client.wait(task_id, "input_required")
        assert task["statusMessage"] == "x" * 9 + "…"


async def test_a_def_function_sees_ctx_cancelled() -> None:
    running, stopped = threading.Event(), threading.Event()

    @task_tool
    def loop(ctx: TaskContext) -> str:
        running.set()
        try:
            while True:
                ctx.check_cancelled()
                time.sleep(0.005)
        except CancelRequested:
            stopped.set()
            raise

    async with serve(loop) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("loop")
        assert await anyio.to_thread.run_sync(running.wait, WAIT)
        await client.cancel(task_id)
        assert await anyio.to_thread.run_sync(stopped.wait, WAIT)
        assert (await client.get(task_id))["status"] == "cancelled"


async def test_a_def_generator_is_stopped_at_its_next_yield() -> None:
    running, cleaned = threading.Event(), threading.Event()
    seen: list[str] = []

    @task_tool
    def steps():
        running.set()
        try:
            i = 0
            while True:
                i += 1
                time.sleep(0.002)
                yield f"step {i}"
        except BaseException as exc:
            seen.append(type(exc).__name__)
            raise
        finally:
            cleaned.set()

    async with serve(steps, limits=Limits(status_interval=0)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("steps")
        assert await anyio.to_thread.run_sync(running.wait, WAIT)
        await client.cancel(task_id)
        assert await anyio.to_thread.run_sync(cleaned.wait, WAIT)
    assert seen and seen[0] in ("CancelRequested", "GeneratorExit")


async def test_def_bodies_share_a_bounded_thread_pool() -> None:
    inside = 0
    most = 0
    lock = threading.Lock()

    @task_tool
    def busy() -> str:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.05)
        with lock:
            inside -= 1
        return "ok"

    async with serve(busy, limits=Limits(threads=2)) as (_, protocol):
        client = Client(protocol)
        ids = [await client.start("busy") for _ in range(6)]
        for task_id in ids:
            assert (await client.finish(task_id))["status"] == "completed"
    assert most <= 2


async def test_the_watchdog_names_an_async_body_that_blocks_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @task_tool
    async def blocker():
        time.sleep(0.6)  # noqa: ASYNC251 - the point of this body
        yield Result("done")

    caplog.set_level(logging.WARNING, logger="mcptasks")
    async with serve(blocker, limits=Limits(blocking_threshold=0.1)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("blocker")
        await client.finish(task_id)
    warnings = [r.getMessage() for r in caplog.records if "blocked the event loop" in r.getMessage()]
    assert warnings and "'blocker'" in warnings[0] and task_id in warnings[0], caplog.text
    assert "def' body" in warnings[0]


async def test_the_watchdog_names_a_coroutine_body_and_a_delegated_helper_that_block_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @task_tool
    async def blocking_coroutine() -> str:
        time.sleep(0.6)  # noqa: ASYNC251 - the point of this body
        return "done"

    async def helper():
        yield "helping"
        time.sleep(0.6)  # noqa: ASYNC251 - the point of this helper
        yield Result("helped")

    @task_tool
    async def delegating():
        value = yield Delegate(helper())
        yield Result(value)

    caplog.set_level(logging.WARNING, logger="mcptasks")
    async with serve(blocking_coroutine, delegating, limits=Limits(blocking_threshold=0.1)) as (_, protocol):
        client = Client(protocol)
        for tool in ("blocking_coroutine", "delegating"):
            task_id = await client.start(tool)
            await client.finish(task_id)
            warnings = [r.getMessage() for r in caplog.records if "blocked the event loop" in r.getMessage()]
            assert any(f"'{tool}'" in w and task_id in w for w in warnings), caplog.text


async def test_shutdown_reports_bodies_ignoring_cancellation(caplog: pytest.LogCaptureFixture) -> None:
    started = anyio.Event()

    @task_tool
    async def stubborn():
        yield "running"
        started.set()
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            try:
                await anyio.sleep(0.01)
            except anyio.get_cancelled_exc_class():
                pass
        yield Result("late")

    caplog.set_level(logging.WARNING, logger="mcptasks")
    engine = TaskEngine(config=EngineConfig(limits=Limits(cancel_grace=0.1), immediate_results=False))
    protocol = TasksProtocol(engine, [stubborn])
    async with engine:
        task_id = await Client(protocol).start("stubborn")
        with anyio.fail_after(WAIT):
            await started.wait()
    assert "ignore cancellation" in caplog.text and "'stubborn'" in caplog.text, caplog.text
    record = await engine.store.get(task_id)
    assert record is not None


async def test_an_inline_body_raising_keyboard_interrupt_is_an_error_reply() -> None:
    @task_tool
    async def interrupt():
        raise KeyboardInterrupt
        yield

    async with serve(interrupt) as (_, protocol):
        with pytest.raises(ProtocolError, match="raised KeyboardInterrupt"):
            await protocol.call_tool("interrupt", {}, meta=None, owner=ANONYMOUS_OWNER)


async def test_cancelling_an_inline_call_still_propagates() -> None:
    entered = anyio.Event()

    @task_tool
    async def slow():
        entered.set()
        await anyio.sleep_forever()
        yield

    async with serve(slow) as (_, protocol):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(functools.partial(protocol.call_tool, "slow", {}, meta=None))
                await entered.wait()
                scope.cancel()
        assert scope.cancelled_caught


async def test_a_body_raising_system_exit_before_its_task_exists(meta: dict[str, Any]) -> None:
    @task_tool(input_before_task=True)
    async def early():
        raise SystemExit(2)
        yield

    async with serve(early) as (engine, protocol):
        with pytest.raises(ProtocolError, match="raised SystemExit: 2") as refused:
            await protocol.call_tool("early", {}, meta=meta)
        assert refused.value.data == {"reason": "aborted", "exception": "SystemExit"}
        assert engine.active_runs == 0


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("threads", 0, "must be positive"),
        ("threads", 2.5, "must be a whole number"),
        ("max_result_bytes", float("inf"), "must be a finite number"),
        ("status_interval", -1, "must be positive"),
        ("max_active", True, "must be a finite number"),
    ],
)
def test_limits_reject_nonsense(field: str, value: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=f"Limits.{field} {problem}"):
        Limits(**{field: value})


def test_limits_accept_none_for_unbounded_and_zero_status_interval() -> None:
    limits = Limits(max_active=None, max_active_per_owner=None, blocking_threshold=None, status_interval=0)
    assert limits.max_active is None and limits.status_interval == 0


async def test_a_yielded_value_that_contains_itself_fails_the_task_instead_of_hanging() -> None:
    loop: list[Any] = []
    loop.append(loop)

    @task_tool
    async def asks_a_cycle():
        yield Elicit("q", {"type": "object", "properties": {}, "x": loop})

    async with serve(asks_a_cycle) as (_, protocol):
        client = Client(protocol)
        with anyio.fail_after(10):
            final = await client.finish(await client.start("asks_a_cycle"))
    assert final["status"] == "failed" and final["error"]["data"] == {"reason": "invalid_value"}
    assert "requestedSchema.x[0] contains itself (a cycle)" in final["error"]["message"]
