"""SQLite-specific behaviour of `SqliteTaskStore` (the shared contract is in test_store_contract)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

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
    assert _pragma(path, "user_version") == SCHEMA_VERSION == 2
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

        async def create() -> None:
            await store.create(TaskRecord(task_id="waited", owner="o", tool="t"))
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
    assert await store.get("waited") is not None


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


async def test_duplicate_in_a_batch_fails_only_its_caller(store: SqliteTaskStore) -> None:
    outcomes: dict[int, str] = {}

    async def create(i: int) -> None:
        try:
            await store.create(TaskRecord(task_id=f"dup-{i // 2}", owner="o", tool="t", arguments={"i": i}))
            outcomes[i] = "ok"
        except TaskExists:
            outcomes[i] = "exists"

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(create, i)
    assert sorted(outcomes.values()).count("ok") == 50
    for pair in range(50):
        assert {outcomes[2 * pair], outcomes[2 * pair + 1]} == {"ok", "exists"}
        assert await store.get(f"dup-{pair}") is not None


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


async def test_cancelled_callers_do_not_wedge_the_store(store: SqliteTaskStore) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(store.create, TaskRecord(task_id=f"c-{i}", owner="o", tool="t"))
        await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    # whatever was cancelled, the queue must still work, and every create either landed or not
    with anyio.fail_after(10):
        await store.create(TaskRecord(task_id="after", owner="o", tool="t"))
        assert await store.get("after") is not None


async def test_use_before_open_says_how_to_open_and_creates_no_file(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    with pytest.raises(RuntimeError, match=r"not open.*open\(\)"):
        await store.create(TaskRecord(task_id="t", owner="o", tool="t"))
    assert not (tmp_path / "tasks.db").exists()


async def test_close_waits_for_queued_operations(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.open()
    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(store.create, TaskRecord(task_id=f"q-{i}", owner="o", tool="t"))
        await anyio.wait_all_tasks_blocked()  # every create is queued or running
        await store.close()
    reopened = SqliteTaskStore(tmp_path / "tasks.db")
    await reopened.open()
    try:
        for i in range(50):
            assert await reopened.get(f"q-{i}") is not None
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
