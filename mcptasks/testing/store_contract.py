"""The contract suite every `TaskStore` backend must pass (requires pytest and anyio's plugin).

Subclass `StoreContract` in a module pytest collects (the class name must start with `Test`) and
provide a `store` fixture that yields an open, *empty* store and closes it afterwards::

    import pytest
    from mcptasks.testing import StoreContract

    class TestMyStore(StoreContract):
        durable = True  # the store survives restarts: run the persistence tests too

        @pytest.fixture
        async def store(self, tmp_path):
            s = MyStore(tmp_path / "tasks")
            await s.open()
            yield s
            await s.close()

        async def reopen(self, store):
            s = MyStore(store.path)  # a second instance over the same data
            await s.open()
            return s

Records used here hold JSON-able data only (dicts, lists, str, int, float, bool, None), and every
field, floats included, must come back exactly as written. `close` must be idempotent (the
persistence tests close the fixture's store before the fixture does). The journal tests run when
the store implements `KeepsJournal` (`append_journal`, `read_journal`) and skip otherwise.
Nothing here synchronises by sleeping; waits are bounded by the generous `timeout`. To run on trio
as well, override the `anyio_backend` fixture (e.g. `params=["asyncio", "trio"]`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import anyio
import pytest

from mcptasks.stores.admin import TaskQuery
from mcptasks.stores.base import (
    CountsActive,
    KeepsJournal,
    KeepsOffers,
    KeepsOutbox,
    OperatorStore,
    StoreBase,
    TaskExists,
    TaskRecord,
    TaskStore,
    keeps_offers,
)

__all__ = ["StoreContract"]

UNICODE = "héllo — 世界 🎉 \u00a0\\\"'\n\t"


def _new_id() -> str:
    return f"contract-{uuid.uuid4().hex}"


def _record(**changes: Any) -> TaskRecord:
    fields: dict[str, Any] = {"task_id": _new_id(), "owner": "alice", "tool": "slow_tool"}
    fields.update(changes)
    return TaskRecord(**fields)


def _rich_record() -> TaskRecord:
    """A record with every field set to something a naive serialiser might get wrong."""
    created = time.time() - 12.345678
    return TaskRecord(
        task_id=_new_id(),
        owner="owner-" + UNICODE,
        tool="tool/with.dots-and_ünïcode",
        status="input_required",
        status_message=UNICODE,
        created_at=created,
        updated_at=created + 1.000001,
        ttl_ms=3_600_000,
        poll_interval_ms=250,
        arguments={
            "text": UNICODE,
            "n": 42,
            "big": 2**53 + 1,
            "neg": -7,
            "x": 0.1,
            "tiny": 1e-300,
            "flag": True,
            "off": False,
            "nothing": None,
            "empty": {},
            "list": [1, "two", 3.5, None, [], {"deep": {"deeper": [{"deepest": UNICODE}]}}],
        },
        result=None,
        error=None,
        input_requests={
            "k1": {
                "method": "elicitation/create",
                "params": {"message": UNICODE, "requestedSchema": {"type": "object", "properties": {}}},
            },
            "k2": {"method": "sampling/createMessage", "params": {"maxTokens": 10, "messages": []}},
        },
        input_responses={"k0": {"action": "accept", "content": {"answer": None, "ok": True}}},
        input_key_counter=2,
        runner="engine-" + UNICODE,
        client_capabilities={"elicitation": {"form": {}}, "roots": {"listChanged": True}, "sampling": {}},
        version=7,
    )


class StoreContract:
    """Base class of the store contract tests; subclass it and override `store` (and `reopen`)."""

    durable: ClassVar[bool] = False
    """Set True when the store keeps records across restarts; enables the persistence tests."""

    shared_notifications: ClassVar[bool] = False
    """Set True when `publish` on one store instance reaches `subscribe` on another (Redis,
    PostgreSQL): enables the cross-instance notification test (needs `reopen`)."""

    checks_open: ClassVar[bool] = False
    """Set True when the store refuses use before `open()` and after `close()` with a
    `RuntimeError` ("not open" / "closed") and can be opened again once closed: enables the
    lifecycle tests (needs `unopened`)."""

    counts_tool_errors: ClassVar[bool] = True
    """Set False when `stats()` leaves `TaskStats.tool_errors` None (the store cannot count the
    tasks that completed with `isError: true`: the dashboard then shows "-"); its `list_tasks`
    must still honour `TaskQuery.tool_error`."""

    timeout: ClassVar[float] = 10.0
    """Upper bound, in seconds, for waits on notifications (never a synchronisation delay)."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        """The async backend the tests run on."""
        return "asyncio"

    @pytest.fixture
    async def store(self) -> AsyncIterator[TaskStore]:
        """Override: yield an open, empty store, close it afterwards."""
        raise NotImplementedError("subclasses of StoreContract must define a `store` fixture")
        yield  # pragma: no cover

    async def reopen(self, store: TaskStore) -> TaskStore:
        """Override (durable stores): a new, open store instance over the same data as `store`.

        Called both while `store` is open (a second process) and after it was closed (a restart).
        The tests close the returned store.
        """
        raise NotImplementedError("durable stores must override StoreContract.reopen")

    def unopened(self, store: TaskStore) -> TaskStore:
        """Override (stores with `checks_open`): a new store instance configured like `store`
        (over the same data), not opened yet. The tests open and close it themselves."""
        raise NotImplementedError("stores with checks_open must override StoreContract.unopened")

    def _require_durable(self) -> None:
        if not self.durable:
            pytest.skip("the store is not durable")

    def _require_checks_open(self) -> None:
        if not self.checks_open:
            pytest.skip("the store does not check that it is open")

    # -- basics --------------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_is_a_task_store(self, store: TaskStore) -> None:
        assert isinstance(store, TaskStore)
        assert store.durable is self.durable, "the contract class's `durable` must match the store's"

    @pytest.mark.anyio
    async def test_create_then_get_returns_equal_record(self, store: TaskStore) -> None:
        record = _record(arguments={"a": 1})
        await store.create(record)
        assert await store.get(record.task_id) == record

    @pytest.mark.anyio
    async def test_create_and_get_copy_the_record(self, store: TaskStore) -> None:
        record = _record(status_message="original")
        await store.create(record)
        record.status_message = "changed after create"
        fetched = await store.get(record.task_id)
        assert fetched is not None and fetched is not record
        assert fetched.status_message == "original"
        fetched.status_message = "changed after get"
        again = await store.get(record.task_id)
        assert again is not None and again.status_message == "original"

    @pytest.mark.anyio
    async def test_duplicate_id_raises_task_exists(self, store: TaskStore) -> None:
        record = _record(status_message="first")
        await store.create(record)
        with pytest.raises(TaskExists):
            await store.create(_record(task_id=record.task_id, owner="bob", status_message="second"))
        stored = await store.get(record.task_id)
        assert stored is not None and stored.status_message == "first" and stored.owner == "alice"

    @pytest.mark.anyio
    async def test_get_unknown_returns_none(self, store: TaskStore) -> None:
        assert await store.get(_new_id()) is None
        assert await store.get(_new_id(), owner="alice") is None

    @pytest.mark.anyio
    async def test_get_is_scoped_to_owner(self, store: TaskStore) -> None:
        record = _record(owner="alice")
        await store.create(record)
        assert await store.get(record.task_id, owner="alice") == record
        assert await store.get(record.task_id, owner="mallory") is None
        assert await store.get(record.task_id, owner="") is None
        assert await store.get(record.task_id) == record

    @pytest.mark.anyio
    async def test_concurrent_creates_all_land(self, store: TaskStore) -> None:
        records = [_record(arguments={"i": i}) for i in range(100)]
        async with anyio.create_task_group() as tg:
            for record in records:
                tg.start_soon(store.create, record)
        for record in records:
            assert await store.get(record.task_id) == record

    @pytest.mark.anyio
    async def test_close_is_idempotent(self, store: TaskStore) -> None:
        await store.close()
        await store.close()

    # -- lifecycle (only when `checks_open = True`) ------------------------------------------------

    @pytest.mark.anyio
    async def test_use_before_open_raises(self, store: TaskStore) -> None:
        self._require_checks_open()
        fresh = self.unopened(store)
        record = _record()
        with pytest.raises(RuntimeError, match="not open"):
            await fresh.create(record)
        with pytest.raises(RuntimeError, match="not open"):
            await fresh.get(record.task_id)
        with pytest.raises(RuntimeError, match="not open"):
            await fresh.list_active()
        if self.shared_notifications:  # notifications travel through the store's server
            with pytest.raises(RuntimeError, match="not open"):
                async with fresh.subscribe():
                    pass  # pragma: no cover
        await fresh.close()  # closing a store that was never opened is fine

    @pytest.mark.anyio
    async def test_use_after_close_raises_and_a_closed_store_opens_again(self, store: TaskStore) -> None:
        self._require_checks_open()
        fresh = self.unopened(store)
        record = _record()
        await fresh.open()
        await fresh.open()  # already open: nothing happens
        try:
            await fresh.create(record)
        finally:
            await fresh.close()
        await fresh.close()
        with pytest.raises(RuntimeError, match="closed"):
            await fresh.get(record.task_id)
        if self.shared_notifications:
            with pytest.raises(RuntimeError, match="closed"):
                await fresh.publish(record.task_id)
        await fresh.open()
        try:
            found = await fresh.get(record.task_id)
        finally:
            await fresh.close()
        assert found == (record if self.durable else None)

    # -- compare-and-set -----------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_replace_with_current_version_succeeds_and_bumps_version(self, store: TaskStore) -> None:
        record = _record()
        await store.create(record)
        first = record.evolve(status="input_required", status_message="need input")
        assert await store.replace(first, expected_version=record.version)
        assert first.version == record.version + 1
        assert await store.get(record.task_id) == first
        second = first.evolve(status="working", status_message=None)
        assert await store.replace(second, expected_version=first.version)
        assert second.version == record.version + 2
        assert await store.get(record.task_id) == second

    @pytest.mark.anyio
    async def test_replace_with_stale_version_fails(self, store: TaskStore) -> None:
        record = _record()
        await store.create(record)
        winner = record.evolve(status_message="winner")
        assert await store.replace(winner, expected_version=0)
        loser = record.evolve(status_message="loser")
        assert not await store.replace(loser, expected_version=0)
        assert loser.version == 0
        assert not await store.replace(loser, expected_version=5)
        assert await store.get(record.task_id) == winner

    @pytest.mark.anyio
    async def test_replace_unknown_task_fails(self, store: TaskStore) -> None:
        record = _record()
        assert not await store.replace(record, expected_version=0)
        assert record.version == 0
        assert await store.get(record.task_id) is None

    @pytest.mark.anyio
    async def test_concurrent_replacers_exactly_one_wins(self, store: TaskStore) -> None:
        record = _record()
        await store.create(record)
        candidates = [record.evolve(status_message=f"racer {i}") for i in range(20)]
        won: list[TaskRecord] = []

        async def race(candidate: TaskRecord) -> None:
            if await store.replace(candidate, expected_version=record.version):
                won.append(candidate)

        async with anyio.create_task_group() as tg:
            for candidate in candidates:
                tg.start_soon(race, candidate)
        assert len(won) == 1
        assert won[0].version == record.version + 1
        assert await store.get(record.task_id) == won[0]
        assert all(c.version == record.version for c in candidates if c is not won[0])

    @pytest.mark.anyio
    @pytest.mark.parametrize("final", ["completed", "failed", "cancelled"])
    async def test_terminal_record_is_final(self, store: TaskStore, final: str) -> None:
        record = _record()
        await store.create(record)
        ended = record.evolve(status=final, result={"content": [], "isError": False})
        assert await store.replace(ended, expected_version=0)
        for change in (
            {"status": "working"},
            {"status": final, "result": {"content": [{"type": "text", "text": "rewritten"}]}},
            {"status": "cancelled", "status_message": "too late"},
        ):
            attempt = ended.evolve(**change)
            assert not await store.replace(attempt, expected_version=ended.version)
            assert attempt.version == ended.version
        assert await store.get(record.task_id) == ended

    # -- round trips ---------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_every_field_round_trips_through_create(self, store: TaskStore) -> None:
        record = _rich_record()
        await store.create(record)
        fetched = await store.get(record.task_id)
        assert fetched is not None
        assert fetched.to_dict() == record.to_dict()
        assert fetched == record

    @pytest.mark.anyio
    async def test_every_field_round_trips_through_replace(self, store: TaskStore) -> None:
        record = _record()
        await store.create(record)
        rich = _rich_record()
        changed = record.evolve(
            **{k: v for k, v in rich.to_dict().items() if k not in ("task_id", "version")}
        )
        assert await store.replace(changed, expected_version=0)
        assert await store.get(record.task_id) == changed
        done = changed.evolve(
            status="failed",
            status_message=None,
            ttl_ms=None,
            poll_interval_ms=None,
            result={"content": [{"type": "text", "text": UNICODE}], "structuredContent": {"v": [1.5]}},
            error={"code": -32603, "message": UNICODE, "data": {"nested": {"none": None}}},
            input_requests={},
            input_responses={},
            runner=None,
        )
        assert await store.replace(done, expected_version=changed.version)
        assert await store.get(record.task_id) == done

    # -- expiry --------------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_expired_record_is_invisible(self, store: TaskStore) -> None:
        expired = _record(created_at=time.time() - 60, ttl_ms=1)
        await store.create(expired)
        assert await store.get(expired.task_id) is None
        assert await store.get(expired.task_id, owner=expired.owner) is None
        assert expired.task_id not in {r.task_id for r in await store.list_active()}

    @pytest.mark.anyio
    async def test_unexpired_record_with_ttl_is_visible(self, store: TaskStore) -> None:
        record = _record(ttl_ms=3_600_000)
        await store.create(record)
        assert await store.get(record.task_id) == record
        assert record.task_id in {r.task_id for r in await store.list_active()}

    @pytest.mark.anyio
    async def test_delete_expired_removes_and_counts(self, store: TaskStore) -> None:
        now = time.time()
        expired = [
            _record(created_at=now - 60, ttl_ms=1),
            _record(created_at=now - 60, ttl_ms=1, status="completed"),
        ]
        fresh = _record(created_at=now, ttl_ms=3_600_000)
        forever = _record(created_at=now - 10 * 365 * 86400, ttl_ms=None)
        for record in (*expired, fresh, forever):
            await store.create(record)
        assert await store.delete_expired(now) == 2
        assert await store.delete_expired(now) == 0
        for record in expired:
            assert await store.get(record.task_id) is None
        assert await store.get(fresh.task_id) == fresh
        assert await store.get(forever.task_id) == forever

    @pytest.mark.anyio
    async def test_delete_expired_uses_the_given_time(self, store: TaskStore) -> None:
        now = time.time()
        record = _record(created_at=now, ttl_ms=60_000)
        await store.create(record)
        assert await store.delete_expired(now + 30) == 0
        assert await store.get(record.task_id) == record
        assert await store.delete_expired(now + 61) == 1
        assert await store.get(record.task_id) is None

    @pytest.mark.anyio
    async def test_records_without_ttl_never_expire(self, store: TaskStore) -> None:
        record = _record(created_at=time.time() - 50 * 365 * 86400, ttl_ms=None)
        await store.create(record)
        assert await store.delete_expired(time.time() + 100 * 365 * 86400) == 0
        assert await store.get(record.task_id) == record
        assert record.task_id in {r.task_id for r in await store.list_active()}

    # -- list_active ---------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_list_active_returns_only_working_and_input_required(self, store: TaskStore) -> None:
        working = _record(status="working")
        waiting = _record(status="input_required")
        await store.create(working)
        await store.create(waiting)
        ended = []
        for final in ("completed", "failed", "cancelled"):
            record = _record()
            await store.create(record)
            assert await store.replace(record.evolve(status=final), expected_version=0)
            ended.append(record.task_id)
        created_terminal = _record(status="completed")
        await store.create(created_terminal)
        active = {r.task_id: r for r in await store.list_active()}
        assert active.get(working.task_id) == working
        assert active.get(waiting.task_id) == waiting
        assert not set(active) & {*ended, created_terminal.task_id}
        assert all(r.status in ("working", "input_required") for r in active.values())

    # -- notifications -------------------------------------------------------------------------

    async def _receive(self, events: AsyncIterator[str], expected: set[str]) -> None:
        """Read `events` until every id in `expected` arrived (other ids are ignored)."""
        missing = set(expected)
        with anyio.fail_after(self.timeout):
            while missing:
                missing.discard(await events.__anext__())

    @pytest.mark.anyio
    async def test_subscriber_receives_published_ids(self, store: TaskStore) -> None:
        ids = [_new_id() for _ in range(3)]
        async with store.subscribe() as events:
            for task_id in ids:
                await store.publish(task_id)
            await self._receive(events, set(ids))

    @pytest.mark.anyio
    async def test_two_subscribers_both_receive(self, store: TaskStore) -> None:
        task_id = _new_id()
        async with store.subscribe() as first, store.subscribe() as second:
            await store.publish(task_id)
            await self._receive(first, {task_id})
            await self._receive(second, {task_id})

    @pytest.mark.anyio
    async def test_publish_does_not_wait_for_a_slow_subscriber(self, store: TaskStore) -> None:
        ids = [_new_id() for _ in range(50)]
        async with store.subscribe() as events:
            with anyio.fail_after(self.timeout):
                for task_id in ids:
                    await store.publish(task_id)
            await self._receive(events, set(ids))

    @pytest.mark.anyio
    async def test_publish_without_or_after_subscribers_is_harmless(self, store: TaskStore) -> None:
        await store.publish(_new_id())
        async with store.subscribe() as events:
            task_id = _new_id()
            await store.publish(task_id)
            await self._receive(events, {task_id})
        await store.publish(_new_id())
        async with store.subscribe() as events:
            task_id = _new_id()
            await store.publish(task_id)
            await self._receive(events, {task_id})

    @pytest.mark.anyio
    async def test_publish_reaches_a_subscriber_of_another_instance(self, store: TaskStore) -> None:
        if not self.shared_notifications:
            pytest.skip("the store's notifications stay in one process")
        other = await self.reopen(store)
        try:
            async with other.subscribe() as events:
                task_id = _new_id()
                await store.publish(task_id)
                await self._receive(events, {task_id})
        finally:
            await other.close()

    # -- idempotent creation -------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_create_returns_the_record(self, store: TaskStore) -> None:
        record = _record()
        stored = await store.create(record)
        assert stored.task_id == record.task_id

    @pytest.mark.anyio
    async def test_same_idempotency_key_returns_the_first_task(self, store: TaskStore) -> None:
        first = await store.create(_record(idempotency_key="k-1"))
        second = await store.create(_record(idempotency_key="k-1"))
        assert second.task_id == first.task_id
        assert len([r for r in await store.list_active() if r.idempotency_key == "k-1"]) == 1

    @pytest.mark.anyio
    async def test_idempotency_keys_are_scoped_by_owner(self, store: TaskStore) -> None:
        mine = await store.create(_record(idempotency_key="shared"))
        theirs = await store.create(_record(owner="bob", idempotency_key="shared"))
        assert theirs.task_id != mine.task_id
        assert await store.get(theirs.task_id, owner="bob") is not None

    @pytest.mark.anyio
    async def test_an_expired_task_frees_its_idempotency_key(self, store: TaskStore) -> None:
        old = await store.create(_record(idempotency_key="k-2", created_at=time.time() - 60, ttl_ms=1000))
        fresh = await store.create(_record(idempotency_key="k-2"))
        assert fresh.task_id != old.task_id

    # -- runners: heartbeats and claims --------------------------------------------------------

    @pytest.mark.anyio
    async def test_heartbeat_makes_a_runner_live_until_it_expires(self, store: TaskStore) -> None:
        await store.heartbeat("runner-a", 60.0)
        await store.heartbeat("runner-b", -1.0)
        live = await store.live_runners()
        assert "runner-a" in live
        assert "runner-b" not in live
        await store.heartbeat("runner-b", 60.0)
        assert "runner-b" in await store.live_runners()
        await store.heartbeat("runner-a", -1.0)
        assert "runner-a" not in await store.live_runners()

    @pytest.mark.anyio
    async def test_claim_takes_queued_records_oldest_first(self, store: TaskStore) -> None:
        now = time.time()
        queued = [await store.create(_record(created_at=now - 10 + i)) for i in range(3)]
        await store.create(_record(runner="someone-else"))
        done = await store.create(_record())
        done.runner = None
        assert await store.replace(done.evolve(status="completed"), expected_version=0)
        claimed = await store.claim("worker-1", 2)
        assert [r.task_id for r in claimed] == [r.task_id for r in queued[:2]]
        for record in claimed:
            assert record.runner == "worker-1"
            stored = await store.get(record.task_id)
            assert (
                stored is not None and stored.runner == "worker-1" and stored.version == record.version == 1
            )
        rest = await store.claim("worker-2", 10)
        assert [r.task_id for r in rest] == [queued[2].task_id]
        assert await store.claim("worker-3", 10) == []

    @pytest.mark.anyio
    async def test_concurrent_claimers_never_share_a_record(self, store: TaskStore) -> None:
        ids = {(await store.create(_record())).task_id for _ in range(20)}
        claims: dict[str, list[str]] = {}

        async def claim(worker: str) -> None:
            claims[worker] = [r.task_id for r in await store.claim(worker, 5)]

        with anyio.fail_after(self.timeout):
            async with anyio.create_task_group() as group:
                for n in range(8):
                    group.start_soon(claim, f"worker-{n}")
        taken = [task_id for got in claims.values() for task_id in got]
        assert len(taken) == len(set(taken)) == 20
        assert set(taken) == ids

    @pytest.mark.anyio
    async def test_claim_is_fair_across_owners(self, store: TaskStore) -> None:
        # alice queued a backlog before bob's one task and already has one running: bob's task
        # goes first, then alice's oldest, and an owner's records always go oldest first
        now = time.time()
        await store.create(_record(owner="alice", runner="worker-0", created_at=now - 30))
        backlog = [await store.create(_record(owner="alice", created_at=now - 20 + i)) for i in range(4)]
        bobs = await store.create(_record(owner="bob", created_at=now - 5))
        first = await store.claim("worker-1", 1)
        assert [r.task_id for r in first] == [bobs.task_id]
        assert [r.task_id for r in await store.claim("worker-1", 1)] == [backlog[0].task_id]
        late = await store.create(_record(owner="carol", created_at=now))
        # carol holds nothing: her task goes before alice's next one (alice holds two now)
        assert [r.task_id for r in await store.claim("worker-2", 1)] == [late.task_id]
        rest = await store.claim("worker-2", 10)
        assert sorted(r.task_id for r in rest) == sorted(r.task_id for r in backlog[1:])

    @pytest.mark.anyio
    async def test_count_active_counts_an_owners_queued_and_running_tasks(self, store: TaskStore) -> None:
        if not isinstance(store, CountsActive):
            pytest.skip("this store does not count active tasks (count_active)")
        assert await store.count_active("alice") == 0
        await store.create(_record(owner="alice"))  # queued
        await store.create(_record(owner="alice", runner="worker-1"))  # running
        asking = await store.create(_record(owner="alice", runner="worker-1"))
        assert await store.replace(asking.evolve(status="input_required"), expected_version=0)
        ending = await store.create(_record(owner="alice"))
        assert await store.replace(ending.evolve(status="completed"), expected_version=0)
        await store.create(_record(owner="alice", status="cancelled"))
        await store.create(_record(owner="alice", created_at=time.time() - 10, ttl_ms=1))  # expired
        await store.create(_record(owner="bob"))
        assert await store.count_active("alice") == 3
        assert await store.count_active("bob") == 1
        assert await store.count_active("carol") == 0

    # -- tool offers (`KeepsOffers`: rolling deploys) ------------------------------------------

    def _offers(self, store: TaskStore) -> KeepsOffers:
        """`store` as a `KeepsOffers`; skips the test when the store keeps no tool offers."""
        offers = keeps_offers(store)
        if offers is None:
            pytest.skip("this store keeps no tool offers (runner_offers)")
        return offers

    @pytest.mark.anyio
    async def test_claim_with_tools_takes_only_records_of_those_tools(self, store: TaskStore) -> None:
        offers = self._offers(store)
        now = time.time()
        other = [await store.create(_record(tool="new_tool", created_at=now - 20 + i)) for i in range(3)]
        mine = [await store.create(_record(tool="old_tool", created_at=now - 10 + i)) for i in range(2)]
        assert await offers.claim("worker-old", 10, tools=[]) == []
        claimed = await offers.claim("worker-old", 10, tools=["old_tool", "unknown_tool"])
        assert sorted(r.task_id for r in claimed) == sorted(r.task_id for r in mine)
        assert await offers.claim("worker-old", 10, tools=["old_tool"]) == []
        for record in other:  # left queued for a runner of their tool
            stored = await store.get(record.task_id)
            assert stored is not None and stored.runner is None and stored.version == 0
        rest = await offers.claim("worker-new", 10, tools=("new_tool",))
        assert sorted(r.task_id for r in rest) == sorted(r.task_id for r in other)
        assert all(r.runner == "worker-new" for r in rest)

    @pytest.mark.anyio
    async def test_claim_without_tools_still_takes_any_tool(self, store: OperatorStore) -> None:
        offers = self._offers(store)
        ids = {(await store.create(_record(tool=f"tool-{i}"))).task_id for i in range(3)}
        assert {r.task_id for r in await offers.claim("worker-1", 10, tools=None)} == ids

    @pytest.mark.anyio
    async def test_runner_offers_keep_each_runners_latest_tools_and_lease(self, store: OperatorStore) -> None:
        offers = self._offers(store)
        before = time.time()
        await offers.heartbeat("runner-a", 60.0, tools=["b_tool", "a_tool"])
        await offers.heartbeat("runner-gone", -5.0, tools=["old_tool"])
        await store.heartbeat("runner-silent", 60.0)  # an older mcptasks: says nothing
        await offers.heartbeat("runner-idle", 60.0, tools=[])  # a serving-only replica
        seen = await offers.runner_offers()
        assert seen["runner-a"].tools == frozenset({"a_tool", "b_tool"})
        assert seen["runner-a"].until >= before + 60.0
        assert seen["runner-gone"].tools == frozenset({"old_tool"})
        assert seen["runner-gone"].until < time.time()  # gone, but its last offer is remembered
        assert seen["runner-silent"].tools is None
        assert seen["runner-idle"].tools == frozenset()
        await offers.heartbeat("runner-a", 60.0, tools=["c_tool"])
        await offers.heartbeat("runner-a", 60.0)  # says nothing: the last offer stands
        assert (await offers.runner_offers())["runner-a"].tools == frozenset({"c_tool"})
        assert {"runner-a", "runner-silent", "runner-idle"} <= await store.live_runners()

    # -- durability (only when `durable = True`) -----------------------------------------------

    @pytest.mark.anyio
    async def test_create_is_visible_to_another_instance(self, store: OperatorStore) -> None:
        self._require_durable()
        other = await self.reopen(store)
        try:
            record = _record(arguments={"where": "first instance"})
            await store.create(record)
            assert await other.get(record.task_id) == record
            with pytest.raises(TaskExists):
                await other.create(_record(task_id=record.task_id))
            changed = record.evolve(status="input_required")
            assert await other.replace(changed, expected_version=record.version)
            assert await store.get(record.task_id) == changed
            assert not await store.replace(record.evolve(), expected_version=record.version)
        finally:
            await other.close()

    @pytest.mark.anyio
    async def test_concurrent_replacers_across_instances_exactly_one_wins(self, store: OperatorStore) -> None:
        self._require_durable()
        other = await self.reopen(store)
        try:
            record = _record()
            await store.create(record)
            current = record

            async def race(
                target: TaskStore, candidate: TaskRecord, expected: int, won: list[TaskRecord]
            ) -> None:
                if await target.replace(candidate, expected_version=expected):
                    won.append(candidate)

            for round_ in range(10):
                won: list[TaskRecord] = []
                async with anyio.create_task_group() as tg:
                    for i in range(20):
                        candidate = current.evolve(status_message=f"round {round_} racer {i}")
                        tg.start_soon(race, (store, other)[i % 2], candidate, current.version, won)
                assert len(won) == 1
                assert won[0].version == current.version + 1 == round_ + 1
                assert await store.get(record.task_id) == won[0] == await other.get(record.task_id)
                current = won[0]
        finally:
            await other.close()

    @pytest.mark.anyio
    async def test_records_survive_a_restart(self, store: OperatorStore) -> None:
        self._require_durable()
        finished = _rich_record()
        active = _record(status="working", runner="engine-a", input_key_counter=3)
        expiring = _record(created_at=time.time() - 60, ttl_ms=1)
        for record in (finished, active, expiring):
            await store.create(record)
        completed = finished.evolve(
            status="completed", result={"content": [{"type": "text", "text": UNICODE}], "isError": False}
        )
        assert await store.replace(completed, expected_version=finished.version)
        waiting = active.evolve(status="input_required", input_requests={"k3": {"method": "m", "params": {}}})
        assert await store.replace(waiting, expected_version=0)
        await store.close()

        reopened = await self.reopen(store)
        try:
            assert await reopened.get(finished.task_id) == completed
            assert await reopened.get(active.task_id) == waiting
            assert waiting.version == 1 and completed.version == 8
            assert await reopened.get(expiring.task_id) is None
            assert {r.task_id: r for r in await reopened.list_active()}.get(active.task_id) == waiting
            assert not await reopened.replace(completed.evolve(status="failed"), expected_version=8)
            assert await reopened.replace(waiting.evolve(status="working"), expected_version=1)
            assert await reopened.delete_expired(time.time()) == 1
        finally:
            await reopened.close()

    @pytest.mark.anyio
    async def test_epoch_is_stable_over_the_same_data(self, store: TaskStore) -> None:
        """A store with `epoch()` answers the same id while it holds the same data, from every
        instance and across a restart (a store that comes back empty answers with another)."""
        epoch = getattr(store, "epoch", None)
        first = None if epoch is None else await epoch()
        if epoch is None or first is None:
            pytest.skip("this store has no epoch(): a store that comes back empty goes unnoticed")
        assert isinstance(first, str) and first
        assert await epoch() == first
        if not store.durable:
            return
        await store.create(_record())
        await store.close()
        reopened: Any = await self.reopen(store)
        try:
            assert await reopened.epoch() == first
        finally:
            await reopened.close()

    # -- checkpoints: state a body saves for its re-runs -------------------------------------------

    @pytest.mark.anyio
    async def test_checkpoint_round_trips_through_replace_list_and_claim(self, store: OperatorStore) -> None:
        state = {"job": "job-" + UNICODE, "offset": 2**53 + 1, "ratio": 0.1, "seen": [1, None, {"a": []}]}
        record = await store.create(_record(runner="engine-lost"))
        assert (await store.get(record.task_id)) == record and record.checkpoint is None
        saved = record.evolve(checkpoint=state)
        assert await store.replace(saved, expected_version=0)
        stored = await store.get(record.task_id)
        assert stored is not None and stored.checkpoint == state
        listed = {r.task_id: r for r in await store.list_active()}[record.task_id]
        assert listed.checkpoint == state
        # A re-queued record (runner cleared for a re-run) is claimed with its checkpoint.
        assert await store.replace(saved.evolve(runner=None, attempt=2), expected_version=1)
        (claimed,) = await store.claim("engine-next", 1)
        assert claimed.task_id == record.task_id and claimed.checkpoint == state and claimed.attempt == 2
        replaced = claimed.evolve(checkpoint=["second", 2])
        assert await store.replace(replaced, expected_version=claimed.version)
        again = await store.get(record.task_id)
        assert again is not None and again.checkpoint == ["second", 2]

    @pytest.mark.anyio
    async def test_checkpoint_survives_a_restart(self, store: OperatorStore) -> None:
        self._require_durable()
        record = await store.create(_record(runner="engine-before-restart"))
        saved = record.evolve(checkpoint={"job": "j-1", "step": 3})
        assert await store.replace(saved, expected_version=0)
        await store.close()
        reopened = await self.reopen(store)
        try:
            stored = await reopened.get(record.task_id)
            assert stored is not None and stored.checkpoint == {"job": "j-1", "step": 3}
            assert stored == saved
        finally:
            await reopened.close()

    # == operator queries: list_tasks, stats, purge, transitions ================================

    async def _operator_fixture(self, store: OperatorStore) -> dict[str, TaskRecord]:
        """Seven records across statuses, tools, owners and creation times, one expired."""
        base = time.time() - 1000.0
        records = {
            "w1": _record(tool="build", status="working", created_at=base + 1, runner="runner-a"),
            "w2": _record(tool="build", status="working", created_at=base + 2),
            "i1": _record(tool="deploy", status="input_required", created_at=base + 3, runner="runner-a"),
            "c1": _record(tool="build", status="completed", created_at=base + 4, owner="bob"),
            "f1": _record(tool="deploy", status="failed", created_at=base + 5),
            "x1": _record(tool="deploy", status="cancelled", created_at=base + 5),
            "gone": _record(tool="build", status="working", created_at=base, ttl_ms=1),
        }
        for record in records.values():
            await store.create(record)
        return records

    @pytest.mark.anyio
    async def test_list_tasks_filters_and_orders_newest_first(self, store: OperatorStore) -> None:
        r = await self._operator_fixture(store)

        async def ids(query: TaskQuery) -> list[str]:
            page = await store.list_tasks(query)
            assert page.next_cursor is None
            return [record.task_id for record in page.records]

        newest_two = sorted([r["f1"], r["x1"]], key=lambda x: x.task_id, reverse=True)
        everything = [x.task_id for x in newest_two] + [r[k].task_id for k in ("c1", "i1", "w2", "w1")]
        assert await ids(TaskQuery()) == everything
        assert await ids(TaskQuery(statuses=frozenset({"working"}))) == [r["w2"].task_id, r["w1"].task_id]
        assert await ids(
            TaskQuery(tools=frozenset({"deploy"}), statuses=frozenset({"failed", "input_required"}))
        ) == [
            r["f1"].task_id,
            r["i1"].task_id,
        ]
        assert await ids(TaskQuery(owner="bob")) == [r["c1"].task_id]
        assert await ids(TaskQuery(since=r["c1"].created_at)) == everything[:3]
        assert await ids(TaskQuery(tools=frozenset({"nope"}))) == []
        listed = (await store.list_tasks(TaskQuery(owner="bob"))).records[0]
        assert listed == r["c1"]

    @pytest.mark.anyio
    async def test_list_tasks_pages_with_a_cursor(self, store: OperatorStore) -> None:
        await self._operator_fixture(store)
        seen: list[str] = []
        after: str | None = None
        pages = 0
        while True:
            page = await store.list_tasks(TaskQuery(), limit=2, after=after)
            pages += 1
            assert len(page.records) <= 2
            seen += [record.task_id for record in page.records]
            if page.next_cursor is None:
                break
            after = page.next_cursor
        assert pages == 3 and len(seen) == len(set(seen)) == 6
        assert seen == [record.task_id for record in (await store.list_tasks(TaskQuery(), limit=10)).records]

    @pytest.mark.anyio
    async def test_list_tasks_rejects_bad_arguments(self, store: OperatorStore) -> None:
        with pytest.raises(ValueError, match="cursor"):
            await store.list_tasks(TaskQuery(), after="not a cursor")
        with pytest.raises(ValueError, match="limit"):
            await store.list_tasks(TaskQuery(), limit=0)
        with pytest.raises(ValueError, match="unknown task status"):
            TaskQuery(statuses=frozenset({"running"}))

    @pytest.mark.anyio
    async def test_stats_counts_statuses_tools_queue_and_runners(self, store: OperatorStore) -> None:
        r = await self._operator_fixture(store)
        await store.heartbeat("runner-a", 60.0)
        await store.heartbeat("runner-dead", -1.0)
        stats = await store.stats()
        assert stats.by_status == {
            "working": 2,
            "input_required": 1,
            "completed": 1,
            "failed": 1,
            "cancelled": 1,
        }
        assert stats.by_tool == {
            "build": {"working": 2, "completed": 1},
            "deploy": {"input_required": 1, "failed": 1, "cancelled": 1},
        }
        assert stats.total == 6
        assert stats.oldest_active == r["w1"].created_at
        assert stats.queued == 1
        assert set(stats.runners) == {"runner-a"}
        lease = stats.runners["runner-a"]
        assert lease.active_tasks == 2 and lease.expires_at > time.time()
        assert stats.to_dict()["runners"]["runner-a"]["active_tasks"] == 2

    @pytest.mark.anyio
    async def test_tool_errors_are_counted_and_filtered(self, store: OperatorStore) -> None:
        base = time.time() - 1000.0
        failing = {"content": [{"type": "text", "text": "disk full"}], "isError": True}
        records = {
            "err": _record(status="completed", result=failing, created_at=base + 1),
            "ok": _record(status="completed", result={"content": [], "isError": False}, created_at=base + 2),
            "bare": _record(status="completed", created_at=base + 3),  # no result at all
            "text": _record(
                status="completed", result={"content": [], "isError": "true"}, created_at=base + 4
            ),
            "failed": _record(status="failed", error={"code": -32603, "message": "x"}, created_at=base + 5),
            "busy": _record(status="working", created_at=base + 6),
            "gone": _record(status="completed", result=failing, created_at=base, ttl_ms=1),
        }
        for record in records.values():
            await store.create(record)
        stats = await store.stats()
        counted = 1 if self.counts_tool_errors else None
        assert stats.tool_errors == counted and stats.by_status["completed"] == 4
        assert stats.to_dict()["tool_errors"] == counted

        async def ids(query: TaskQuery) -> set[str]:
            return {record.task_id for record in (await store.list_tasks(query)).records}

        assert await ids(TaskQuery(tool_error=True)) == {records["err"].task_id}
        others = {records[k].task_id for k in ("ok", "bare", "text", "failed", "busy")}
        assert await ids(TaskQuery(tool_error=False)) == others
        assert await ids(TaskQuery(tool_error=True, statuses=frozenset({"failed"}))) == set()
        assert await ids(TaskQuery(tool_error=False, statuses=frozenset({"completed"}))) == {
            records[k].task_id for k in ("ok", "bare", "text")
        }

    @pytest.mark.anyio
    async def test_stats_of_an_empty_store(self, store: OperatorStore) -> None:
        stats = await store.stats()
        assert (stats.by_status, stats.by_tool, stats.oldest_active, stats.queued, stats.runners) == (
            {},
            {},
            None,
            0,
            {},
        )
        assert stats.tool_errors == (0 if self.counts_tool_errors else None)

    @pytest.mark.anyio
    async def test_purge_deletes_old_terminal_records_only(self, store: OperatorStore) -> None:
        r = await self._operator_fixture(store)
        with pytest.raises(ValueError, match="terminal"):
            await store.purge({"working", "completed"}, time.time())
        with pytest.raises(ValueError):
            await store.purge(set(), time.time())
        assert await store.purge({"completed", "failed"}, r["c1"].updated_at) == 0  # not older than itself
        assert await store.purge({"completed", "failed"}, time.time() + 1) == 2
        assert await store.get(r["c1"].task_id) is None and await store.get(r["f1"].task_id) is None
        for key in ("w1", "w2", "i1", "x1"):
            assert await store.get(r[key].task_id) == r[key]
        assert (await store.stats()).by_status == {"working": 2, "input_required": 1, "cancelled": 1}
        assert await store.purge({"completed"}, time.time() + 1) == 0

    @pytest.mark.anyio
    async def test_purge_frees_the_idempotency_key(self, store: OperatorStore) -> None:
        first = await store.create(_record(idempotency_key="nightly"))
        done = first.evolve(status="completed")
        assert await store.replace(done, expected_version=first.version)
        assert await store.purge({"completed"}, time.time() + 1) == 1
        second = await store.create(_record(idempotency_key="nightly"))
        assert second.task_id != first.task_id
        assert await store.get(second.task_id) == second

    @pytest.mark.anyio
    async def test_transitions_are_recorded_and_round_trip(self, store: TaskStore) -> None:
        record = await store.create(_record(status_message="queued"))
        assert record.transitions == []
        waiting = record.evolve(status="input_required", status_message="need an answer")
        assert await store.replace(waiting, expected_version=record.version)
        message_only = waiting.evolve(status_message="still waiting")
        assert await store.replace(message_only, expected_version=waiting.version)
        done = message_only.evolve(status="completed", status_message=None)
        assert await store.replace(done, expected_version=message_only.version)
        stored = await store.get(record.task_id)
        assert stored is not None and stored == done
        assert [entry[1:] for entry in stored.transitions] == [
            ["input_required", "need an answer"],
            ["completed", None],
        ]
        assert stored.transitions[0][0] == waiting.updated_at

    @pytest.mark.anyio
    async def test_trace_context_round_trips(self, store: TaskStore) -> None:
        carrier = {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "k=v",
        }
        record = await store.create(_record(trace=carrier))
        assert (await store.get(record.task_id)) == record
        claimed = await store.claim("runner-t", 10)
        assert [r.trace for r in claimed] == [carrier]

    @pytest.mark.anyio
    async def test_status_history_round_trips(self, store: TaskStore) -> None:
        """`status_history` lives in the record like `transitions`, through create, replace and claim."""
        record = await store.create(_record(status_message="queued", status_history=[[1.5, "queued"]]))
        assert await store.get(record.task_id) == record
        moved = record.evolve(status_message="step 1 of 3 — " + UNICODE)
        assert len(moved.status_history) == 2
        assert await store.replace(moved, expected_version=record.version)
        stored = await store.get(record.task_id)
        assert stored is not None and stored.status_history == moved.status_history
        (claimed,) = await store.claim("runner-h", 10)
        assert claimed.status_history == moved.status_history

    # == the webhook outbox (`KeepsOutbox`, optional): events not delivered yet ===================

    def _outbox(self, store: TaskStore) -> KeepsOutbox:
        """`store` as a `KeepsOutbox`; skips the test when the store keeps none."""
        outbox = store.outbox() if isinstance(store, StoreBase) else None
        if outbox is None:
            pytest.skip("the store keeps no webhook outbox (outbox_records / replace_outbox)")
        return outbox

    @pytest.mark.anyio
    async def test_outbox_records_are_the_unexpired_records_with_pending_events(
        self, store: TaskStore
    ) -> None:
        """Active and ended records with entries are found, least recently updated first; a record
        without entries or an expired one is not."""
        outbox = self._outbox(store)
        event = {"id": "msg_1", "type": "task.completed", "at": 1.5, "to": "k", "n": 0, "due": 2.5}
        now = time.time()
        ended = await store.create(_record(status="completed", outbox=[event], updated_at=now - 5))
        active = await store.create(
            _record(outbox=[{**event, "type": "task.input_required"}], updated_at=now - 1)
        )
        await store.create(_record())
        await store.create(_record(outbox=[event], created_at=now - 10, ttl_ms=1000))
        found = await outbox.outbox_records(100)
        assert [r.task_id for r in found] == [ended.task_id, active.task_id]
        assert found[0].outbox == [event] and found[0] == ended
        assert [r.task_id for r in await outbox.outbox_records(1)] == [ended.task_id]

    @pytest.mark.anyio
    async def test_replace_outbox_is_compare_and_set_and_a_terminal_record_takes_it(
        self, store: TaskStore
    ) -> None:
        """The write of the outbox alone: on the current version only (which it bumps), also
        once the record ended; `replace` still refuses the ended record."""
        outbox = self._outbox(store)
        event = {"id": "msg_2", "type": "task.failed", "at": 1.5, "to": "k", "n": 0, "due": 2.5}
        record = await store.create(_record())
        ended = record.evolve(status="failed", error={"code": -32603, "message": "x"}, outbox=[event])
        assert await store.replace(ended, expected_version=record.version)
        retried = ended.evolve(outbox=[{**event, "n": 1, "due": 9.5}], updated_at=ended.updated_at)
        assert await outbox.replace_outbox(retried, expected_version=ended.version)
        assert retried.version == ended.version + 1
        stored = await store.get(record.task_id)
        assert stored == retried and stored.status == "failed"
        stale = ended.evolve(outbox=[], updated_at=ended.updated_at)
        assert not await outbox.replace_outbox(stale, expected_version=ended.version)
        delivered = retried.evolve(outbox=[], updated_at=retried.updated_at)
        assert await outbox.replace_outbox(delivered, expected_version=retried.version)
        assert (await store.get(record.task_id)) == delivered
        assert await outbox.outbox_records(100) == []
        assert not await store.replace(
            delivered.evolve(status_message="no"), expected_version=delivered.version
        )
        assert not await outbox.replace_outbox(_record(), expected_version=0)  # unknown task

    # == the journal (`KeepsJournal`, optional): what durable bodies replay from ================

    def _journal(self, store: TaskStore) -> KeepsJournal:
        """`store` as a `KeepsJournal`; skips the test when the store keeps no journal."""
        if not isinstance(store, KeepsJournal):
            pytest.skip("the store keeps no journal (no append_journal / read_journal)")
        return store

    @pytest.mark.anyio
    async def test_journal_appends_and_reads_back_in_order(self, store: TaskStore) -> None:
        """Entries come back as written, in position order; a fresh or unknown task has none."""
        journal = self._journal(store)
        record = await store.create(_record())
        assert await journal.read_journal(record.task_id) == []
        assert await journal.read_journal(_new_id()) == []
        entries = [
            json.dumps({"kind": "step", "name": "build", "value": {"n": 2**53 + 1, "x": 0.1}}),
            json.dumps({"kind": "ask", "name": "confirm", "text": UNICODE}, ensure_ascii=False),
            json.dumps({"kind": "answer", "name": "confirm", "value": None}),
        ]
        for position, entry in enumerate(entries):
            assert await journal.append_journal(record.task_id, position, entry) == entry
        assert await journal.read_journal(record.task_id) == entries
        other = await store.create(_record())
        assert await journal.read_journal(other.task_id) == []  # journals are per task

    @pytest.mark.anyio
    async def test_journal_repeated_append_returns_the_first_entry(self, store: TaskStore) -> None:
        """A position is written once: appending it again stores nothing and returns the first."""
        journal = self._journal(store)
        record = await store.create(_record())
        assert await journal.append_journal(record.task_id, 0, '"first"') == '"first"'
        assert await journal.append_journal(record.task_id, 0, '"second"') == '"first"'
        assert await journal.append_journal(record.task_id, 0, '"first"') == '"first"'
        assert await journal.append_journal(record.task_id, 1, '"next"') == '"next"'
        assert await journal.append_journal(record.task_id, 0, '"third"') == '"first"'
        assert await journal.read_journal(record.task_id) == ['"first"', '"next"']

    @pytest.mark.anyio
    async def test_journal_concurrent_appends_of_one_position_agree(self, store: TaskStore) -> None:
        """Ten concurrent appenders of one position all get the entry of whichever came first."""
        journal = self._journal(store)
        record = await store.create(_record())
        results: list[str | None] = []

        async def append(n: int) -> None:
            results.append(await journal.append_journal(record.task_id, 0, json.dumps({"writer": n})))

        with anyio.fail_after(self.timeout):
            async with anyio.create_task_group() as group:
                for n in range(10):
                    group.start_soon(append, n)
        stored = await journal.read_journal(record.task_id)
        assert len(stored) == 1 and results == stored * 10

    @pytest.mark.anyio
    async def test_journal_refuses_a_gap(self, store: TaskStore) -> None:
        """A position beyond the end (or a negative one) raises `ValueError` and stores nothing."""
        journal = self._journal(store)
        record = await store.create(_record())
        with pytest.raises(ValueError):
            await journal.append_journal(record.task_id, 1, '"early"')
        assert await journal.append_journal(record.task_id, 0, '"zero"') == '"zero"'
        with pytest.raises(ValueError):
            await journal.append_journal(record.task_id, 2, '"early"')
        with pytest.raises(ValueError):
            await journal.append_journal(record.task_id, -1, '"negative"')
        assert await journal.read_journal(record.task_id) == ['"zero"']

    @pytest.mark.anyio
    @pytest.mark.parametrize("final", ["completed", "failed", "cancelled"])
    async def test_journal_of_a_terminal_task_is_closed(self, store: TaskStore, final: str) -> None:
        """A terminal task's journal stays readable, but takes no entry (not even a repeat)."""
        journal = self._journal(store)
        record = await store.create(_record())
        assert await journal.append_journal(record.task_id, 0, '"zero"') == '"zero"'
        assert await store.replace(record.evolve(status=final), expected_version=record.version)
        assert await journal.append_journal(record.task_id, 1, '"one"') is None
        assert await journal.append_journal(record.task_id, 0, '"zero"') is None
        assert await journal.read_journal(record.task_id) == ['"zero"']
        born_final = await store.create(_record(status=final))
        assert await journal.append_journal(born_final.task_id, 0, '"zero"') is None
        assert await journal.read_journal(born_final.task_id) == []

    @pytest.mark.anyio
    async def test_journal_of_an_unknown_or_expired_task_takes_nothing(self, store: TaskStore) -> None:
        """Unknown and expired tasks take no entry; an expired task's journal reads empty."""
        journal = self._journal(store)
        unknown = _new_id()
        assert await journal.append_journal(unknown, 0, '"zero"') is None
        assert await journal.read_journal(unknown) == []
        expired = await store.create(_record(created_at=time.time() - 60, ttl_ms=1))
        assert await journal.append_journal(expired.task_id, 0, '"zero"') is None
        assert await journal.read_journal(expired.task_id) == []

    @pytest.mark.anyio
    async def test_journal_is_deleted_with_an_expired_record(self, store: TaskStore) -> None:
        """`delete_expired` removes the journal with the record: a record created again under
        the same id starts with an empty journal."""
        journal = self._journal(store)
        now = time.time()
        record = await store.create(_record(created_at=now, ttl_ms=60_000))
        kept = await store.create(_record(created_at=now, ttl_ms=3_600_000))
        for task in (record, kept):
            assert await journal.append_journal(task.task_id, 0, '"zero"') == '"zero"'
            assert await journal.append_journal(task.task_id, 1, '"one"') == '"one"'
        assert await store.delete_expired(now + 61) == 1
        assert await journal.read_journal(record.task_id) == []
        assert await journal.read_journal(kept.task_id) == ['"zero"', '"one"']
        again = await store.create(_record(task_id=record.task_id))
        assert await journal.read_journal(again.task_id) == []
        assert await journal.append_journal(again.task_id, 0, '"new"') == '"new"'
        assert await journal.read_journal(again.task_id) == ['"new"']

    @pytest.mark.anyio
    async def test_journal_is_deleted_with_a_purged_record(self, store: OperatorStore) -> None:
        """`purge` removes the journal with the record (checked as for `delete_expired`)."""
        journal = self._journal(store)
        record = await store.create(_record())
        assert await journal.append_journal(record.task_id, 0, '"zero"') == '"zero"'
        assert await store.replace(record.evolve(status="completed"), expected_version=record.version)
        assert await store.purge({"completed"}, time.time() + 1) == 1
        assert await journal.read_journal(record.task_id) == []
        again = await store.create(_record(task_id=record.task_id))
        assert await journal.read_journal(again.task_id) == []
        assert await journal.append_journal(again.task_id, 0, '"new"') == '"new"'

    @pytest.mark.anyio
    async def test_journal_holds_a_large_entry_and_many_entries(self, store: TaskStore) -> None:
        """An entry of 1 MiB and a journal of 1,000 entries round-trip (the engine's bounds are
        1 MiB per entry and 10,000 entries)."""
        journal = self._journal(store)
        record = await store.create(_record())
        big = json.dumps({"kind": "step", "name": "big", "value": "é" * 10 + "x" * (1024 * 1024 - 64)})
        assert len(big.encode()) >= 1024 * 1024 - 16
        assert await journal.append_journal(record.task_id, 0, big) == big
        entries = [big] + [json.dumps({"kind": "step", "name": f"s{i}", "value": i}) for i in range(1, 1000)]
        for position in range(1, 1000):
            assert (
                await journal.append_journal(record.task_id, position, entries[position]) == entries[position]
            )
        assert await journal.read_journal(record.task_id) == entries
        assert await journal.append_journal(record.task_id, 0, '"other"') == big

    @pytest.mark.anyio
    async def test_journal_survives_a_restart(self, store: TaskStore) -> None:
        """A durable store's journal is there for another instance and after a restart."""
        self._require_durable()
        journal = self._journal(store)
        record = await store.create(_record())
        assert await journal.append_journal(record.task_id, 0, '"zero"') == '"zero"'
        await store.close()
        reopened = await self.reopen(store)
        try:
            again = self._journal(reopened)
            assert await again.read_journal(record.task_id) == ['"zero"']
            assert await again.append_journal(record.task_id, 0, '"other"') == '"zero"'
            assert await again.append_journal(record.task_id, 1, '"one"') == '"one"'
        finally:
            await reopened.close()
