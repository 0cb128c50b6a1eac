"""`Retention` and `Wakeups`: the engine duties that keep the records of running bodies from
expiring and wake bodies waiting for input to re-read their record; and `TimerHeap`, the heap of
timed entries both keep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import anyio
import pytest
from helpers import serve, wait_for_status

from mcptasks import Accepted, Elicit, Result, task_tool
from mcptasks._runtime.retention import Retention, margin_of
from mcptasks._runtime.run import TaskRun
from mcptasks._runtime.timers import COMPACT_AFTER, Timer, TimerHeap
from mcptasks._runtime.wakeups import Wakeups

pytestmark = pytest.mark.anyio


class FakeRun:
    """What `Retention` uses of a `TaskRun`: its expiry, its schedule slot and `renew`."""

    def __init__(self, task_id: str, expires_at: float | None, *, fails: int = 0) -> None:
        self.task_id = task_id
        self.expires_at = expires_at
        self.renew_at: float | None = None
        self.renewals = 0
        self.fails = fails
        self.renewed = anyio.Event()

    async def renew(self, ttl_ms: int) -> float | None:
        self.renewals += 1
        self.renewed.set()
        if self.fails:
            self.fails -= 1
            raise OSError("store unreachable")
        return time.time() + 3600  # the next renewal is far away


def fake(task_id: str, expires_at: float | None, **kwargs: Any) -> TaskRun:
    return cast(TaskRun, FakeRun(task_id, expires_at, **kwargs))


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110 - the duty's state has no event to wait on
            await anyio.sleep(0.01)


def hosted(runs: set[str]) -> Any:
    return lambda run: run.task_id in runs


async def test_due_runs_are_renewed_and_rescheduled_ended_ones_are_not() -> None:
    live = {"a", "b"}
    retention = Retention(hosted(live))
    past = time.time() - 1
    a, b, gone = fake("a", past), fake("b", past), fake("gone", past)
    for run in (a, b, gone):
        retention.keep(run, 60_000)
    retention.forget(gone)
    assert len(retention) == 2
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(retention.run_forever)
        with anyio.fail_after(10):
            await cast(FakeRun, a).renewed.wait()
            await cast(FakeRun, b).renewed.wait()
        await until(lambda: a.renew_at is not None and b.renew_at is not None)
        task_group.cancel_scope.cancel()
    assert cast(FakeRun, gone).renewals == 0
    for run in (a, b):
        assert cast(FakeRun, run).renewals == 1
        assert run.renew_at is not None and run.renew_at > time.time() + 3000  # new expiry - margin
    assert len(retention) == 2


async def test_a_run_added_while_sleeping_wakes_the_duty_when_it_is_due_earlier() -> None:
    retention = Retention(hosted({"late", "soon"}))
    late = fake("late", time.time() + 3600)
    retention.keep(late, 60_000)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(retention.run_forever)
        await anyio.lowlevel.checkpoint()
        soon = fake("soon", time.time())
        retention.keep(soon, 60_000)
        with anyio.fail_after(10):
            await cast(FakeRun, soon).renewed.wait()
        task_group.cancel_scope.cancel()
    assert cast(FakeRun, late).renewals == 0


class StuckRun(FakeRun):
    """A run whose renewal hangs until `release` is set (a store call that does not answer)."""

    def __init__(self, task_id: str, expires_at: float) -> None:
        super().__init__(task_id, expires_at)
        self.release = anyio.Event()

    async def renew(self, ttl_ms: int) -> float | None:
        self.renewed.set()
        await self.release.wait()
        return await super().renew(ttl_ms)


async def test_a_hanging_renewal_does_not_hold_up_the_others() -> None:
    retention = Retention(hosted({"stuck", "later"}))
    stuck = StuckRun("stuck", time.time() - 1)
    retention.keep(cast(TaskRun, stuck), 60_000)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(retention.run_forever)
        with anyio.fail_after(10):
            await stuck.renewed.wait()
        later = fake("later", time.time())
        retention.keep(later, 60_000)
        with anyio.fail_after(10):
            await cast(FakeRun, later).renewed.wait()
        stuck.release.set()
        await until(lambda: stuck.renew_at is not None)
        task_group.cancel_scope.cancel()


async def test_a_failed_renewal_is_retried_half_a_margin_later() -> None:
    retention = Retention(hosted({"a"}))
    run = fake("a", time.time() - 1, fails=1)
    retention.keep(run, 4_000)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(retention.run_forever)
        with anyio.fail_after(10):
            await cast(FakeRun, run).renewed.wait()
        await until(lambda: run.renew_at is not None)
        failed_at = time.time()
        assert run.renew_at is not None and run.renew_at <= failed_at + margin_of(4_000) / 2
        await until(lambda: cast(FakeRun, run).renewals == 2)
        task_group.cancel_scope.cancel()


async def test_a_run_without_expiry_is_not_scheduled_and_forgotten_runs_are_compacted() -> None:
    retention = Retention(hosted(set()))
    retention.keep(fake("unlimited", None), 60_000)
    assert len(retention) == 0
    runs = [fake(str(i), time.time() + 3600) for i in range(1000)]  # not due: nothing runs
    for run in runs:
        retention.keep(run, 60_000)
    for run in runs[:900]:
        retention.forget(run)
        retention.forget(run)  # twice is harmless
    assert len(retention) == 100
    assert retention._timers.held <= 2 * 100 + 65


async def test_records_of_running_bodies_are_kept_past_their_ttl() -> None:
    release = anyio.Event()

    @task_tool(ttl=1)
    async def tool():
        await release.wait()
        yield Result("done")

    async with serve(tool) as (engine, _):
        records = [await engine.start(tool, {}, owner="o") for _ in range(5)]

        async def all_renewed() -> bool:
            for record in records:
                current = await engine.store.get(record.task_id)
                if current is None or current.ttl_ms is None or current.ttl_ms <= 1000:
                    return False
            return True

        with anyio.fail_after(20):
            while not await all_renewed():  # noqa: ASYNC110 - polls the store, as a client would
                await anyio.sleep(0.05)
        release.set()
        for record in records:
            await wait_for_status(engine, record.task_id, "completed", owner="o")


async def test_wakeups_call_each_action_at_its_time_earliest_first() -> None:
    wakeups = Wakeups()
    late, soon = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(wakeups.run_forever)
        await anyio.lowlevel.checkpoint()
        wakeups.set_at(anyio.current_time() + 3600, late.set)
        wakeups.set_at(anyio.current_time(), soon.set)  # earlier than the one the duty sleeps for
        with anyio.fail_after(10):
            await soon.wait()
        task_group.cancel_scope.cancel()
    assert not late.is_set()
    assert len(wakeups) == 1


def test_cancelled_wakeups_are_forgotten_and_compacted() -> None:
    wakeups = Wakeups()
    entries = [wakeups.set_at(1000.0 + i, anyio.Event().set) for i in range(1000)]
    for entry in entries[:900]:
        wakeups.cancel(entry)
        wakeups.cancel(entry)  # twice is harmless
    assert len(wakeups) == 100
    assert wakeups._timers.held <= 2 * 100 + 65
    assert all(entry.action is None for entry in entries[:900])


async def test_a_body_waiting_for_input_sees_an_answer_written_without_a_notification() -> None:
    @task_tool
    async def ask():
        answer = yield Elicit("value?")
        yield Result(answer.data if isinstance(answer, Accepted) else None)

    async with serve(ask, input_poll_interval=0.05) as (engine, _):
        record = await engine.start(ask, {}, owner="o")
        asking = await wait_for_status(engine, record.task_id, "input_required", owner="o")
        (key,) = asking.input_requests
        answered = asking.evolve(
            input_requests={},
            input_responses={key: {"action": "accept", "content": {"value": "v"}}},
            status="working",
        )
        assert await engine.store.replace(answered, expected_version=asking.version)  # no publish
        final = await wait_for_status(engine, record.task_id, "completed", owner="o")
    assert final.result is not None and final.result["structuredContent"] == {"value": "v"}


class Entry(Timer):
    """A timer its test cancels by hand."""

    __slots__ = ("cancelled", "name")

    def __init__(self, at: float, name: str) -> None:
        super().__init__(at)
        self.name = name
        self.cancelled = False

    @property
    def live(self) -> bool:
        return not self.cancelled


def cancel(heap: TimerHeap[Entry], entry: Entry) -> None:
    entry.cancelled = True
    heap.cancelled()


def test_the_heap_hands_out_due_entries_earliest_first_and_skips_cancelled_ones() -> None:
    heap: TimerHeap[Entry] = TimerHeap()
    entries = {name: Entry(at, name) for name, at in (("c", 3.0), ("a", 1.0), ("b", 2.0), ("d", 4.0))}
    for entry in entries.values():
        heap.push(entry)
    cancel(heap, entries["b"])
    assert len(heap) == 3 and heap.held == 4
    assert [entry.name for entry in heap.take_due(3.0)] == ["a", "c"]
    assert len(heap) == 1 and heap.held == 1  # the cancelled entry went with the due ones
    assert heap.take_due(3.5) == []
    assert [entry.name for entry in heap.take_due(10.0)] == ["d"]
    assert len(heap) == 0


def test_the_heap_is_compacted_once_cancelled_entries_dominate() -> None:
    heap: TimerHeap[Entry] = TimerHeap()
    entries = [Entry(float(i), str(i)) for i in range(400)]
    for entry in entries:
        heap.push(entry)
    for entry in entries[:COMPACT_AFTER]:
        cancel(heap, entry)
    assert heap.held == 400  # a few dead entries are only dropped when due
    for entry in entries[COMPACT_AFTER:300]:
        cancel(heap, entry)
    assert len(heap) == 100
    assert heap.held < 2 * 100 + COMPACT_AFTER + 2
    assert [entry.name for entry in heap.take_due(1000.0)] == [str(i) for i in range(300, 400)]
    assert len(heap) == 0 and heap.held == 0


async def test_an_earlier_entry_wakes_the_sleeping_duty() -> None:
    heap: TimerHeap[Entry] = TimerHeap()
    heap.push(Entry(anyio.current_time() + 3600, "late"))
    taken: list[str] = []

    async def duty() -> None:
        while True:
            await heap.sleep(anyio.current_time)
            taken.extend(entry.name for entry in heap.take_due(anyio.current_time()))

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(duty)
        await anyio.wait_all_tasks_blocked()
        heap.push(Entry(anyio.current_time() + 3000, "not earliest"))  # does not wake the duty
        heap.push(Entry(anyio.current_time(), "soon"))
        await until(lambda: taken == ["soon"])
        task_group.cancel_scope.cancel()
    assert len(heap) == 2


async def test_the_duty_sleeps_without_entries_and_returns_at_once_when_one_is_due() -> None:
    heap: TimerHeap[Entry] = TimerHeap()
    with anyio.move_on_after(0.05) as scope:
        await heap.sleep(anyio.current_time)  # nothing scheduled: sleeps until woken
    assert scope.cancelled_caught
    heap.push(Entry(anyio.current_time() - 1, "due"))
    with anyio.fail_after(1):
        await heap.sleep(anyio.current_time)
