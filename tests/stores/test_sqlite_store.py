"""SQLite-specific behaviour of `SqliteTaskStore` (the shared contract is in test_store_contract)."""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import wait_idle

from mcptasks import EngineConfig, Result, task_tool
from mcptasks.lowlevel import ANONYMOUS_OWNER, TaskEngine
from mcptasks.stores.base import TaskExists, TaskRecord
from mcptasks.stores.sqlite import (
    CHECKPOINT_EVERY,
    SCHEMA_VERSION,
    SchemaVersionError,
    SqliteTaskStore,
    migrate,
)
from mcptasks.stores.url import store_from_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """SQLite runs on asyncio and on trio (the directory's default is asyncio)."""
    return str(request.param)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteTaskStore]:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.open()
    yield store
    await store.close()


def _pragma(path: Path, name: str) -> object:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


async def test_wal_mode_and_schema_version(store: SqliteTaskStore, tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    assert _pragma(path, "journal_mode") == "wal"
    assert _pragma(path, "user_version") == SCHEMA_VERSION == 3
    assert store.durable is True


async def test_memory_database_is_not_durable() -> None:
    store = SqliteTaskStore(":memory:")
    assert store.durable is False
    assert SqliteTaskStore("x.db").durable is True
    await store.open()
    try:
        await store.create(TaskRecord(task_id="t", owner="o", tool="x"))
        assert await store.get("t") is not None
    finally:
        await store.close()


async def test_reopen_keeps_schema_and_data(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    for attempt in range(3):
        store = SqliteTaskStore(path)
        await store.open()
        try:
            if attempt == 0:
                await store.create(TaskRecord(task_id="t", owner="o", tool="x"))
            assert await store.get("t") is not None
        finally:
            await store.close()
    assert _pragma(path, "user_version") == SCHEMA_VERSION


async def test_a_record_written_before_client_capabilities_reads_as_unrestricted(tmp_path: Path) -> None:
    # 0.1 bodies have no `client_capabilities` key; such tasks may ask for any input, as before.
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    await store.open()
    try:
        await store.create(TaskRecord(task_id="old", owner="o", tool="x", client_capabilities={"roots": {}}))
        conn = sqlite3.connect(path)
        try:
            with conn:
                conn.execute("UPDATE tasks SET body = json_remove(body, '$.client_capabilities')")
            (body,) = conn.execute("SELECT body FROM tasks").fetchone()
        finally:
            conn.close()
        assert "client_capabilities" not in body
        record = await store.get("old")
    finally:
        await store.close()
    assert record is not None and record.client_capabilities is None


async def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    store = SqliteTaskStore(path)
    with pytest.raises(SchemaVersionError, match=rf"schema version {SCHEMA_VERSION + 1}.*upgrade mcptasks"):
        await store.open()
    assert isinstance(SchemaVersionError("x"), RuntimeError)
    with pytest.raises(RuntimeError, match="not open"):
        await store.get("t")
    await store.close()  # nothing to close, must not fail
    assert _pragma(path, "user_version") == SCHEMA_VERSION + 1  # untouched


async def test_foreign_tasks_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="did not create"):
        await SqliteTaskStore(path).open()


def test_migrate_is_a_no_op_when_current() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        assert migrate(conn) == 0
        assert migrate(conn) == SCHEMA_VERSION
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"tasks", "tasks_status", "tasks_expires_at"} <= tables
    finally:
        conn.close()


async def test_many_concurrent_creates_all_land(store: SqliteTaskStore, tmp_path: Path) -> None:
    records = [
        TaskRecord(task_id=f"task-{i}", owner=f"o{i % 7}", tool="t", arguments={"i": i}) for i in range(500)
    ]
    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(store.create, record)
    for record in records:
        assert await store.get(record.task_id) == record
    conn = sqlite3.connect(tmp_path / "tasks.db")
    try:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone()[0] == 500
    finally:
        conn.close()


async def test_a_write_waits_in_the_worker_thread_while_another_connection_holds_the_lock(
    store: SqliteTaskStore, tmp_path: Path
) -> None:
    # A point operation on an idle store runs on the event loop without waiting for locks; when
    # another connection holds the write lock it goes to the worker thread, which waits.
    other = sqlite3.connect(tmp_path / "tasks.db", isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        landed = anyio.Event()
        waited = TaskRecord(task_id="waited", owner="o", tool="t")

        async def create() -> None:
            await store.create(waited)
            landed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            for _ in range(20):  # the event loop is free meanwhile; the write cannot land
                await anyio.sleep(0.01)
            assert not landed.is_set()
            other.execute("COMMIT")
            with anyio.fail_after(10):
                await landed.wait()
    finally:
        other.close()
    assert await store.get("waited") == waited


async def test_the_wal_is_checkpointed_into_the_database_file(store: SqliteTaskStore, tmp_path: Path) -> None:
    # SQLite's automatic checkpoint is off (it would run inside a commit on the event loop); the
    # store checkpoints in its worker thread every CHECKPOINT_EVERY commits instead.
    count = 3 * CHECKPOINT_EVERY + 10
    for i in range(count):
        await store.create(TaskRecord(task_id=f"w-{i}", owner="o", tool="t"))
    copy = tmp_path / "main-file-only.db"
    shutil.copyfile(tmp_path / "tasks.db", copy)  # without the -wal file: what was checkpointed
    conn = sqlite3.connect(copy)
    try:
        in_file = conn.execute("SELECT count(*) FROM tasks").fetchone()[0]
    finally:
        conn.close()
    assert 2 * CHECKPOINT_EVERY <= in_file <= count
    assert await store.get(f"w-{count - 1}") is not None


async def test_duplicate_in_a_batch_fails_only_its_caller(store: SqliteTaskStore, tmp_path: Path) -> None:
    # Two creates per id in one batch: one lands whole (the one whose caller got its record
    # back), the other caller alone gets TaskExists and its record leaves no trace.
    records = [
        TaskRecord(task_id=f"dup-{i // 2}", owner="o", tool="t", arguments={"i": i}) for i in range(100)
    ]
    outcomes: dict[int, TaskRecord | TaskExists] = {}

    async def create(i: int) -> None:
        try:
            outcomes[i] = await store.create(records[i])
        except TaskExists as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(create, i)
    assert sorted(outcomes) == list(range(100))
    for pair in range(50):
        first, second = 2 * pair, 2 * pair + 1
        won, lost = (first, second) if isinstance(outcomes[first], TaskRecord) else (second, first)
        assert outcomes[won] is records[won]
        refused = outcomes[lost]
        assert isinstance(refused, TaskExists) and refused.args == (f"dup-{pair}",)
        stored = await store.get(f"dup-{pair}")
        assert stored == records[won]  # the winner's record as given: its arguments, not the loser's
        assert stored is not None
        assert (stored.arguments, stored.status, stored.version) == ({"i": won}, "working", 0)
    conn = sqlite3.connect(tmp_path / "tasks.db")
    try:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone()[0] == 50
    finally:
        conn.close()


async def test_concurrent_replaces_of_one_version_have_one_winner(store: SqliteTaskStore) -> None:
    created = await store.create(TaskRecord(task_id="cas", owner="o", tool="t"))
    writes = [created.evolve(status_message=f"writer {i}") for i in range(50)]
    won: dict[int, bool] = {}

    async def replace(i: int) -> None:
        won[i] = await store.replace(writes[i], expected_version=created.version)

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(replace, i)
    winners = [i for i in range(50) if won[i]]
    assert len(winners) == 1 and len(won) == 50  # every other writer got False
    (winner,) = winners
    stored = await store.get("cas")
    assert stored == writes[winner]
    assert stored is not None and (stored.status_message, stored.version) == (f"writer {winner}", 1)
    assert [write.version for i, write in enumerate(writes) if i != winner] == [0] * 49  # not bumped
    loser = next(i for i in range(50) if i != winner)
    assert not await store.replace(writes[loser], expected_version=0)  # a late retry loses, too
    assert await store.get("cas") == writes[winner]


async def test_unserialisable_record_fails_only_its_caller(store: SqliteTaskStore) -> None:
    good = TaskRecord(task_id="good", owner="o", tool="t")
    bad = TaskRecord(task_id="bad", owner="o", tool="t", arguments={"x": object()})
    results: dict[str, BaseException | None] = {}

    async def create(record: TaskRecord) -> None:
        try:
            await store.create(record)
            results[record.task_id] = None
        except Exception as exc:
            results[record.task_id] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(create, good)
        tg.start_soon(create, bad)
    assert results["good"] is None
    assert isinstance(results["bad"], TypeError)
    assert await store.get("good") == good
    assert await store.get("bad") is None


async def test_cancelled_callers_do_not_wedge_the_store(store: SqliteTaskStore, tmp_path: Path) -> None:
    # Another connection holds the write lock: the first create leads a batch that waits for it
    # in the worker thread, and every later create queues behind. Then the leader's caller is
    # cancelled (its batch is in flight: it lands and the caller still gets its record) and so
    # is every odd queued caller (never taken: nothing of theirs lands); then the lock goes.
    lead = TaskRecord(task_id="lead", owner="o", tool="t")
    queued = [TaskRecord(task_id=f"c-{i}", owner="o", tool="t", arguments={"i": i}) for i in range(40)]
    outcomes: dict[str, TaskRecord | None] = {}
    """What each caller got back; None: its create was cancelled."""
    scopes: dict[str, anyio.CancelScope] = {}

    async def create(record: TaskRecord) -> None:
        with anyio.CancelScope() as scope:
            scopes[record.task_id] = scope
            outcomes[record.task_id] = await store.create(record)
            return
        outcomes[record.task_id] = None

    other = sqlite3.connect(tmp_path / "tasks.db", isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        async with anyio.create_task_group() as tg:
            tg.start_soon(create, lead)
            await anyio.wait_all_tasks_blocked()  # the leader waits for the lock in the thread
            for record in queued:
                tg.start_soon(create, record)
            await anyio.wait_all_tasks_blocked()  # and the others wait in the queue
            scopes["lead"].cancel()
            for record in queued[1::2]:
                scopes[record.task_id].cancel()
            await anyio.wait_all_tasks_blocked()  # the cancelled queued callers have left
            assert outcomes == {record.task_id: None for record in queued[1::2]}
            other.execute("COMMIT")
    finally:
        other.close()
    kept = [lead, *queued[::2]]
    assert outcomes == {
        **{record.task_id: record for record in kept},
        **{record.task_id: None for record in queued[1::2]},
    }
    for record in kept:
        assert await store.get(record.task_id) == record
    for record in queued[1::2]:
        assert await store.get(record.task_id) is None
    # the queue still works
    with anyio.fail_after(10):
        after = await store.create(TaskRecord(task_id="after", owner="o", tool="t"))
    assert await store.get("after") == after
    conn = sqlite3.connect(tmp_path / "tasks.db")
    try:
        stored_ids = {row[0] for row in conn.execute("SELECT task_id FROM tasks")}
        assert stored_ids == {record.task_id for record in [*kept, after]}
    finally:
        conn.close()


async def test_use_before_open_says_how_to_open_and_creates_no_file(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    with pytest.raises(RuntimeError, match=r"not open.*open\(\)"):
        await store.create(TaskRecord(task_id="t", owner="o", tool="t"))
    assert not (tmp_path / "tasks.db").exists()


async def test_close_waits_for_queued_operations(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.open()
    records = [TaskRecord(task_id=f"q-{i}", owner="o", tool="t", arguments={"i": i}) for i in range(50)]
    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(store.create, record)
        await anyio.wait_all_tasks_blocked()  # every create is queued or running
        await store.close()
    reopened = SqliteTaskStore(tmp_path / "tasks.db")
    await reopened.open()
    try:
        for record in records:
            assert await reopened.get(record.task_id) == record  # each whole, none lost
    finally:
        await reopened.close()


async def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "missing" / "tasks.db")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        await store.open()


async def test_relative_path_is_created_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteTaskStore("relative.db")
    await store.open()
    await store.close()
    assert (tmp_path / "relative.db").is_file()


async def test_store_from_url_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = store_from_url("sqlite:///x.db")
    assert isinstance(store, SqliteTaskStore)
    assert store.path == "x.db"
    await store.open()
    await store.close()
    assert (tmp_path / "x.db").is_file()


async def test_store_from_url_absolute(tmp_path: Path) -> None:
    path = tmp_path / "abs.db"
    store = store_from_url(f"sqlite:///{path}")
    assert isinstance(store, SqliteTaskStore)
    assert store.path == str(path)
    assert str(path).startswith("/")
    await store.open()
    await store.close()
    assert path.is_file()


def test_store_from_url_memory() -> None:
    store = store_from_url("sqlite:///:memory:")
    assert isinstance(store, SqliteTaskStore)
    assert store.durable is False


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite://host/x.db", "host part"),
        ("mysql://db/tasks", "supported forms"),
        ("", "non-empty"),
        ("tasks.db", "supported forms"),
    ],
)
def test_bad_urls_raise_value_error(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        store_from_url(url)


async def test_a_version_1_file_is_migrated_in_place(tmp_path: Path) -> None:
    from mcptasks.stores import sqlite as sqlite_module

    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_module._MIGRATIONS[0]:
        conn.execute(statement)
    body = '{"runner":"old-engine","idempotency_key":"k","status_message":"hi","arguments":{}}'
    conn.execute(
        "INSERT INTO tasks (task_id, owner, tool, status, version, created_at, updated_at, expires_at, body) "
        "VALUES ('t1', 'o', 'tool', 'working', 3, 1.0, 2.0, NULL, ?)",
        (body,),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    store = SqliteTaskStore(path)
    await store.open()
    try:
        record = await store.get("t1")
        assert record is not None
        assert (record.runner, record.idempotency_key, record.status_message, record.version) == (
            "old-engine",
            "k",
            "hi",
            3,
        )
        assert await store.claim("w", 10) == []  # it has a runner, so it is not queued
        # Fields added later (checkpoint) live in the JSON body: older rows read with the default.
        assert record.checkpoint is None
        saved = record.evolve(checkpoint={"job": "j"})
        assert await store.replace(saved, expected_version=3)
        again = await store.get("t1")
        assert again is not None and again.checkpoint == {"job": "j"}
    finally:
        await store.close()
    assert _pragma(path, "user_version") == SCHEMA_VERSION


async def test_a_version_2_file_gains_the_journal(tmp_path: Path) -> None:
    from mcptasks.stores import sqlite as sqlite_module

    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statements in sqlite_module._MIGRATIONS[:2]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(
        "INSERT INTO tasks (task_id, owner, tool, status, version, created_at, updated_at, expires_at, body) "
        "VALUES ('t2', 'o', 'tool', 'working', 1, 1.0, 2.0, NULL, '{\"status_message\":\"hi\"}')"
    )
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    reader = SqliteTaskStore(path)
    with pytest.raises(SchemaVersionError, match=r"schema version 2, older.*does not migrate"):
        await reader.open_existing()
    assert _pragma(path, "user_version") == 2  # a read-only command leaves it alone
    store = SqliteTaskStore(path)
    await store.open_existing(migrate=True)
    try:
        record = await store.get("t2")
        assert record is not None and record.status_message == "hi"
        assert await store.append_journal("t2", 0, '"zero"') == '"zero"'
        assert await store.read_journal("t2") == ['"zero"']
    finally:
        await store.close()
    assert _pragma(path, "user_version") == SCHEMA_VERSION


async def test_every_delete_of_a_task_deletes_its_journal_rows(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SqliteTaskStore(path)
    await store.open()
    try:
        now = time.time()
        expiring = await store.create(
            TaskRecord(task_id="e", owner="o", tool="x", created_at=now, ttl_ms=60_000)
        )
        finished = await store.create(TaskRecord(task_id="f", owner="o", tool="x"))
        kept = await store.create(TaskRecord(task_id="k", owner="o", tool="x"))
        for record in (expiring, finished, kept):
            for position in range(3):
                assert await store.append_journal(record.task_id, position, f"{position}") == f"{position}"
        assert await store.replace(finished.evolve(status="failed"), expected_version=0)
        assert await store.delete_expired(now + 61) == 1
        assert await store.purge({"failed"}, time.time() + 1) == 1
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("SELECT DISTINCT task_id FROM journal").fetchall() == [("k",)]
            with conn:
                conn.execute("DELETE FROM tasks WHERE task_id = 'k'")
            assert conn.execute("SELECT count(*) FROM journal").fetchone() == (0,)
        finally:
            conn.close()
    finally:
        await store.close()


# -- two engines on one file -----------------------------------------------------------------


async def test_a_body_whose_task_another_engine_took_over_at_the_same_attempt_writes_no_end(
    tmp_path: Path,
) -> None:
    # The first engine's body ends after a second engine on the same file was given its record
    # at the same attempt (runner changed, attempt not: no re-run). Only the check that the
    # record's runner is still this engine keeps that end from overwriting the second engine's
    # state: the attempt check alone lets it through.
    db = tmp_path / "tasks.db"
    release = anyio.Event()
    ended: list[str] = []

    @task_tool
    async def handed_over() -> AsyncIterator[Any]:
        await release.wait()
        ended.append("first engine's body")
        yield Result("written by the first engine")

    # a lease of an hour: no periodic recovery runs during the test, so neither engine looks at
    # the record on its own; the first learns of the takeover only when it writes the end
    config = EngineConfig(lease_ttl=3600.0, immediate_results=False)
    async with TaskEngine(SqliteTaskStore(db), config=config) as first:
        created = await first.start(handed_over, {}, owner=ANONYMOUS_OWNER)
        async with TaskEngine(SqliteTaskStore(db), config=config) as second:
            given = await second.store.get(created.task_id)
            assert given is not None
            assert (given.runner, given.attempt, given.status) == (first.instance_id, 1, "working")
            taken = given.evolve(runner=second.instance_id, status_message="runs on the second engine")
            assert await second.store.replace(taken, expected_version=given.version)
            release.set()
            await wait_idle(first)  # the first engine's body ended and its end write is over
            assert ended == ["first engine's body"]
            after = await second.store.get(created.task_id)
    assert after == taken  # the second engine's state, version and all: nothing was written over it
    assert after is not None
    assert (after.runner, after.attempt, after.status, after.status_message, after.result) == (
        second.instance_id,
        1,
        "working",
        "runs on the second engine",
        None,
    )
    assert after.version == given.version + 1
