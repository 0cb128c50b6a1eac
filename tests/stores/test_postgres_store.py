"""`PostgresTaskStore`: the store contract plus what only a shared server can show (migration
races, cross-instance CAS and claims, LISTEN/NOTIFY, a lost listening connection).

Needs PostgreSQL at 127.0.0.1:5432 (trust auth, database `test`), or the server named by
`MCPTASKS_TEST_POSTGRES_URL`. Every test works in a schema of its own, dropped afterwards, so
several test runs can share one database.
"""

from __future__ import annotations

import math
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import pytest

from mcptasks.stores.base import TaskRecord, TaskStore
from mcptasks.testing import StoreContract

asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is not installed (pip install -e '.[postgres]')")

from mcptasks.stores import postgres as postgres_module  # noqa: E402  (needs asyncpg)
from mcptasks.stores.postgres import (  # noqa: E402
    SCHEMA_VERSION,
    DatabaseNotFound,
    PostgresTaskStore,
    SchemaVersionError,
)
from mcptasks.stores.url import store_from_url  # noqa: E402

URL = os.environ.get("MCPTASKS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _server_listening(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), timeout=1.0):
            return True
    except OSError:
        return False


if not _server_listening(URL):
    _where = urlsplit(URL)
    pytest.skip(
        f"PostgreSQL is not reachable at {_where.hostname}:{_where.port or 5432}; start it with "
        "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
        "(or point MCPTASKS_TEST_POSTGRES_URL at a server)",
        allow_module_level=True,
    )


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    """A fresh schema name; the schema is dropped after the test."""
    name = f"mcptasks_test_{uuid.uuid4().hex}"
    yield name
    conn = await asyncpg.connect(URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def sql() -> AsyncIterator[Any]:
    """A plain connection for looking at (and tampering with) the tables."""
    conn = await asyncpg.connect(URL)
    try:
        yield conn
    finally:
        await conn.close()


async def _open(schema: str, **options: Any) -> PostgresTaskStore:
    store = PostgresTaskStore(URL, schema=schema, **options)
    await store.open()
    return store


def _record(**changes: Any) -> TaskRecord:
    fields: dict[str, Any] = {"task_id": f"pg-{uuid.uuid4().hex}", "owner": "alice", "tool": "slow_tool"}
    fields.update(changes)
    return TaskRecord(**fields)


class TestPostgresStore(StoreContract):
    durable = True
    shared_notifications = True
    checks_open = True

    @pytest.fixture
    async def store(self, schema: str) -> AsyncIterator[TaskStore]:
        store = await _open(schema)
        yield store
        await store.close()

    async def reopen(self, store: TaskStore) -> TaskStore:
        assert isinstance(store, PostgresTaskStore)
        return await _open(store.schema)

    def unopened(self, store: TaskStore) -> TaskStore:
        assert isinstance(store, PostgresTaskStore)
        return PostgresTaskStore(URL, schema=store.schema)


# -- schema and migrations -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_open_records_the_schema_version(schema: str, sql: Any) -> None:
    store = await _open(schema)
    await store.close()
    rows = await sql.fetch(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert [row["version"] for row in rows] == list(range(1, SCHEMA_VERSION + 1))
    tables = await sql.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
    )
    assert {row["table_name"] for row in tables} == {"schema_version", "tasks", "runners", "journal"}
    indexes = await sql.fetch("SELECT indexname FROM pg_indexes WHERE schemaname = $1", schema)
    assert {"tasks_idempotency", "tasks_queued", "tasks_expires_at"} <= {row["indexname"] for row in indexes}
    again = await _open(schema)  # an up-to-date schema is left alone
    await again.close()
    assert await sql.fetchval(f'SELECT count(*) FROM "{schema}".schema_version') == SCHEMA_VERSION


@pytest.mark.anyio
async def test_a_newer_schema_is_refused(schema: str, sql: Any) -> None:
    store = await _open(schema)
    await store.close()
    await sql.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES ($1)', SCHEMA_VERSION + 1)
    newer = PostgresTaskStore(URL, schema=schema)
    with pytest.raises(SchemaVersionError, match=f"version {SCHEMA_VERSION + 1}.*upgrade mcptasks"):
        await newer.open()
    with pytest.raises(RuntimeError, match="not open"):
        await newer.get("anything")
    await newer.close()


@pytest.mark.anyio
async def test_a_foreign_tasks_table_is_refused(schema: str, sql: Any) -> None:
    await sql.execute(f'CREATE SCHEMA "{schema}"')
    await sql.execute(f'CREATE TABLE "{schema}".tasks (id int)')
    with pytest.raises(SchemaVersionError, match="did not create"):
        await _open(schema)


@pytest.mark.anyio
async def test_a_new_migration_is_applied_to_an_existing_schema(
    schema: str, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await _open(schema)
    record = _record()
    await store.create(record)
    await store.close()
    extra = ("CREATE INDEX tasks_tool ON {s}.tasks (tool)",)
    monkeypatch.setattr(postgres_module, "_MIGRATIONS", (*postgres_module._MIGRATIONS, extra))
    upgraded = await _open(schema)
    try:
        assert await upgraded.get(record.task_id) == record
    finally:
        await upgraded.close()
    rows = await sql.fetch(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert [row["version"] for row in rows] == list(range(1, SCHEMA_VERSION + 2))
    assert await sql.fetchval(
        "SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = 'tasks_tool'", schema
    )


@pytest.mark.anyio
async def test_concurrent_opens_of_a_fresh_schema_all_succeed(schema: str, sql: Any) -> None:
    stores = [PostgresTaskStore(URL, schema=schema) for _ in range(3)]
    async with anyio.create_task_group() as group:
        for store in stores:
            group.start_soon(store.open)
    try:
        record = _record()
        await stores[0].create(record)
        for store in stores:
            assert await store.get(record.task_id) == record
    finally:
        for store in stores:
            await store.close()
    assert await sql.fetchval(f'SELECT count(*) FROM "{schema}".schema_version') == SCHEMA_VERSION


@pytest.mark.anyio
async def test_a_version_1_schema_is_migrated_to_the_journal(schema: str, sql: Any) -> None:
    await sql.execute(f'CREATE SCHEMA "{schema}"')
    await sql.execute(
        f'CREATE TABLE "{schema}".schema_version (version integer PRIMARY KEY, '
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for statement in postgres_module._MIGRATIONS[0]:
        await sql.execute(statement.format(s=f'"{schema}"'))
    await sql.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES (1)')
    await sql.execute(
        f'INSERT INTO "{schema}".tasks (task_id, owner, tool, status, version, created_at, updated_at, body) '
        "VALUES ('t1', 'o', 'tool', 'working', 3, 1.0, 2.0, '{\"status_message\":\"hi\"}')"
    )
    reader = PostgresTaskStore(URL, schema=schema)
    with pytest.raises(SchemaVersionError, match=r"version 1, older.*does not migrate"):
        await reader.open_existing()
    assert await sql.fetchval("SELECT to_regclass($1)", f'"{schema}".journal') is None  # untouched
    store = PostgresTaskStore(URL, schema=schema)
    await store.open_existing(migrate=True)
    try:
        record = await store.get("t1")
        assert record is not None and record.status_message == "hi" and record.version == 3
        assert await store.append_journal("t1", 0, '"zero"') == '"zero"'
        assert await store.read_journal("t1") == ['"zero"']
    finally:
        await store.close()
    rows = await sql.fetch(f'SELECT version FROM "{schema}".schema_version ORDER BY version')
    assert [row["version"] for row in rows] == list(range(1, SCHEMA_VERSION + 1)) == [1, 2]


@pytest.mark.anyio
async def test_every_delete_of_a_task_deletes_its_journal_rows(schema: str, sql: Any) -> None:
    store = await _open(schema)
    try:
        now = time.time()
        expiring = await store.create(_record(created_at=now, ttl_ms=60_000))
        finished = await store.create(_record())
        kept = await store.create(_record())
        for record in (expiring, finished, kept):
            for position in range(3):
                assert await store.append_journal(record.task_id, position, f"{position}") == f"{position}"
        assert await store.replace(finished.evolve(status="failed"), expected_version=0)
        assert await store.delete_expired(now + 61) == 1
        assert await store.purge({"failed"}, time.time() + 1) == 1
        rows = await sql.fetch(f'SELECT DISTINCT task_id FROM "{schema}".journal')
        assert [row["task_id"] for row in rows] == [kept.task_id]
        await sql.execute(f'DELETE FROM "{schema}".tasks WHERE task_id = $1', kept.task_id)
        assert await sql.fetchval(f'SELECT count(*) FROM "{schema}".journal') == 0
    finally:
        await store.close()


@pytest.mark.anyio
async def test_an_idempotency_takeover_deletes_the_expired_holders_journal(schema: str, sql: Any) -> None:
    store = await _open(schema)
    try:
        holder = await store.create(
            _record(idempotency_key="nightly", created_at=time.time() - 59.4, ttl_ms=60_000)
        )
        assert await store.append_journal(holder.task_id, 0, '"old"') == '"old"'
        await anyio.sleep(0.7)  # the holder expires
        taker = await store.create(_record(idempotency_key="nightly"))
        assert taker.task_id != holder.task_id and await store.get(taker.task_id) == taker
        assert await store.read_journal(taker.task_id) == []
        assert await sql.fetchval(f'SELECT count(*) FROM "{schema}".journal') == 0
        assert await store.append_journal(taker.task_id, 0, '"new"') == '"new"'
    finally:
        await store.close()


@pytest.mark.anyio
async def test_an_append_is_one_round_trip(schema: str) -> None:
    store = await _open(schema)
    pool: Any = store._pool()
    calls: list[str] = []

    class Counting:
        """The pool, counting the statements sent through it."""

        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(pool, name)

    try:
        record = await store.create(_record())
        store._pool_ = cast(Any, Counting())
        assert await store.append_journal(record.task_id, 0, '"zero"') == '"zero"'
        assert await store.append_journal(record.task_id, 0, '"again"') == '"zero"'
        with pytest.raises(ValueError, match="beyond the end"):
            await store.append_journal(record.task_id, 5, '"gap"')
        assert calls == ["fetchrow"] * 3
        with pytest.raises(ValueError, match="NUL"):
            await store.append_journal(record.task_id, 1, '"\x00"')
    finally:
        store._pool_ = pool
        await store.close()


# -- configuration and lifecycle -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "Upper", "1st", "with-dash", 'quo"te', "sp ace", "pg_reserved", "x" * 56, "ünï"]
)
def test_an_invalid_schema_name_is_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="schema"):
        PostgresTaskStore(URL, schema=name)


def test_the_schema_can_come_from_the_url() -> None:
    assert PostgresTaskStore(URL).schema == "mcptasks"
    assert PostgresTaskStore(f"{URL}?schema=from_url").schema == "from_url"
    assert PostgresTaskStore(f"{URL}?schema=same", schema="same").schema == "same"
    with pytest.raises(ValueError, match="URL names schema"):
        PostgresTaskStore(f"{URL}?schema=one", schema="other")
    with pytest.raises(ValueError, match="schema"):
        PostgresTaskStore(f"{URL}?schema=Bad-Name")


def test_the_password_is_not_shown() -> None:
    store = PostgresTaskStore("postgresql://user:s3cret@db.example:5433/tasks?sslmode=require")
    assert "s3cret" not in repr(store) and "s3cret" not in store.url
    assert store.url == "user@db.example:5433/tasks"


@pytest.mark.anyio
async def test_unreachable_server_raises_connection_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresTaskStore(f"postgresql://postgres:pw@127.0.0.1:{port}/test", connect_timeout=5)
    with pytest.raises(
        ConnectionError, match=re.escape(f"cannot reach PostgreSQL at postgres@127.0.0.1:{port}/test")
    ) as info:
        await store.open()
    assert "pw" not in str(info.value)
    with pytest.raises(RuntimeError, match="not open"):
        await store.get("anything")


@pytest.mark.anyio
async def test_an_unknown_database_says_how_to_create_it(schema: str) -> None:
    name = f"no_such_db_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(URL)
    url = f"postgresql://{parts.username or 'postgres'}:s3cret@{parts.hostname}:{parts.port or 5432}/{name}"
    store = PostgresTaskStore(url, schema=schema)
    with pytest.raises(DatabaseNotFound) as info:  # a ConnectionError, as open() documents
        await store.open()
    message = str(info.value)
    assert isinstance(info.value, ConnectionError)
    assert f'database "{name}" does not exist on the PostgreSQL server at ' in message, message
    assert f'create it with `createdb {name}` or `CREATE DATABASE "{name}";`' in message, message
    assert "s3cret" not in message and "is running" not in message


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_trio_is_refused_clearly(anyio_backend: str) -> None:
    store = PostgresTaskStore(URL, schema="never_created")
    with pytest.raises(RuntimeError, match="asyncio"):
        await store.open()


@pytest.mark.anyio
async def test_store_from_url(schema: str) -> None:
    default = store_from_url(URL)
    assert isinstance(default, PostgresTaskStore) and default.schema == "mcptasks" and default.durable
    assert isinstance(store_from_url(URL.replace("postgresql://", "postgres://", 1)), PostgresTaskStore)
    store = store_from_url(f"{URL}?schema={schema}")
    assert isinstance(store, PostgresTaskStore) and store.schema == schema
    await store.open()
    try:
        record = _record()
        await store.create(record)
        assert await store.get(record.task_id) == record
    finally:
        await store.close()


# -- data fidelity -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_json_the_jsonb_type_would_change_round_trips_exactly(schema: str) -> None:
    arguments = {
        "zeta": 1e300,
        "alpha": 1e16,
        "neg_zero": -0.0,
        "smallest": 5e-324,
        "nul": "a\x00b",
        "lone_surrogate": "\ud800",
        "big": 2**63 + 1,
        "dup_looking": {"b": 1, "a": 2},
    }
    store = await _open(schema)
    try:
        record = _record(arguments=arguments, status_message="nul \x00 inside the body is fine")
        await store.create(record)
        fetched = await store.get(record.task_id)
        assert fetched == record
        assert fetched is not None
        got = fetched.arguments
        assert list(got) == list(arguments) and list(got["dup_looking"]) == ["b", "a"]
        assert type(got["zeta"]) is float and got["zeta"] == 1e300
        assert type(got["alpha"]) is float
        assert math.copysign(1.0, got["neg_zero"]) == -1.0
        assert got["nul"] == "a\x00b" and got["lone_surrogate"] == "\ud800"
    finally:
        await store.close()


@pytest.mark.anyio
async def test_values_postgres_cannot_store_raise_value_error(schema: str) -> None:
    store = await _open(schema)
    try:
        with pytest.raises(ValueError, match="NUL"):
            await store.create(_record(idempotency_key="k\x00"))
        with pytest.raises(ValueError, match="cannot be stored as JSON"):
            await store.create(_record(arguments={"x": math.nan}))
        record = _record()
        await store.create(record)
        assert not await store.replace(record, expected_version=5)
        with pytest.raises(ValueError, match="JSON"):
            await store.replace(record.evolve(result={"v": math.inf}), expected_version=0)
        assert await store.get(record.task_id) == record
    finally:
        await store.close()


# -- concurrency across instances ----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_thousand_concurrent_creates_land(schema: str, sql: Any) -> None:
    store = await _open(schema)
    try:
        records = [_record(arguments={"i": i}) for i in range(1000)]
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for record in records:
                    group.start_soon(store.create, record)
        assert await sql.fetchval(f'SELECT count(*) FROM "{schema}".tasks') == 1000
        for record in records[::97]:
            assert await store.get(record.task_id) == record
    finally:
        await store.close()


@pytest.mark.anyio
async def test_concurrent_creates_with_one_idempotency_key_make_one_task(schema: str) -> None:
    first, second = await _open(schema), await _open(schema)
    try:
        results: list[TaskRecord] = []

        async def create(target: PostgresTaskStore) -> None:
            results.append(await target.create(_record(idempotency_key="same")))

        async with anyio.create_task_group() as group:
            for i in range(20):
                group.start_soon(create, (first, second)[i % 2])
        assert len({r.task_id for r in results}) == 1
        assert len(await first.list_active()) == 1
    finally:
        await first.close()
        await second.close()


@pytest.mark.anyio
async def test_an_expired_key_holder_is_replaced_not_duplicated(schema: str, sql: Any) -> None:
    store = await _open(schema)
    try:
        old = await store.create(_record(idempotency_key="k", created_at=time.time() - 60, ttl_ms=1000))
        fresh = await store.create(_record(idempotency_key="k"))
        assert fresh.task_id != old.task_id
        assert await store.create(_record(idempotency_key="k")) == fresh
        rows = await sql.fetch(f'SELECT task_id FROM "{schema}".tasks')
        assert [row["task_id"] for row in rows] == [fresh.task_id]
    finally:
        await store.close()


@pytest.mark.anyio
async def test_claimers_on_two_instances_never_share_a_record(schema: str, sql: Any) -> None:
    first, second = await _open(schema), await _open(schema)
    try:
        now = time.time()
        queued = [_record(created_at=now - 1000 + i) for i in range(200)]
        async with anyio.create_task_group() as group:
            for record in queued:
                group.start_soon(first.create, record)
        claims: dict[str, list[TaskRecord]] = {}

        async def claimer(name: str, target: PostgresTaskStore) -> None:
            mine = claims.setdefault(name, [])
            while batch := await target.claim(name, 10):
                assert len(batch) <= 10
                assert [r.created_at for r in batch] == sorted(r.created_at for r in batch)
                mine.extend(batch)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for n in range(4):
                    group.start_soon(claimer, f"worker-{n}", (first, second)[n % 2])
        taken = [r.task_id for got in claims.values() for r in got]
        assert len(taken) == len(set(taken)) == 200
        assert set(taken) == {r.task_id for r in queued}
        rows = await sql.fetch(f'SELECT task_id, runner, version FROM "{schema}".tasks')
        owner_of = {r.task_id: name for name, got in claims.items() for r in got}
        assert all(row["runner"] == owner_of[row["task_id"]] and row["version"] == 1 for row in rows)
        assert await first.claim("late", 10) == []
    finally:
        await first.close()
        await second.close()


# -- notifications -------------------------------------------------------------------------------


async def _receive(events: AsyncIterator[str], expected: set[str]) -> None:
    missing = set(expected)
    with anyio.fail_after(10):
        while missing:
            missing.discard(await events.__anext__())


@pytest.mark.anyio
async def test_subscriptions_share_one_listening_connection(schema: str, sql: Any) -> None:
    store = await _open(schema, min_size=1, max_size=2)
    listening = f'LISTEN "{schema}_changes"'
    count = "SELECT count(*) FROM pg_stat_activity WHERE query = $1"
    try:
        async with store.subscribe() as first, store.subscribe() as second, store.subscribe() as third:
            assert await sql.fetchval(count, listening) == 1
            task_id = f"pg-{uuid.uuid4().hex}"
            await store.publish(task_id)
            for events in (first, second, third):
                await _receive(events, {task_id})
        assert await sql.fetchval(count, listening) == 0  # closed with the last subscription
    finally:
        await store.close()


@pytest.mark.anyio
async def test_close_ends_open_subscriptions(schema: str) -> None:
    store = await _open(schema)
    async with store.subscribe() as events:
        await store.close()
        with anyio.fail_after(10):
            assert [task_id async for task_id in events] == []


@pytest.mark.anyio
async def test_a_lost_listening_connection_is_restored(schema: str, sql: Any) -> None:
    store = await _open(schema)
    try:
        active = await store.create(_record())
        async with store.subscribe() as events:
            killed = await sql.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
                f'LISTEN "{schema}_changes"',
            )
            assert killed == 1
            # After reconnecting, the store announces every active task (wake-ups may have been lost).
            await _receive(events, {active.task_id})
            task_id = f"pg-{uuid.uuid4().hex}"
            await store.publish(task_id)
            await _receive(events, {task_id})
    finally:
        await store.close()
