"""`SqliteTaskStore`: records in one SQLite file, for single-host deployments (`sqlite:///tasks.db`).

Durability: the database runs in WAL mode with `synchronous=NORMAL`. A record whose `create` or
`replace` returned survives a crash of the process; a power loss or OS crash may lose the last
few transactions (never corrupts the file). Wake-ups (`publish`/`subscribe`) are in-process only:
several processes may share one file for the records, but a `publish` in one of them does not
reach a `subscribe` in another.

Concurrency: a point operation (`create`, `get`, `replace`, `heartbeat`, `live_runners`) that
finds the store idle runs at once on the event loop, as its own transaction, after yielding to
the loop once: a single-row statement and a commit that does not sync (WAL, `synchronous=NORMAL`)
take microseconds, where a hand-off to a worker thread and back costs a hundred or more. It never
waits there: it runs with no busy timeout, and if another connection (another process, or this
process's heartbeat thread) holds the lock it goes the queued way instead, and so does every
other operation. Queued operations: whichever caller finds no batch running becomes the *leader*,
takes everything queued (up to `MAX_BATCH`), runs it in a worker thread as one transaction (waiting
up to `BUSY_TIMEOUT_MS` for a lock) and wakes the callers when it has committed. Meanwhile new
operations queue up for the next batch, so many concurrent writers share one commit (group
commit). WAL checkpoints, which write and sync the database file, run in the worker thread after
every `CHECKPOINT_EVERY` commits, never inside a commit on the event loop. A failing statement only
fails its own caller; an error that aborts the transaction (disk full, I/O error, lock timeout)
fails every caller of that batch, and none of its writes happened.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from typing import Any, Generic, Literal, TypeVar, cast

import anyio

from mcptasks.stores._broadcast import LocalBroadcast
from mcptasks.stores._sql import ACTIVE, FAIR_ORDER, NOT_TERMINAL, fair_queue
from mcptasks.stores.admin import (
    SqlFilter,
    TaskPage,
    TaskQuery,
    TaskStats,
    check_journal_append,
    check_limit,
    check_purge,
    journal_gap,
    split_page,
    stats_from_rows,
)
from mcptasks.stores.base import (
    RECORD_COLUMNS,
    RunnerOffer,
    SchemaVersionError,
    StoreBase,
    StoreNotFound,
    TaskExists,
    TaskRecord,
)

__all__ = ["MAX_BATCH", "SCHEMA_VERSION", "SchemaVersionError", "SqliteTaskStore", "migrate"]

T = TypeVar("T")

SCHEMA_VERSION = 3
"""The schema this code writes, recorded in the file's `PRAGMA user_version`."""

MAX_BATCH = 512
"""Most operations one transaction carries."""

BUSY_TIMEOUT_MS = 5000
"""How long a queued operation waits for another connection's lock before failing."""

CHECKPOINT_EVERY = 300
"""Commits between two WAL checkpoints (run in the worker thread; SQLite's own automatic
checkpoint, every 1,000 WAL pages, is off because it would run inside a commit)."""

_LOCKED_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: the tasks table. `body` holds the remaining record fields as compact JSON.
    (
        """
        CREATE TABLE tasks (
            task_id    TEXT PRIMARY KEY NOT NULL,
            owner      TEXT NOT NULL,
            tool       TEXT NOT NULL,
            status     TEXT NOT NULL,
            version    INTEGER NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL,
            body       TEXT NOT NULL
        )
        """,
        "CREATE INDEX tasks_status ON tasks (status)",
        "CREATE INDEX tasks_expires_at ON tasks (expires_at)",
    ),
    # 1 -> 2: runners (heartbeats), queued-task claims, idempotency keys.
    (
        "ALTER TABLE tasks ADD COLUMN runner TEXT",
        "ALTER TABLE tasks ADD COLUMN idempotency_key TEXT",
        "UPDATE tasks SET runner = json_extract(body, '$.runner'), "
        "idempotency_key = json_extract(body, '$.idempotency_key')",
        "CREATE INDEX tasks_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key IS NOT NULL",
        "CREATE INDEX tasks_queued ON tasks (created_at) WHERE runner IS NULL",
        "CREATE TABLE runners (runner TEXT PRIMARY KEY NOT NULL, expires_at REAL NOT NULL)",
    ),
    # 2 -> 3: the journal of durable bodies, deleted with its task by a trigger (every path that
    # deletes a task row: expiry, purge).
    (
        """
        CREATE TABLE journal (
            task_id  TEXT NOT NULL,
            position INTEGER NOT NULL,
            entry    TEXT NOT NULL,
            PRIMARY KEY (task_id, position)
        )
        """,
        "CREATE TRIGGER tasks_journal AFTER DELETE ON tasks BEGIN "
        "DELETE FROM journal WHERE task_id = old.task_id; END",
    ),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION

_CREATE_RUNNER_TOOLS = (
    "CREATE TABLE IF NOT EXISTS runner_tools (runner TEXT PRIMARY KEY NOT NULL, tools TEXT NOT NULL)"
)
"""The task tools each runner offered (`KeepsOffers`): a JSON list per runner."""

_CREATE_OWNER_INDEX = "CREATE INDEX IF NOT EXISTS tasks_owner_status ON tasks (owner, status)"
"""The index of `count_active` and fair claims: an index, not a schema version, so a worker of
an older mcptasks still opens the file during a rolling deploy."""

_CREATE_OUTBOX_INDEX = (
    "CREATE INDEX IF NOT EXISTS tasks_outbox ON tasks (updated_at) "
    "WHERE json_array_length(body, '$.outbox') > 0"
)
"""The records with undelivered webhook events (`KeepsOutbox`): a partial index, so the sweep
reads only those rows; an index, not a schema version, like `_CREATE_OWNER_INDEX`."""

_COLUMNS = RECORD_COLUMNS
_SELECT = f"SELECT {', '.join(_COLUMNS)}, body FROM tasks"
_UNEXPIRED = "(expires_at IS NULL OR expires_at > ?)"
_TOOL_ERROR = (
    "status = 'completed' AND instr(body, '\"isError\":true') > 0 "
    "AND json_type(body, '$.result.isError') IS 'true'"
)
"""A row that completed with a tool error (`admin.is_tool_error`), read from its JSON body: the
substring test (bodies are compact JSON) spares parsing the bodies of the other completed rows."""


def migrate(conn: sqlite3.Connection, name: str = "database") -> int:
    """Bring the schema of `conn` (autocommit mode) to `SCHEMA_VERSION`; return the version found.

    Raises `SchemaVersionError` for a file written by a newer mcptasks, or one that has a `tasks`
    table not created by mcptasks.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"task store {name} has schema version {found}, but this mcptasks only knows "
                f"versions up to {SCHEMA_VERSION}: upgrade mcptasks, or use another database file"
            )
        if (
            found == 0
            and conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tasks'").fetchone()
        ):
            raise SchemaVersionError(
                f"{name} already has a 'tasks' table that mcptasks did not create "
                "(PRAGMA user_version is 0); use another database file"
            )
        for statements in _MIGRATIONS[found:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(_CREATE_OWNER_INDEX)
        conn.execute(_CREATE_OUTBOX_INDEX)
        if found != SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _row_values(record: TaskRecord) -> tuple[Any, ...]:
    """Every column but task_id, in `_COLUMNS` order, then expires_at and body."""
    data = record.to_dict()
    values = tuple(data.pop(column) for column in _COLUMNS)[1:]
    return (*values, record.expires_at, _dumps(data))


_WRITE_COLUMNS = (*_COLUMNS, "expires_at", "body")
_INSERT = (
    f"INSERT INTO tasks ({', '.join(_WRITE_COLUMNS)}) VALUES ({', '.join('?' for _ in _WRITE_COLUMNS)}) "
    "ON CONFLICT (task_id) DO NOTHING"
)
_UPDATE = (
    f"UPDATE tasks SET {', '.join(f'{c} = ?' for c in _WRITE_COLUMNS[1:])} "
    f"WHERE task_id = ? AND version = ? AND {NOT_TERMINAL}"
)


_UPDATE_ANY = (
    f"UPDATE tasks SET {', '.join(f'{c} = ?' for c in _WRITE_COLUMNS[1:])} "
    f"WHERE task_id = ? AND version = ? AND {_UNEXPIRED}"
)
"""`_UPDATE` that a terminal record also takes (`replace_outbox`); its last parameter is now."""


def _record(row: Sequence[Any]) -> TaskRecord:
    data: dict[str, Any] = json.loads(row[-1])
    data.update(zip(_COLUMNS, row[:-1], strict=True))
    return TaskRecord.from_dict(data)


class _Op(Generic[T]):
    """One queued call: `fn` runs in the worker thread inside the batch's transaction."""

    __slots__ = ("closes", "done", "error", "finished", "fn", "point", "promoted", "result", "taken", "write")

    def __init__(
        self, fn: Callable[[sqlite3.Connection], T], *, write: bool, closes: bool = False, point: bool = False
    ) -> None:
        self.fn = fn
        self.write = write
        self.closes = closes
        self.point = point
        """A single-row operation that may run on the event loop when the store is idle."""
        self.done = anyio.Event()
        self.taken = False
        """Part of a batch that is running or ran."""
        self.promoted = False
        """Woken to lead the next batch."""
        self.finished = False
        self.result: T | None = None
        self.error: BaseException | None = None

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return cast(T, self.result)


def _locked(error: BaseException | None) -> bool:
    """Whether `error` is SQLite's "database is locked" (another connection holds the lock)."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    return code in _LOCKED_CODES if code is not None else "locked" in str(error)


def _run_here(conn: sqlite3.Connection, op: _Op[Any]) -> bool:
    """Run `op` alone on this thread (the event loop) without waiting for a lock; False when the
    database is locked (nothing happened: the caller queues `op` instead)."""
    _run_batch(conn, [op])
    if _locked(op.error):
        op.error = op.result = None
        return False
    return True


def _run_waiting(conn: sqlite3.Connection, batch: Sequence[_Op[Any]], checkpoint: bool) -> None:
    """Run `batch` in a worker thread, waiting up to `BUSY_TIMEOUT_MS` for a lock; then, with
    `checkpoint`, move the WAL into the database file."""
    closes = any(op.closes for op in batch)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    try:
        _run_batch(conn, batch)
        if checkpoint and not closes:
            with suppress(sqlite3.Error):  # a busy checkpoint is retried after the next batch
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        if not closes:
            conn.execute("PRAGMA busy_timeout = 0")


def _run_batch(conn: sqlite3.Connection, batch: Sequence[_Op[Any]]) -> None:
    """Run `batch` as one transaction; fill in every op's outcome."""
    try:
        conn.execute("BEGIN IMMEDIATE" if any(op.write for op in batch) else "BEGIN")
        for op in batch:
            try:
                op.result = op.fn(conn)
            except Exception as exc:
                if not conn.in_transaction:  # SQLite rolled the whole transaction back
                    raise
                op.error = exc  # only this statement failed; it left no trace
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        for op in batch:
            op.result = None
            if op.error is None:
                op.error = exc
        if not isinstance(exc, Exception):
            raise
    finally:
        if any(op.closes for op in batch):
            conn.close()


class SqliteTaskStore(StoreBase):
    """A durable `TaskStore` in one SQLite database file (`sqlite:///path.db`).

    `path` is a file name (relative paths are resolved against the working directory when
    `open` runs; the directory must exist) or `":memory:"`, a private in-memory database that
    makes the instance non-durable. Use one instance from one event loop; share the file, not
    the object, between processes (records are shared, wake-ups are not).
    """

    durable: bool = True
    permanent_errors: tuple[type[BaseException], ...] = (
        sqlite3.IntegrityError,
        sqlite3.ProgrammingError,
        sqlite3.DataError,
        sqlite3.NotSupportedError,
    )
    """Errors retrying cannot cure; the engine retries every other error (`StoreRetry`): a
    locked database, a full disk, an I/O error."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._memory = self._path in ("", ":memory:")
        if self._memory:
            self.durable = False
        self._state: Literal["new", "opening", "open", "closing", "closed"] = "new"
        self._conn: sqlite3.Connection | None = None
        self._limiter: anyio.CapacityLimiter | None = None
        self._queue: deque[_Op[Any]] = deque()
        self._busy = False
        self._commits = 0
        """Write transactions since the last WAL checkpoint."""
        self._broadcast = LocalBroadcast()

    @property
    def path(self) -> str:
        """The database path as given (`":memory:"` for an in-memory database)."""
        return self._path

    def __repr__(self) -> str:
        return f"SqliteTaskStore({self._path!r}, {self._state})"

    def twin(self) -> SqliteTaskStore | None:
        """A new, unopened store on the same file (for another thread); None for `:memory:`."""
        return None if self._memory else SqliteTaskStore(self._path)

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the database (created if missing), enable WAL, and create or migrate the schema."""
        if self._state == "open":
            return
        if self._state in ("opening", "closing"):
            raise RuntimeError(f"{self!r}: open() called while the store is {self._state}")
        previous = self._state
        self._state = "opening"
        try:
            with anyio.CancelScope(shield=True):  # a connection made in the thread must not leak
                self._conn = await anyio.to_thread.run_sync(self._connect)
        except BaseException:
            self._state = previous
            raise
        self._limiter = anyio.CapacityLimiter(1)
        self._state = "open"

    async def open_existing(self, *, migrate: bool = False) -> None:
        """Open the database only if the file exists and holds an mcptasks schema (`StoreNotFound`
        otherwise); a schema older than this code's is migrated with `migrate`, else refused with
        `SchemaVersionError`. Nothing is created."""
        if not self._memory and self._state != "open":
            found = await anyio.to_thread.run_sync(self._existing_version)
            if found < SCHEMA_VERSION and not migrate:
                raise SchemaVersionError(
                    f"task store {self._path!r} has schema version {found}, older than this mcptasks' "
                    f"{SCHEMA_VERSION}, and a read-only command does not migrate it: start "
                    "`mcptasks serve` with this version once, or use the mcptasks that wrote it"
                )
        await self.open()

    def _existing_version(self) -> int:
        """The schema version of the existing file, read without writing to it."""
        if not os.path.isfile(self._path):
            raise StoreNotFound(f"no task store at {self._path!r}: no such file (check the path)")
        location = "file:" + urllib.parse.quote(os.path.abspath(self._path)) + "?mode=ro"
        conn = sqlite3.connect(location, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
        if found == 0:
            raise StoreNotFound(f"{self._path!r} is not an mcptasks task store (it has no task schema)")
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"task store {self._path!r} has schema version {found}, but this mcptasks only knows "
                f"versions up to {SCHEMA_VERSION}: upgrade mcptasks"
            )
        return found

    def _connect(self) -> sqlite3.Connection:
        if not self._memory:
            directory = os.path.dirname(os.path.abspath(self._path))
            if not os.path.isdir(directory):
                raise FileNotFoundError(
                    f"cannot open task store {self._path!r}: directory {directory!r} does not exist"
                )
        conn = sqlite3.connect(
            self._path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not self._memory:
                mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
                if mode.lower() != "wal":
                    raise RuntimeError(f"task store {self._path!r}: cannot enable WAL (journal_mode={mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn, repr(self._path))
            # From here on: point operations on the event loop never wait for a lock, and
            # checkpoints run in the worker thread (see the module docstring).
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute("PRAGMA busy_timeout = 0")
        except BaseException:
            conn.close()
            raise
        return conn

    async def close(self) -> None:
        """Finish queued operations and close the database. Safe to call more than once."""
        if self._state != "open":
            return
        self._state = "closing"
        try:
            with anyio.CancelScope(shield=True):
                await self._submit(_Op(lambda conn: None, write=False, closes=True))
        finally:
            self._conn = None
            self._limiter = None
            self._state = "closed"

    # -- the queue and the leader --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state != "open":
            if self._state in ("new", "opening"):
                raise RuntimeError(f"{self!r} is not open: call `await store.open()` first")
            raise RuntimeError(f"{self!r} is closed")

    async def _execute(self, fn: Callable[[sqlite3.Connection], T], *, write: bool, point: bool = False) -> T:
        self._check_open()
        op = _Op(fn, write=write, point=point)
        if point and await self._ran_here(op):
            return op.outcome()
        return await self._submit(op)

    def _idle(self) -> bool:
        return not self._busy and self._commits < CHECKPOINT_EVERY

    async def _ran_here(self, op: _Op[Any]) -> bool:
        """Run a point operation on the event loop if the store is idle (see the module docstring)."""
        if not self._idle():
            return False
        await anyio.lowlevel.checkpoint()  # first: a cancellation here leaves nothing done
        self._check_open()
        if not self._idle() or self._conn is None or not _run_here(self._conn, op):
            return False
        if op.write:
            self._commits += 1
        return True

    async def _submit(self, op: _Op[T]) -> T:
        self._queue.append(op)
        if self._busy:
            await self._wait(op)
            if op.finished:
                return op.outcome()
            # promoted: lead the next batch, which starts with this op
        else:
            self._busy = True
        with anyio.CancelScope(shield=True):
            await self._lead()
        return op.outcome()

    async def _wait(self, op: _Op[Any]) -> None:
        try:
            await op.done.wait()
        except BaseException:  # cancelled
            if op.taken:  # in flight: it will finish soon, and its effect must be reported
                with anyio.CancelScope(shield=True):
                    await op.done.wait()
            elif not op.finished:
                self._queue.remove(op)
                if op.promoted:
                    self._hand_off()
            raise

    async def _lead(self) -> None:
        batch = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_BATCH))]
        for op in batch:
            op.taken = True
        checkpoint = self._commits >= CHECKPOINT_EVERY and not self._memory
        if any(op.write for op in batch):
            self._commits += 1
        try:
            assert self._conn is not None and self._limiter is not None
            await anyio.to_thread.run_sync(_run_waiting, self._conn, batch, checkpoint, limiter=self._limiter)
            if checkpoint:
                self._commits = 0
        except BaseException as exc:
            for op in batch:
                if op.error is None:
                    op.error = exc
            raise
        finally:
            for op in batch:
                op.finished = True
                op.done.set()
            self._hand_off()

    def _hand_off(self) -> None:
        if self._queue:
            head = self._queue[0]
            head.promoted = True
            head.done.set()
        else:
            self._busy = False

    # -- the TaskStore operations --------------------------------------------------------------

    async def create(self, record: TaskRecord) -> TaskRecord:
        """Insert `record` and return it; `TaskExists` if its id is taken. Durable once this returns.

        With an idempotency key already held by an unexpired record of the same owner, nothing is
        inserted and that record is returned.
        """
        values = (record.task_id, *_row_values(record))
        now = time.time()

        def insert(conn: sqlite3.Connection) -> TaskRecord | None:
            if record.idempotency_key is not None:
                row = conn.execute(
                    f"{_SELECT} WHERE owner = ? AND idempotency_key = ? AND {_UNEXPIRED} LIMIT 1",
                    (record.owner, record.idempotency_key, now),
                ).fetchone()
                if row is not None:
                    return _record(row)
            if conn.execute(_INSERT, values).rowcount != 1:
                return None
            return record

        stored = await self._execute(insert, write=True, point=True)
        if stored is None:
            raise TaskExists(record.task_id)
        return stored

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """The record, unless unknown, expired, or owned by someone other than `owner`."""
        now = time.time()

        def select(conn: sqlite3.Connection) -> TaskRecord | None:
            row = conn.execute(f"{_SELECT} WHERE task_id = ? AND {_UNEXPIRED}", (task_id, now)).fetchone()
            return None if row is None else _record(row)

        record = await self._execute(select, write=False, point=True)
        if record is None or (owner is not None and record.owner != owner):
            return None
        return record

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version`; a stored terminal record is never changed."""
        row = list(_row_values(record))
        row[_COLUMNS.index("version") - 1] = expected_version + 1
        values = (*row, record.task_id, expected_version)

        def update(conn: sqlite3.Connection) -> bool:
            return conn.execute(_UPDATE, values).rowcount == 1

        if not await self._execute(update, write=True, point=True):
            return False
        record.version = expected_version + 1
        return True

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version` that a terminal record also takes (`KeepsOutbox`)."""
        row = list(_row_values(record))
        row[_COLUMNS.index("version") - 1] = expected_version + 1
        values = (*row, record.task_id, expected_version, time.time())

        def update(conn: sqlite3.Connection) -> bool:
            return conn.execute(_UPDATE_ANY, values).rowcount == 1

        if not await self._execute(update, write=True, point=True):
            return False
        record.version = expected_version + 1
        return True

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        """Unexpired records with undelivered webhook events, least recently updated first (the
        partial index `tasks_outbox` holds only those rows)."""
        now = time.time()

        def select(conn: sqlite3.Connection) -> list[TaskRecord]:
            rows = conn.execute(
                f"{_SELECT} WHERE json_array_length(body, '$.outbox') > 0 AND {_UNEXPIRED} "
                "ORDER BY updated_at LIMIT ?",
                (now, max(limit, 0)),
            ).fetchall()
            return [_record(row) for row in rows]

        return await self._execute(select, write=False)

    async def list_active(self) -> list[TaskRecord]:
        """Every unexpired `working` / `input_required` record, oldest first."""
        now = time.time()

        def select(conn: sqlite3.Connection) -> list[TaskRecord]:
            rows = conn.execute(
                f"{_SELECT} WHERE {ACTIVE} AND {_UNEXPIRED} ORDER BY created_at, task_id",
                (now,),
            ).fetchall()
            return [_record(row) for row in rows]

        return await self._execute(select, write=False)

    async def delete_expired(self, now: float) -> int:
        """Delete every record whose TTL elapsed at `now`; return how many."""

        def delete(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM tasks WHERE expires_at <= ?", (now,)).rowcount

        return await self._execute(delete, write=True)

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        """Record `runner` as alive until now + `ttl`, running `tools` (None: not said)."""
        until = time.time() + ttl
        offered = None if tools is None else _dumps(sorted(tools))

        def upsert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO runners (runner, expires_at) VALUES (?, ?) "
                "ON CONFLICT (runner) DO UPDATE SET expires_at = excluded.expires_at",
                (runner, until),
            )
            if offered is not None:
                # a table of its own, made by the first offer: no schema version change, so a
                # worker of an older mcptasks still opens the file during a rolling deploy
                conn.execute(_CREATE_RUNNER_TOOLS)
                conn.execute(
                    "INSERT INTO runner_tools (runner, tools) VALUES (?, ?) "
                    "ON CONFLICT (runner) DO UPDATE SET tools = excluded.tools",
                    (runner, offered),
                )

        await self._execute(upsert, write=True, point=True)

    async def epoch(self) -> str:
        """The id of the data this file holds, made by the first call over it (a file replaced by
        an older copy or a fresh one answers with another)."""

        def read(conn: sqlite3.Connection) -> str | None:
            try:
                row = conn.execute("SELECT epoch FROM store_epoch WHERE id = 1").fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                return None
            return None if row is None else str(row[0])

        def mark(conn: sqlite3.Connection) -> str:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS store_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), epoch TEXT NOT NULL)"
            )
            conn.execute(
                "INSERT OR IGNORE INTO store_epoch (id, epoch) VALUES (1, ?)", (secrets.token_hex(8),)
            )
            return str(conn.execute("SELECT epoch FROM store_epoch WHERE id = 1").fetchone()[0])

        found = await self._execute(read, write=False, point=True)
        return found if found is not None else await self._execute(mark, write=True, point=True)

    async def count_active(self, owner: str) -> int:
        """How many unexpired active records `owner` has (`CountsActive`; an index lookup)."""
        now = time.time()

        def count(conn: sqlite3.Connection) -> int:
            query = f"SELECT count(*) FROM tasks WHERE owner = ? AND {ACTIVE} AND {_UNEXPIRED}"
            return int(conn.execute(query, (owner, now)).fetchone()[0])

        return await self._execute(count, write=False, point=True)

    async def live_runners(self) -> set[str]:
        """Runners with an unexpired heartbeat."""
        now = time.time()

        def select(conn: sqlite3.Connection) -> set[str]:
            return {row[0] for row in conn.execute("SELECT runner FROM runners WHERE expires_at > ?", (now,))}

        return await self._execute(select, write=False, point=True)

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        """Every runner's latest heartbeat (the file keeps them all)."""

        def select(conn: sqlite3.Connection) -> dict[str, RunnerOffer]:
            try:
                rows = conn.execute(
                    "SELECT r.runner, r.expires_at, t.tools FROM runners AS r "
                    "LEFT JOIN runner_tools AS t ON t.runner = r.runner"
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                rows = [(*row, None) for row in conn.execute("SELECT runner, expires_at FROM runners")]
            return {
                runner: RunnerOffer(until, None if tools is None else frozenset(json.loads(tools)))
                for runner, until, tools in rows
            }

        return await self._execute(select, write=False)

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        """Assign up to `limit` queued records (of `tools`, when given) to `runner` in one
        transaction, fairly across owners (`TaskStore.claim`)."""
        now = time.time()
        wanted = () if tools is None else tuple(tools)
        of_tools = "" if tools is None else f"AND tool IN ({', '.join('?' for _ in wanted)}) "

        def take(conn: sqlite3.Connection) -> list[TaskRecord]:
            if tools is not None and not wanted:
                return []
            fair = fair_queue("tasks", f"{_UNEXPIRED} {of_tools}", _UNEXPIRED)
            rows = conn.execute(
                f"WITH {fair} SELECT {', '.join(f'tasks.{c}' for c in _COLUMNS)}, tasks.body "
                f"FROM tasks JOIN fair ON fair.task_id = tasks.task_id ORDER BY {FAIR_ORDER} LIMIT ?",
                (now, *wanted, now, max(limit, 0)),
            ).fetchall()
            claimed = []
            for row in rows:
                record = _record(row)
                record.runner = runner
                record.version += 1
                conn.execute(
                    "UPDATE tasks SET runner = ?, version = ? WHERE task_id = ?",
                    (runner, record.version, record.task_id),
                )
                claimed.append(record)
            return claimed

        return await self._execute(take, write=True)

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """Matching unexpired records, newest first, one page."""
        limit = check_limit(limit)
        where = SqlFilter(lambda n: f"?{n}", _TOOL_ERROR)
        sql = f"{_SELECT} {where.listing(query, time.time(), after)} ORDER BY created_at DESC, task_id DESC "
        sql += f"LIMIT {where.param(limit + 1)}"

        def select(conn: sqlite3.Connection) -> list[TaskRecord]:
            return [_record(row) for row in conn.execute(sql, where.params)]

        return split_page(await self._execute(select, write=False), limit)

    async def stats(self) -> TaskStats:
        """Counts, oldest active record, queue depth and live runners, in one read transaction."""
        now = time.time()
        active = f"{ACTIVE} AND {_UNEXPIRED}"

        def aggregate(conn: sqlite3.Connection) -> TaskStats:
            counts = conn.execute(
                f"SELECT tool, status, count(*) FROM tasks WHERE {_UNEXPIRED} GROUP BY tool, status", (now,)
            ).fetchall()
            oldest, queued = conn.execute(
                f"SELECT min(created_at), count(CASE WHEN runner IS NULL THEN 1 END) FROM tasks WHERE {active}",
                (now,),
            ).fetchone()
            leases = conn.execute("SELECT runner, expires_at FROM runners WHERE expires_at > ?", (now,))
            held = conn.execute(
                f"SELECT runner, count(*) FROM tasks WHERE runner IS NOT NULL AND {active} GROUP BY runner",
                (now,),
            ).fetchall()
            # parses the body of completed rows only (the status index finds them)
            (tool_errors,) = conn.execute(
                f"SELECT count(*) FROM tasks WHERE {_TOOL_ERROR} AND {_UNEXPIRED}", (now,)
            ).fetchone()
            return stats_from_rows(counts, oldest, queued, leases.fetchall(), held, tool_errors)

        return await self._execute(aggregate, write=False)

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """Delete terminal records in `statuses` last updated before `older_than`; return how many."""
        chosen = sorted(check_purge(statuses))
        marks = ", ".join("?" for _ in chosen)

        def delete(conn: sqlite3.Connection) -> int:
            sql = f"DELETE FROM tasks WHERE status IN ({marks}) AND updated_at < ?"
            return conn.execute(sql, (*chosen, float(older_than))).rowcount

        return await self._execute(delete, write=True)

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        """Store `entry` at `position` of the task's journal, or return the entry already there,
        in one transaction; None when the task is unknown, expired or terminal; `ValueError` for a
        gap."""
        check_journal_append(position, entry)
        now = time.time()

        def append(conn: sqlite3.Connection) -> str | None:
            live = conn.execute(
                f"SELECT 1 FROM tasks WHERE task_id = ? AND {NOT_TERMINAL} AND {_UNEXPIRED}", (task_id, now)
            ).fetchone()
            if live is None:
                return None
            stored = conn.execute(
                "SELECT entry FROM journal WHERE task_id = ? AND position = ?", (task_id, position)
            ).fetchone()
            if stored is not None:
                return str(stored[0])
            if (
                position > 0
                and not conn.execute(
                    "SELECT 1 FROM journal WHERE task_id = ? AND position = ?", (task_id, position - 1)
                ).fetchone()
            ):
                raise ValueError(journal_gap(task_id, position))
            conn.execute(
                "INSERT INTO journal (task_id, position, entry) VALUES (?, ?, ?)", (task_id, position, entry)
            )
            return entry

        return await self._execute(append, write=True, point=True)

    async def read_journal(self, task_id: str) -> list[str]:
        """The task's entries in position order (empty when the task is unknown or expired)."""
        now = time.time()

        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                f"SELECT j.entry FROM journal AS j JOIN tasks ON tasks.task_id = j.task_id "
                f"WHERE j.task_id = ? AND {_UNEXPIRED} ORDER BY j.position",
                (task_id, now),
            )
            return [str(row[0]) for row in rows]

        return await self._execute(select, write=False, point=True)

    async def publish(self, task_id: str) -> None:
        """Wake the subscribers of this process (not other processes sharing the file)."""
        self._broadcast.publish(task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Receive the ids published through this store object."""
        return self._broadcast.subscribe()
