"""`TaskEngine`: durable creation, transitions, input, cancellation, owners, TTL, poll limits, shutdown."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import (
    Client,
    RecordingStore,
    accept,
    opted_in_meta,
    serve,
    text_of,
    wait_for,
    wait_for_status,
    wait_idle,
)
from pydantic import BaseModel

from mcptasks import (
    Accepted,
    Elicit,
    EngineConfig,
    Limits,
    MemoryTaskStore,
    ProtocolError,
    Result,
    SqliteTaskStore,
    TaskContext,
    TaskNotFound,
    task_tool,
)
from mcptasks.errors import InvalidArguments, PollTooFast
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine, TasksProtocol
from mcptasks.stores import TaskRecord, TaskStore
from mcptasks.wire import EXTENSION_ID

pytestmark = pytest.mark.anyio

ACK = {"resultType": "complete"}


class Confirm(BaseModel):
    confirm: bool


@task_tool
async def quick(n: int = 1):
    yield Result(n)


@task_tool
async def ask_once():
    answer = yield Elicit("value?")
    yield Result(answer.data if isinstance(answer, Accepted) else None)


@task_tool(poll_interval=60)
async def parked():
    await anyio.sleep_forever()
    yield Result(None)  # pragma: no cover


class LingeringStore(RecordingStore):
    """Reads ignore TTL expiry, so a test can watch what the engine writes after a TTL elapses.

    (A real store hides expired records; the engine stops a body shortly before its TTL, and on a
    slow machine the record may already be invisible by the time the failure is written.)
    """

    def __init__(self) -> None:
        super().__init__()
        self.latest: dict[str, TaskRecord] = {}

    async def create(self, record: TaskRecord) -> TaskRecord:
        stored = await super().create(record)
        self.latest[stored.task_id] = dataclasses.replace(stored)
        return stored

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        accepted = await super().replace(record, expected_version=expected_version)
        if accepted:
            self.latest[record.task_id] = dataclasses.replace(record)
        return accepted

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        record = self.latest.get(task_id)
        if record is None or (owner is not None and record.owner != owner):
            return None
        return dataclasses.replace(record)


# -- creation --------------------------------------------------------------------------------


async def test_record_is_stored_before_start_returns_and_before_the_body_runs() -> None:
    events: list[str] = []

    class OrderStore(MemoryTaskStore):
        async def create(self, record: TaskRecord) -> TaskRecord:
            stored = await super().create(record)
            events.append("created")
            return stored

    @task_tool
    async def tool():
        events.append("body")
        yield Result(None)

    store = OrderStore()
    async with serve(tool, store=store) as (engine, _):
        record = await engine.start(tool, {}, owner="o")
        assert events == ["created"]
        stored = await store.get(record.task_id)
        assert stored is not None
        assert (stored.status, stored.owner, stored.tool) == ("working", "o", "tool")
        await wait_for_status(engine, record.task_id, "completed", owner="o")
    assert events == ["created", "body"]


async def test_task_ids_are_unique_and_carry_at_least_256_bits() -> None:
    async with serve(quick) as (engine, _):
        ids = [(await engine.start(quick, {}, owner="o")).task_id for _ in range(200)]
    assert len(set(ids)) == len(ids)
    for task_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43,}", task_id), task_id


async def test_invalid_arguments_create_nothing() -> None:
    store = MemoryTaskStore()
    async with serve(quick, store=store) as (engine, _):
        with pytest.raises(InvalidArguments, match="n"):
            await engine.start(quick, {"n": "many"}, owner="o")
    assert len(store) == 0


async def test_start_outside_async_with_is_a_runtime_error() -> None:
    engine = TaskEngine()
    with pytest.raises(RuntimeError, match="async with"):
        await engine.start(quick, {}, owner="o")
    async with engine:
        pass
    with pytest.raises(RuntimeError, match="async with"):
        await engine.start(quick, {}, owner="o")


def test_engine_option_validation() -> None:
    with pytest.raises(ValueError, match="poll_limit"):
        EngineConfig(poll_limit="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll_tolerance"):
        EngineConfig(poll_tolerance=0)
    with pytest.raises(ValueError, match="store URL"):
        TaskEngine("redis+nope://x")


async def test_engine_cannot_be_entered_twice_at_once() -> None:
    engine = TaskEngine()
    async with engine:
        with pytest.raises(RuntimeError, match="already running"):
            await engine.__aenter__()


# -- transitions -----------------------------------------------------------------------------


async def test_transitions_through_input_to_completed() -> None:
    store = RecordingStore()
    async with serve(ask_once, store=store) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("ask_once")
        await client.answer_only(task_id, accept({"v": 1}))
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    assert store.statuses(task_id) == ["working", "input_required", "working", "completed"]


async def test_transition_working_to_failed() -> None:
    @task_tool
    async def tool():
        yield "x"
        raise ProtocolError(-32000, "no")

    store = RecordingStore()
    async with serve(tool, store=store) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.finish(task_id)
    assert store.statuses(task_id) == ["working", "failed"]


async def test_updated_at_never_moves_backwards() -> None:
    @task_tool
    async def tool():
        for i in range(5):
            yield f"step {i}"
        answer = yield Elicit("v?")
        yield Result(answer.data)

    store = RecordingStore()
    async with serve(tool, store=store, limits=Limits(status_interval=0)) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.answer_only(task_id, accept({}))
        await client.finish(task_id)
    history = store.of(task_id)
    assert len(history) >= 8
    stamps = [r.updated_at for r in history]
    assert stamps == sorted(stamps)
    assert all(r.created_at == history[0].created_at for r in history)
    assert stamps[0] >= history[0].created_at
    versions = [r.version for r in history]
    assert versions == list(range(versions[0], versions[0] + len(versions)))


async def test_update_moves_last_updated_at_forward() -> None:
    store = MemoryTaskStore()
    async with serve(ask_once, store=store) as (engine, _):
        old = TaskRecord(
            task_id="old-task",
            owner=ANONYMOUS_OWNER,
            tool="ask_once",
            status="input_required",
            created_at=time.time() - 60,
            input_requests={"input-1": {"method": "elicitation/create", "params": {}}},
            input_key_counter=1,
            runner=engine.instance_id,  # neither queued for a worker nor an orphan
        )
        await store.create(old)
        await engine.update("old-task", {"input-1": accept({})}, owner=ANONYMOUS_OWNER)
        after = await engine.get("old-task", owner=ANONYMOUS_OWNER)
    assert after.updated_at > old.updated_at
    assert after.status == "working"


# -- terminal finality -----------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
async def test_terminal_task_never_changes(ending: str) -> None:
    @task_tool
    async def tool(ending: str):
        if ending == "failed":
            raise ProtocolError(-32000, "failed on purpose")
        if ending == "cancelled":
            await anyio.sleep_forever()
        yield Result("done")

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool", {"ending": ending})
        if ending == "cancelled":
            await client.cancel(task_id)
        final = await client.finish(task_id)
        await wait_idle(engine)
        before = await engine.get(task_id, owner=ANONYMOUS_OWNER)
        assert await client.update(task_id, {"input-1": accept({}), "x": 1}) == ACK
        assert await client.cancel(task_id) == ACK
        assert await client.cancel(task_id) == ACK
        after = await engine.get(task_id, owner=ANONYMOUS_OWNER)
        again = await client.get(task_id)
    assert final["status"] == ending
    assert after == before
    assert again == final


# -- cancellation ----------------------------------------------------------------------------


async def test_cancel_while_working_runs_the_body_finally() -> None:
    entered = anyio.Event()
    cleaned = anyio.Event()

    @task_tool
    async def tool():
        try:
            entered.set()
            await anyio.sleep_forever()
            yield Result("unreachable")
        finally:
            cleaned.set()

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        with anyio.fail_after(10):
            await entered.wait()
        assert await client.cancel(task_id) == ACK
        assert (await client.get(task_id))["status"] == "cancelled"
        with anyio.fail_after(10):
            await cleaned.wait()
        await wait_idle(engine)
        final = await client.get(task_id)
    assert final["status"] == "cancelled"
    assert final["statusMessage"]
    assert "result" not in final and "error" not in final


async def test_cancel_right_after_start_stops_the_body() -> None:
    cleaned = anyio.Event()

    @task_tool
    async def tool() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.set()

    async with serve(tool) as (engine, _):
        record = await engine.start(tool, {}, owner="o")
        await engine.cancel(record.task_id, owner="o")
        with anyio.fail_after(10):
            await cleaned.wait()
        await wait_idle(engine)
        final = await engine.get(record.task_id, owner="o")
    assert final.status == "cancelled"


async def test_cancel_while_input_required() -> None:
    cleaned = anyio.Event()

    @task_tool
    async def tool():
        try:
            answer = yield Elicit("value?")
            yield Result(answer.data)
        finally:
            cleaned.set()

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (key,) = await client.input(task_id, count=1)
        assert await client.cancel(task_id) == ACK
        with anyio.fail_after(10):
            await cleaned.wait()
        await wait_idle(engine)
        assert await client.update(task_id, {key: accept({"late": True})}) == ACK
        final = await client.get(task_id)
        record = await engine.get(task_id, owner=ANONYMOUS_OWNER)
    assert final["status"] == "cancelled"
    assert "inputRequests" not in final
    assert record.input_requests == {} and record.input_responses == {}


async def test_cancel_coroutine_waiting_on_context_input() -> None:
    cleaned = anyio.Event()

    @task_tool
    async def tool(ctx: TaskContext) -> Any:
        try:
            return (await ctx.elicit("value?")).data
        finally:
            cleaned.set()

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.input(task_id, count=1)
        await client.cancel(task_id)
        with anyio.fail_after(10):
            await cleaned.wait()
        assert (await client.get(task_id))["status"] == "cancelled"


async def test_body_that_sets_status_after_cancel_is_stopped() -> None:
    cancelled = anyio.Event()
    reached: list[str] = []

    @task_tool
    async def tool():
        with anyio.CancelScope(shield=True):
            await cancelled.wait()
        reached.append("before status")
        yield "still going?"
        reached.append("after status")  # pragma: no cover
        yield Result("too late")  # pragma: no cover

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        await client.cancel(task_id)
        cancelled.set()
        await wait_idle(engine)
        final = await client.get(task_id)
    assert reached == ["before status"]
    assert final["status"] == "cancelled"
    assert final.get("statusMessage") != "still going?"


# -- concurrency -----------------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_racing_updates_and_cancel_end_consistently(store_kind: str, tmp_path: Path) -> None:
    store = MemoryTaskStore() if store_kind == "memory" else SqliteTaskStore(tmp_path / "t.db")

    @task_tool
    async def tool():
        answers = yield tuple(Elicit(f"q{i}?") for i in range(5))
        yield Result({"values": [a.data["i"] for a in answers]})

    async with serve(tool, store=store) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        keys = sorted(await client.input(task_id, count=5))
        acks: list[dict[str, Any]] = []

        async def answer(i: int) -> None:
            acks.append(await client.update(task_id, {keys[i % 5]: accept({"i": i})}))

        async def cancel() -> None:
            acks.append(await client.cancel(task_id))

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(answer, i)
                if i == 25:
                    tg.start_soon(cancel)
        final = await client.finish(task_id)
        await wait_idle(engine)
        settled = await client.get(task_id)
    assert acks == [ACK] * 51
    assert settled == final
    if final["status"] == "completed":
        values = final["result"]["structuredContent"]["values"]
        assert [v % 5 for v in values] == [0, 1, 2, 3, 4]
    else:
        assert final["status"] == "cancelled"
        assert "result" not in final and "error" not in final
        assert "result" not in final and "error" not in final


async def test_racing_updates_accept_exactly_one_answer_per_key() -> None:
    async with serve(ask_once) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("ask_once")
        (key,) = await client.input(task_id, count=1)
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(client.update, task_id, {key: accept({"i": i})})
        final = await client.finish(task_id)
    assert final["status"] == "completed"
    assert final["result"]["structuredContent"]["i"] in range(50)


async def test_many_tasks_run_concurrently() -> None:
    gate = anyio.Event()

    @task_tool
    async def tool(i: int):
        yield f"waiting {i}"
        await gate.wait()
        yield Result(i)

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        ids: list[str] = []

        async def start(i: int) -> None:
            ids.append(await client.start("tool", {"i": i}))

        async with anyio.create_task_group() as tg:
            for i in range(30):
                tg.start_soon(start, i)
        for task_id in ids:
            await wait_for(protocol, task_id, lambda t: "statusMessage" in t, what="first status")
        assert engine.active_runs == 30
        gate.set()
        finals = [await client.finish(task_id) for task_id in ids]
    assert sorted(f["result"]["structuredContent"]["result"] for f in finals) == list(range(30))


async def test_concurrent_context_requests_are_all_woken_by_their_answers() -> None:
    @task_tool
    async def tool(ctx: TaskContext) -> dict[str, Any]:
        answers: dict[str, Any] = {}

        async def ask(name: str) -> None:
            answers[name] = (await ctx.elicit(f"{name}?")).data

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")
            tg.start_soon(ask, "b")
        return answers

    async with serve(tool, input_poll_interval=3600) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        requests = await client.input(task_id, count=2)
        await client.update(task_id, {k: accept({"k": k}) for k in requests})
        await anyio.wait_all_tasks_blocked()
        task = await client.get(task_id)
        await client.cancel(task_id)
    assert task["status"] == "completed"


# -- owners ----------------------------------------------------------------------------------


async def test_foreign_owner_gets_the_unknown_task_error_for_every_operation() -> None:
    async with serve(ask_once) as (_, protocol):
        alice = Client(protocol, owner="alice")
        mallory = Client(protocol, owner="mallory")
        task_id = await alice.start("ask_once")
        (key,) = await alice.input(task_id, count=1)
        operations: list[Callable[[Client, str], Awaitable[Any]]] = [
            lambda c, t: c.get(t),
            lambda c, t: c.update(t, {key: accept({"forged": True})}),
            lambda c, t: c.cancel(t),
        ]
        for operation in operations:
            with pytest.raises(TaskNotFound) as foreign:
                await operation(mallory, task_id)
            with pytest.raises(TaskNotFound) as unknown:
                await operation(alice, "no-such-task")
            assert foreign.value.code == unknown.value.code == -32602
            assert foreign.value.message == unknown.value.message
            assert foreign.value.to_error() == {**unknown.value.to_error(), "data": {"taskId": task_id}}
        task = await alice.get(task_id)
    assert task["status"] == "input_required"
    assert set(task["inputRequests"]) == {key}


async def test_engine_level_owner_scoping() -> None:
    async with serve(parked) as (engine, _):
        record = await engine.start(parked, {}, owner="alice")
        for call in (
            engine.get(record.task_id, owner="bob"),
            engine.update(record.task_id, {}, owner="bob"),
            engine.cancel(record.task_id, owner="bob"),
        ):
            with pytest.raises(TaskNotFound):
                await call
        assert (await engine.get(record.task_id, owner="alice")).status == "working"


# -- input keys ------------------------------------------------------------------------------


async def test_keys_are_unique_over_the_task_life() -> None:
    @task_tool
    async def tool():
        for round_number in range(3):
            yield Elicit(f"confirm {round_number}?", schema=Confirm)
            yield Elicit("a?"), Elicit("b?")
        yield Result("done")

    async with serve(tool) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        issued: list[str] = []
        for round_number in range(3):
            for content in ({"confirm": "nope"}, {"confirm": True}):  # one rejected answer per round
                issued.append(await client.answer_only(task_id, accept(content), excluding=issued))
            pair = await client.input(task_id, count=2, excluding=issued)
            issued.extend(pair)
            await client.update(task_id, {k: accept({"round": round_number}) for k in pair})
        final = await client.finish(task_id)
        # Old keys stay dead after the task ended.
        assert await client.update(task_id, {k: accept({}) for k in issued}) == ACK
    assert final["status"] == "completed"
    assert len(issued) == 12
    assert len(set(issued)) == len(issued)


async def test_answers_for_unknown_answered_and_never_issued_keys_are_ignored() -> None:
    seen: list[Any] = []

    @task_tool
    async def tool():
        seen.append((yield Elicit("first?")).data)
        seen.append((yield Elicit("second?")).data)
        yield Result(None)

    async with serve(tool) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        (first,) = await client.input(task_id, count=1)
        # Unknown and never-issued keys (including the key the next request would plausibly get).
        guess = re.sub(r"\d+$", lambda m: str(int(m.group()) + 1), first)
        junk = {"bogus": accept({"x": 1}), "input-999": accept({"x": 2}), guess: accept({"x": 3})}
        assert await client.update(task_id, junk) == ACK
        record = await engine.get(task_id, owner=ANONYMOUS_OWNER)
        assert (record.status, set(record.input_requests), record.input_responses) == (
            "input_required",
            {first},
            {},
        )
        assert await client.update(task_id, {first: accept({"v": "real"})}) == ACK
        (second,) = await client.input(task_id, count=1, excluding=[first])
        # A second answer to an answered key is ignored too.
        assert await client.update(task_id, {first: accept({"v": "replayed"})}) == ACK
        task = await client.get(task_id)
        assert (task["status"], set(task["inputRequests"])) == ("input_required", {second})
        await client.update(task_id, {second: accept({"v": 2})})
        await client.finish(task_id)
    assert seen == [{"v": "real"}, {"v": 2}]


async def test_update_on_working_task_without_requests_is_acked_and_ignored() -> None:
    async with serve(parked) as (engine, protocol):
        client = Client(protocol)
        task_id = await client.start("parked")
        before = await engine.get(task_id, owner=ANONYMOUS_OWNER)
        assert await client.update(task_id, {"input-1": accept({})}) == ACK
        after = await engine.get(task_id, owner=ANONYMOUS_OWNER)
    assert after == before


class PausingListStore(MemoryTaskStore):
    """`list_active` can be held between taking its snapshot and returning it."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.snapshot_taken = anyio.Event()
        self.release = anyio.Event()

    async def list_active(self) -> list[TaskRecord]:
        snapshot = await super().list_active()
        if self.armed:
            self.snapshot_taken.set()
            await self.release.wait()
        return snapshot


async def test_task_started_during_a_recovery_pass_keeps_running() -> None:
    entered = anyio.Event()

    @task_tool
    async def tool() -> None:
        entered.set()
        await anyio.sleep_forever()

    store = PausingListStore()
    async with serve(tool, store=store) as (engine, _):
        store.armed = True
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.recover)
            with anyio.fail_after(10):
                await store.snapshot_taken.wait()
            record = await engine.start(tool, {}, owner="o")
            with anyio.fail_after(10):
                await entered.wait()
            store.release.set()
        store.armed = False
        await anyio.wait_all_tasks_blocked()
        after = await engine.get(record.task_id, owner="o")
    assert (after.status, after.error) == ("working", None)


# -- TTL -------------------------------------------------------------------------------------


async def test_ttl_is_reported_in_ms_and_null_when_unlimited() -> None:
    @task_tool(ttl=90)
    async def limited():
        yield Result(None)

    @task_tool(ttl=None)
    async def unlimited():
        yield Result(None)

    async with serve(limited, unlimited) as (_, protocol):
        client = Client(protocol)
        created = await client.call("limited")
        forever = await client.call("unlimited")
        task = await client.get(forever["taskId"])
    assert created["ttlMs"] == 90_000
    assert forever["ttlMs"] is None
    assert "ttlMs" in task and task["ttlMs"] is None


async def test_sweep_deletes_expired_records_only() -> None:
    @task_tool(ttl=60)
    async def limited():
        yield Result("x")

    @task_tool(ttl=None)
    async def unlimited():
        yield Result("y")

    async with serve(limited, unlimited) as (engine, protocol):
        client = Client(protocol)
        expiring = await client.start("limited")
        keeper = await client.start("unlimited")
        await client.finish(expiring)
        await client.finish(keeper)
        assert await engine.sweep() == 0
        assert (await client.get(expiring))["status"] == "completed"
        assert await engine.sweep(now=time.time() + 61) == 1
        with pytest.raises(TaskNotFound):
            await client.get(expiring)
        assert await engine.sweep(now=time.time() + 10**9) == 0
        assert (await client.get(keeper))["status"] == "completed"


async def test_body_running_past_its_timeout_is_stopped_and_failed_with_reason() -> None:
    stopped = anyio.Event()

    @task_tool(timeout=0.2)
    async def tool():
        try:
            await anyio.sleep_forever()
            yield Result(None)
        finally:
            stopped.set()

    store = LingeringStore()
    async with serve(tool, store=store) as (engine, _):
        record = await engine.start(tool, {}, owner="o")
        with anyio.fail_after(10):
            await stopped.wait()
        final = await wait_for_status(engine, record.task_id, "failed", owner="o")
    assert final.error["code"] == -32603
    assert final.error["data"] == {"reason": "timeout", "timeoutMs": 200}
    assert "timeout (200 ms)" in final.error["message"]
    assert final.ttl_ms == 3_600_000  # the record is kept as usual
    assert store.statuses(record.task_id) == ["working", "failed"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_body_running_past_its_ttl_completes_and_is_then_expired(kind: str, tmp_path: Path) -> None:
    store: TaskStore = MemoryTaskStore() if kind == "memory" else SqliteTaskStore(tmp_path / "tasks.db")

    @task_tool(ttl=3)
    async def tool():
        created = time.time()
        while time.time() < created + 4.5:  # well past the first expiry
            yield "working"
            await anyio.sleep(0.25)
        yield Result("done")

    async with serve(tool, store=store) as (engine, _):
        record = await engine.start(tool, {}, owner="o")
        final = await wait_for_status(engine, record.task_id, "completed", owner="o")
        ended = final.updated_at
        assert final.result is not None and final.result["content"][0]["text"] == "done"
        # Kept one ttl past its end: not swept before that, swept at it.
        assert final.expires_at is not None and final.expires_at >= ended + 3
        assert await engine.sweep(now=ended + 2.5) == 0
        assert (await engine.get(record.task_id, owner="o")).status == "completed"
        assert await engine.sweep(now=final.expires_at) == 1
        assert await engine.store.get(record.task_id) is None


async def test_task_ending_within_its_ttl_keeps_its_expiry_from_creation() -> None:
    @task_tool(ttl=600)
    async def tool() -> str:
        return "quick"

    async with serve(tool) as (engine, _):
        record = await engine.start(tool, {}, owner="o")
        final = await wait_for_status(engine, record.task_id, "completed", owner="o")
    assert final.ttl_ms == 600_000
    assert final.expires_at == record.created_at + 600


# -- poll limiting ---------------------------------------------------------------------------


async def test_poll_limit_reject_answers_poll_too_fast_with_retry_after() -> None:
    async with serve(parked, poll_limit="reject") as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("parked")
        other = await client.start("parked")
        await client.get(task_id)
        with pytest.raises(PollTooFast) as info:
            await client.get(task_id)
        await client.get(other)  # limits are per task
        await client.cancel(task_id)
        for _ in range(3):  # a terminal task is never throttled
            assert (await client.get(task_id))["status"] == "cancelled"
    error = info.value.to_error()
    assert error["code"] == -32000
    assert error["data"]["taskId"] == task_id
    retry = error["data"]["retryAfterMs"]
    assert isinstance(retry, int) and 0 < retry <= 30_000
    assert str(retry) in error["message"]


async def test_poll_limit_delay_holds_the_early_poll_back() -> None:
    async with serve(parked, poll_limit="delay") as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("parked")
        await client.get(task_id)
        answered: list[dict[str, Any]] = []

        async def poll() -> None:
            answered.append(await client.get(task_id))

        async with anyio.create_task_group() as tg:
            tg.start_soon(poll)
            await anyio.wait_all_tasks_blocked()
            assert answered == []  # waiting out ~30 s, not rejected
            tg.cancel_scope.cancel()


async def test_poll_limit_delay_serves_the_early_poll() -> None:
    @task_tool(poll_interval=0.02)
    async def tool():
        await anyio.sleep_forever()
        yield Result(None)  # pragma: no cover

    async with serve(tool, poll_limit="delay") as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("tool")
        for _ in range(3):
            with anyio.fail_after(10):
                assert (await client.get(task_id))["status"] == "working"


async def test_poll_limit_off_serves_every_poll() -> None:
    async with serve(parked) as (_, protocol):
        client = Client(protocol)
        task_id = await client.start("parked")
        for _ in range(20):
            assert (await client.get(task_id))["status"] == "working"


async def test_adaptive_poll_interval_grows_with_age() -> None:
    engine = TaskEngine(config=EngineConfig(adaptive_poll_max=60))
    now = time.time()

    def aged(seconds: float, **changes: Any) -> TaskRecord:
        return TaskRecord(
            task_id=f"t{seconds}",
            owner="o",
            tool="t",
            poll_interval_ms=1000,
            created_at=now - seconds,
            **changes,
        )

    young, old, ancient = (engine.poll_interval_ms(aged(s)) for s in (0, 300, 10**6))
    assert young == 1000
    assert 30_000 <= old < 60_000
    assert ancient == 60_000
    assert engine.poll_interval_ms(aged(300, status="completed")) == 1000
    assert TaskEngine().poll_interval_ms(aged(300)) == 1000


async def test_adaptive_poll_interval_is_advertised_by_tasks_get() -> None:
    store = MemoryTaskStore()
    async with serve(parked, store=store, adaptive_poll_max=120) as (engine, protocol):
        client = Client(protocol)
        created = await client.call("parked")
        await store.create(
            TaskRecord(
                task_id="aged",
                owner=ANONYMOUS_OWNER,
                tool="parked",
                poll_interval_ms=1000,
                created_at=time.time() - 600,
                runner=engine.instance_id,
            )
        )
        aged = await client.get("aged")
    assert created["pollIntervalMs"] == 60_000
    assert aged["pollIntervalMs"] >= 60_000


# -- shutdown --------------------------------------------------------------------------------


async def test_shutdown_fails_running_tasks() -> None:
    cleaned = anyio.Event()

    @task_tool
    async def tool():
        try:
            await anyio.sleep_forever()
            yield Result(None)
        finally:
            cleaned.set()

    store = MemoryTaskStore()
    engine = TaskEngine(store, config=EngineConfig(immediate_results=False))
    protocol = TasksProtocol(engine, [tool, ask_once])
    async with engine:
        client = Client(protocol)
        working = await client.start("tool")
        waiting = await client.start("ask_once")
        await client.input(waiting, count=1)
        finished = await client.start("ask_once")
        await client.answer_only(finished, accept({}))
        await client.finish(finished)
    assert cleaned.is_set()
    assert engine.active_runs == 0
    for task_id in (working, waiting):
        record = await store.get(task_id)
        assert record is not None
        assert record.status == "failed"
        assert record.error is not None and "shut down" in record.error["message"]
        assert record.input_requests == {}
    done = await store.get(finished)
    assert done is not None and done.status == "completed"


# -- inline runs -----------------------------------------------------------------------------


async def test_inline_run_returns_the_plain_result_and_drops_status() -> None:
    @task_tool
    async def tool(n: int):
        yield "status nobody sees"
        yield Result({"doubled": n * 2})

    store = MemoryTaskStore()
    async with serve(tool, store=store) as (_, protocol):
        result = await protocol.call_tool("tool", {"n": 4}, meta={})
    assert result == {
        "resultType": "complete",
        "content": [{"type": "text", "text": '{"doubled":8}'}],
        "structuredContent": {"doubled": 8},
        "isError": False,
    }
    assert len(store) == 0


async def test_inline_context_has_no_task_id() -> None:
    ids: list[str | None] = []

    @task_tool
    async def tool(ctx: TaskContext) -> str:
        ids.append(ctx.task_id)
        await ctx.status("dropped")
        return "ok"

    async with serve(tool) as (_, protocol):
        result = await protocol.call_tool("tool", {}, meta=None)
    assert ids == [None]
    assert text_of(result) == "ok"


async def test_inline_input_request_is_a_clear_tool_error() -> None:
    outcome = await TaskEngine().run_inline(ask_once, {}, owner="o")
    assert outcome.status == "completed"
    assert outcome.result is not None and outcome.result["isError"] is True
    message = text_of(outcome.result)
    assert "ask_once" in message
    assert "elicitation/create" in message
    assert EXTENSION_ID in message


async def test_inline_input_over_protocol_without_capabilities_is_unsupported() -> None:
    async with serve(ask_once) as (_, protocol):
        result = await protocol.call_tool("ask_once", {}, meta={})
    assert result["resultType"] == "complete"
    assert result == {"resultType": "complete", "content": [], "isError": False}


async def test_inline_protocol_error_is_raised() -> None:
    @task_tool
    async def tool() -> None:
        raise ProtocolError(-32000, "inline failure", {"k": 1})

    async with serve(tool) as (_, protocol):
        with pytest.raises(ProtocolError) as info:
            await protocol.call_tool("tool", {}, meta={})
    assert info.value.to_error() == {"code": -32000, "message": "inline failure", "data": {"k": 1}}


async def test_opted_in_call_runs_as_a_task_not_inline() -> None:
    store = MemoryTaskStore()
    async with serve(quick, store=store) as (_, protocol):
        created = await protocol.call_tool("quick", {"n": 3}, meta=opted_in_meta())
    assert created["resultType"] == "task"
    assert len(store) == 1


class FlakyStore(MemoryTaskStore):
    """A memory store whose next `failures` heartbeats fail as if the server were unreachable."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.failed = anyio.Event()

    async def heartbeat(self, runner: str, ttl: float) -> None:
        if self.failures > 0:
            self.failures -= 1
            if self.failures == 0:
                self.failed.set()
            raise ConnectionError("store unreachable (simulated)")
        await super().heartbeat(runner, ttl)


async def test_a_failing_background_duty_does_not_stop_the_engine() -> None:
    store = FlakyStore()

    @task_tool
    async def quick() -> str:
        await anyio.lowlevel.checkpoint()
        return "done"

    engine = TaskEngine(store, config=EngineConfig(lease_ttl=0.03, immediate_results=False))
    async with engine:  # the start-up heartbeat succeeds; the next three periodic ones fail
        store.failures = 3
        with anyio.fail_after(10):
            await store.failed.wait()
        protocol = TasksProtocol(engine, [quick])
        created = await protocol.call_tool("quick", {}, meta=opted_in_meta())
        task = await wait_for_status(protocol, created["taskId"], {"completed"})
    assert task["result"]["content"][0]["text"] == "done"
