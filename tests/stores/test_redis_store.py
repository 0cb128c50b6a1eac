"""`RedisTaskStore` against a real Redis: the shared contract, plus what only Redis can show.

Needs a Redis server on 127.0.0.1:6379 (database 15 is used; every test works under a key prefix
of its own and deletes only those keys). Without one, the whole module is skipped.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
import pytest

from mcptasks.stores.base import TaskExists, TaskRecord, TaskStore
from mcptasks.stores.url import store_from_url
from mcptasks.testing import StoreContract

redis_asyncio = pytest.importorskip("redis.asyncio", reason="redis-py is not installed (pip install redis)")

from mcptasks.stores.redis import KEY_TTL_GRACE_MS, RedisTaskStore, redact_url  # noqa: E402

HOST, PORT, DB = "127.0.0.1", 6379, 15
URL = f"redis://{HOST}:{PORT}/{DB}"
START_HINT = 'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'


def _redis_listening() -> bool:
    try:
        with socket.create_connection((HOST, PORT), timeout=0.5):
            return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(
    not _redis_listening(), reason=f"no Redis on {HOST}:{PORT}; start one with: {START_HINT}"
)


def _new_prefix() -> str:
    return f"mcptasks-test-{uuid.uuid4().hex}"


async def _delete_prefix(prefix: str) -> None:
    """Delete every key under `prefix` (and nothing else)."""
    client = redis_asyncio.Redis.from_url(URL)
    try:
        batch = []
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                await client.delete(*batch)
                batch.clear()
        if batch:
            await client.delete(*batch)
    finally:
        await client.aclose()


async def _keys(client: Any, prefix: str) -> set[str]:
    return {key.decode() async for key in client.scan_iter(match=f"{prefix}:*", count=1000)}


def _record(**changes: Any) -> TaskRecord:
    fields: dict[str, Any] = {"task_id": f"t-{uuid.uuid4().hex}", "owner": "alice", "tool": "slow"}
    fields.update(changes)
    return TaskRecord(**fields)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A key prefix no other test (or engineer) uses; its keys are deleted afterwards."""
    name = _new_prefix()
    yield name
    await _delete_prefix(name)


@pytest.fixture
async def raw(prefix: str) -> AsyncIterator[Any]:
    """A plain redis-py client on the test database, for looking at the keys directly."""
    client = redis_asyncio.Redis.from_url(URL)
    yield client
    await client.aclose()


@pytest.fixture
async def store(prefix: str) -> AsyncIterator[RedisTaskStore]:
    s = RedisTaskStore(URL, prefix=prefix)
    await s.open()
    yield s
    await s.close()


@pytest.fixture
async def other(store: RedisTaskStore) -> AsyncIterator[RedisTaskStore]:
    """A second instance (its own connections) over the same prefix: another replica."""
    s = RedisTaskStore(URL, prefix=store.prefix)
    await s.open()
    yield s
    await s.close()


class TestRedisStore(StoreContract):
    durable = True
    shared_notifications = True
    checks_open = True

    @pytest.fixture
    async def store(self, prefix: str) -> AsyncIterator[TaskStore]:
        s = RedisTaskStore(URL, prefix=prefix)
        await s.open()
        yield s
        await s.close()

    async def reopen(self, store: TaskStore) -> TaskStore:
        s = self.unopened(store)
        await s.open()
        return s

    def unopened(self, store: TaskStore) -> TaskStore:
        assert isinstance(store, RedisTaskStore)
        return RedisTaskStore(store.url, prefix=store.prefix)


# -- URLs, lifecycle, errors -------------------------------------------------------------------


@pytest.mark.anyio
async def test_store_from_url_builds_a_redis_store_on_the_named_database() -> None:
    store = store_from_url(URL)
    assert isinstance(store, RedisTaskStore)
    assert store.url == URL and store.prefix == "mcptasks" and store.durable is True
    await store.open()
    try:
        kwargs = store.client.connection_pool.connection_kwargs
        assert (kwargs["host"], kwargs["port"], kwargs["db"]) == (HOST, PORT, DB)
        assert await store.get(f"absent-{uuid.uuid4().hex}") is None  # a read: writes nothing
    finally:
        await store.close()
    assert isinstance(store_from_url("rediss://user:pw@example.invalid:6380/2"), RedisTaskStore)


def test_constructor_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="prefix"):
        RedisTaskStore(URL, prefix="")
    with pytest.raises(ValueError, match="not a Redis URL"):
        RedisTaskStore("http://user:hunter2@localhost/")
    with pytest.raises(ValueError) as info:
        RedisTaskStore("http://user:hunter2@localhost/")
    assert "hunter2" not in str(info.value)


def test_redact_url_hides_only_the_password() -> None:
    assert redact_url("redis://:s3cret@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("rediss://bob:s3cret@[::1]:6380/3?x=1") == "rediss://bob:***@[::1]:6380/3?x=1"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


@pytest.mark.anyio
async def test_unreachable_server_gives_a_clear_error() -> None:
    port = _closed_port()
    url = f"redis://user:hunter2@{HOST}:{port}/0"
    store = RedisTaskStore(url, prefix=_new_prefix())
    with pytest.raises(ConnectionError, match=rf"cannot reach Redis at redis://user:\*\*\*@{HOST}:{port}/0"):
        await store.open()
    assert "hunter2" not in repr(store)
    with pytest.raises(RuntimeError, match="not open"):
        await store.get("x")
    await store.close()  # nothing to release, still fine
    with pytest.raises(ConnectionError, match=r"cannot reach Redis at .*/99: .*DB index"):
        await RedisTaskStore(f"redis://{HOST}:{PORT}/99", prefix=_new_prefix()).open()


@pytest.mark.anyio
async def test_a_given_client_is_used_and_left_open(prefix: str, raw: Any) -> None:
    client = redis_asyncio.Redis.from_url(URL, decode_responses=True)  # str replies must work too
    try:
        store = RedisTaskStore("redis://shown-in-messages-only", prefix=prefix, client=client)
        await store.open()
        assert store.client is client
        record = _record(idempotency_key="k", runner=None, ttl_ms=60_000)
        assert await store.create(record) is record
        assert (await store.create(_record(idempotency_key="k"))).task_id == record.task_id
        assert await store.get(record.task_id) == record
        assert [r.task_id for r in await store.list_active()] == [record.task_id]
        claimed = await store.claim("w", 5)
        assert [(r.task_id, r.runner, r.version) for r in claimed] == [(record.task_id, "w", 1)]
        await store.heartbeat("w", 60)
        assert await store.live_runners() == {"w"}
        async with store.subscribe() as events:
            await store.publish(record.task_id)
            with anyio.fail_after(10):
                assert await events.__anext__() == record.task_id
        await store.close()
        assert await client.ping()  # still usable: the store did not close it
    finally:
        await client.aclose()


# -- atomicity across instances ----------------------------------------------------------------


@pytest.mark.anyio
async def test_1000_concurrent_creates_all_land(store: RedisTaskStore, other: RedisTaskStore) -> None:
    now = time.time()
    records = [_record(created_at=now + i * 1e-3, arguments={"i": i}) for i in range(1000)]
    async with anyio.create_task_group() as tg:
        for i, record in enumerate(records):
            tg.start_soon((store, other)[i % 2].create, record)
    for record in records:
        assert await other.get(record.task_id) == record
    assert [r.task_id for r in await store.list_active()] == [r.task_id for r in records]


@pytest.mark.anyio
async def test_concurrent_creates_with_one_idempotency_key_make_one_task(
    store: RedisTaskStore, other: RedisTaskStore
) -> None:
    results: list[TaskRecord] = []

    async def create(target: RedisTaskStore, i: int) -> None:
        results.append(await target.create(_record(idempotency_key="same", arguments={"i": i})))

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(create, (store, other)[i % 2], i)
    assert len({r.task_id for r in results}) == 1
    assert len(await store.list_active()) == 1


@pytest.mark.anyio
async def test_claim_concurrency_across_two_instances(store: RedisTaskStore, other: RedisTaskStore) -> None:
    now = time.time()
    queued = [_record(created_at=now - 1000 + i) for i in range(200)]
    async with anyio.create_task_group() as tg:
        for record in queued:
            tg.start_soon(store.create, record)
    await store.create(_record(runner="busy"))  # not queued
    claims: dict[str, list[TaskRecord]] = {}

    async def claim(target: RedisTaskStore, worker: str) -> None:
        got: list[TaskRecord] = []
        while batch := await target.claim(worker, 7):
            got.extend(batch)
        claims[worker] = got

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for n in range(16):
                tg.start_soon(claim, (store, other)[n % 2], f"worker-{n}")
    taken = [r.task_id for got in claims.values() for r in got]
    assert len(taken) == len(set(taken)) == 200
    assert set(taken) == {r.task_id for r in queued}
    order = {r.task_id: i for i, r in enumerate(queued)}
    for worker, got in claims.items():
        assert [order[r.task_id] for r in got] == sorted(order[r.task_id] for r in got)  # oldest first
        for record in got:
            assert record.runner == worker and record.version == 1
            assert await other.get(record.task_id) == record
    assert await other.claim("late", 10) == []


# -- the layout: indexes, key expiry, no leaks -------------------------------------------------


@pytest.mark.anyio
async def test_index_membership_follows_status_and_runner(store: RedisTaskStore, raw: Any) -> None:
    p = store.prefix
    record = _record()
    await store.create(record)

    async def where() -> tuple[bool, bool]:
        active = await raw.zscore(f"{p}:active", record.task_id) is not None
        queued = await raw.zscore(f"{p}:queued", record.task_id) is not None
        return active, queued

    assert await where() == (True, True)
    mine = record.evolve(runner="engine-1")
    assert await store.replace(mine, expected_version=0)
    assert await where() == (True, False)
    requeued = mine.evolve(runner=None, status="input_required")
    assert await store.replace(requeued, expected_version=1)
    assert await where() == (True, True)
    done = requeued.evolve(status="completed")
    assert await store.replace(done, expected_version=2)
    assert await where() == (False, False)
    assert await store.claim("w", 10) == []


@pytest.mark.anyio
async def test_key_expiry_is_a_backstop_after_expires_at(store: RedisTaskStore, raw: Any) -> None:
    p = store.prefix
    record = _record(ttl_ms=600_000, idempotency_key="k")
    await store.create(record)
    assert record.expires_at is not None
    key = f"{p}:task:{record.task_id}"
    expected_ms = int(record.expires_at * 1000) + KEY_TTL_GRACE_MS
    assert abs(await raw.pexpiretime(key) - expected_ms) <= 1
    idem_keys = [k for k in await _keys(raw, p) if k.startswith(f"{p}:idem:")]
    assert len(idem_keys) == 1 and await raw.pexpiretime(idem_keys[0]) == await raw.pexpiretime(key)
    assert await raw.zscore(f"{p}:expiry", record.task_id) == record.expires_at
    forever = record.evolve(ttl_ms=None)
    assert await store.replace(forever, expected_version=0)
    assert await raw.pttl(key) == -1 and await raw.pttl(idem_keys[0]) == -1
    assert await raw.zscore(f"{p}:expiry", record.task_id) is None
    assert await store.delete_expired(time.time() + 10**9) == 0


@pytest.mark.anyio
async def test_get_hides_a_record_exactly_at_expires_at(store: RedisTaskStore) -> None:
    record = _record(created_at=time.time() - 1.0, ttl_ms=1000)  # expires_at is (about) now
    await store.create(record)
    assert await store.get(record.task_id) is None  # its key still exists (grace), yet it is gone


@pytest.mark.anyio
async def test_delete_expired_leaves_no_keys_behind(store: RedisTaskStore, raw: Any) -> None:
    now = time.time()
    records = [
        _record(created_at=now, ttl_ms=1000 + i, idempotency_key=f"k{i}", status=status)
        for i, status in enumerate(["working", "input_required", "completed"] * 400)
    ]
    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(store.create, record)
    assert await store.delete_expired(now) == 0
    assert await store.delete_expired(now + 3600) == len(records)  # several script runs
    assert await _keys(raw, store.prefix) == set()


# -- retried calls (a reply lost after the script ran) -----------------------------------------


@pytest.mark.anyio
async def test_a_retried_create_or_replace_is_recognised(store: RedisTaskStore) -> None:
    record = _record()
    assert await store._create(record, "call-1") is record
    assert await store._create(record, "call-1") is record  # the retry: no TaskExists
    with pytest.raises(TaskExists):
        await store._create(record, "call-2")
    changed = record.evolve(status="completed")
    assert await store._replace(changed, 0, "call-3")
    changed.version = 0
    assert await store._replace(changed, 0, "call-3")  # the retry of the winning call
    assert changed.version == 1
    assert not await store._replace(record.evolve(), 0, "call-4")
    assert await store.get(record.task_id) == changed


@pytest.mark.anyio
async def test_a_retried_claim_returns_the_same_records(store: RedisTaskStore) -> None:
    now = time.time()
    records = [_record(created_at=now + i) for i in range(5)]
    for record in records:
        await store.create(record)
    first = await store._claim("w", 2, "claim-1")
    again = await store._claim("w", 2, "claim-1")
    assert [r.task_id for r in first] == [r.task_id for r in again] == [r.task_id for r in records[:2]]
    assert [r.task_id for r in await store._claim("w", 10, "claim-2")] == [r.task_id for r in records[2:]]


# -- notifications -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_close_ends_open_subscriptions(store: RedisTaskStore) -> None:
    async with store.subscribe() as events:
        ended = anyio.Event()

        async def drain() -> None:
            async for _ in events:
                pass
            ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            await store.close()
            with anyio.fail_after(10):
                await ended.wait()


@pytest.mark.anyio
async def test_subscription_survives_a_dropped_connection(prefix: str, raw: Any) -> None:
    name = f"t{uuid.uuid4().hex}"
    client = redis_asyncio.Redis.from_url(URL, client_name=name)
    store = RedisTaskStore(URL, prefix=prefix, client=client)
    await store.open()
    try:
        async with store.subscribe() as events:
            await store.publish("before")
            with anyio.fail_after(10):
                assert await events.__anext__() == "before"
            clients = cast(list[dict[str, Any]], await raw.client_list())
            pubsub = [c for c in clients if c.get("name") == name and "P" in c.get("flags", "")]
            assert len(pubsub) == 1
            await raw.client_kill_filter(_id=pubsub[0]["id"])
            # Pub/sub keeps nothing: ids published while the subscriber reconnects are lost, so
            # keep publishing (a retry, not a timing assumption) until one arrives.
            received = anyio.Event()

            async def keep_publishing() -> None:
                while not received.is_set():
                    await store.publish("after")
                    await anyio.sleep(0.02)

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(keep_publishing)
                    assert await events.__anext__() == "after"
                    received.set()
    finally:
        await store.close()
        await client.aclose()


@pytest.mark.anyio
async def test_subscription_reconnects_after_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """When redis-py gives up on the connection, the iterator waits and tries again."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from mcptasks.stores import redis as redis_store

    monkeypatch.setattr(redis_store, "_RESUBSCRIBE_BACKOFF", (0.0, 0.0))
    replies: list[Any] = [
        RedisConnectionError("down"),
        RedisConnectionError("still down"),
        {"type": "subscribe", "data": 1},
        {"type": "message", "data": b"t-1"},
    ]

    class FakePubSub:
        async def subscribe(self, *channels: str) -> None:
            raise AssertionError("not used")  # pragma: no cover

        async def get_message(
            self,
            ignore_subscribe_messages: bool = False,
            timeout: float | None = 0.0,  # noqa: ASYNC109 -- redis-py's signature
        ) -> Any:
            reply = replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

        async def aclose(self) -> None:
            pass  # pragma: no cover

    subscription = redis_store._Subscription(FakePubSub())
    with anyio.fail_after(10):
        assert await subscription.__anext__() == "t-1"
    subscription.stop()
    with pytest.raises(StopAsyncIteration):
        await subscription.__anext__()


@pytest.mark.anyio
async def test_replace_moves_the_idempotency_key(store: RedisTaskStore) -> None:
    record = _record(idempotency_key="old")
    await store.create(record)
    moved = record.evolve(idempotency_key="new")
    assert await store.replace(moved, expected_version=0)
    fresh = await store.create(_record(idempotency_key="old"))
    assert fresh.task_id != record.task_id  # "old" was released
    assert (await store.create(_record(idempotency_key="new"))).task_id == record.task_id
    assert (await store.create(_record(owner="bob", idempotency_key="new"))).task_id != record.task_id


# -- the journal -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_journal_key_expires_with_its_record(store: RedisTaskStore, raw: Any) -> None:
    p = store.prefix
    record = _record(ttl_ms=600_000)
    await store.create(record)
    key, journal = f"{p}:task:{record.task_id}", f"{p}:journal:{record.task_id}"
    assert await store.append_journal(record.task_id, 0, '"zero"') == '"zero"'
    assert abs(await raw.pexpiretime(journal) - await raw.pexpiretime(key)) <= 1
    longer = record.evolve(ttl_ms=1_200_000)  # a replace that moves the expiry moves the journal's
    assert await store.replace(longer, expected_version=0)
    assert await raw.pexpiretime(journal) == await raw.pexpiretime(key)
    forever = longer.evolve(ttl_ms=None)
    assert await store.replace(forever, expected_version=1)
    assert await raw.pttl(key) == -1 and await raw.pttl(journal) == -1
    endless = await store.create(_record())
    assert await store.append_journal(endless.task_id, 0, '"zero"') == '"zero"'
    assert await raw.pttl(f"{p}:journal:{endless.task_id}") == -1


@pytest.mark.anyio
async def test_delete_expired_and_purge_delete_the_journal_keys(store: RedisTaskStore, raw: Any) -> None:
    now = time.time()
    expiring = [await store.create(_record(created_at=now, ttl_ms=60_000)) for _ in range(3)]
    finished = [await store.create(_record()) for _ in range(3)]
    for record in (*expiring, *finished):
        assert await store.append_journal(record.task_id, 0, '"zero"') == '"zero"'
    for record in finished:
        assert await store.replace(record.evolve(status="completed"), expected_version=0)
    journals = {k for k in await _keys(raw, store.prefix) if k.startswith(f"{store.prefix}:journal:")}
    assert len(journals) == 6
    assert await store.delete_expired(now + 61) == 3
    assert await store.purge({"completed"}, time.time() + 1) == 3
    assert await _keys(raw, store.prefix) == set()


@pytest.mark.anyio
async def test_a_retried_append_returns_the_entry(store: RedisTaskStore) -> None:
    record = await store.create(_record())
    assert await store.append_journal(record.task_id, 0, '"zero"') == '"zero"'
    # a client retrying after a lost reply appends the same position again: harmless
    assert await store.append_journal(record.task_id, 0, '"zero"') == '"zero"'
    assert await store.read_journal(record.task_id) == ['"zero"']
