"""`PostgresTaskStore`: records in PostgreSQL, shared by any number of engine processes
(`postgresql://user@host:5432/database`).

Requires the `postgres` extra (asyncpg), the asyncio backend (asyncpg does not run on trio) and
PostgreSQL 12 or newer.

Layout: everything lives in one schema (`mcptasks` unless configured, e.g. with
`?schema=name` on the URL), created and migrated by `open`:

- `schema_version (version, applied_at)`: one row per applied migration. `open` takes a
  transaction-scoped advisory lock before reading it, so replicas starting together migrate once.
  A schema newer than this code knows is refused with `SchemaVersionError`.
- `tasks`: `task_id` (primary key), `owner`, `tool`, `status`, `version`, `created_at`,
  `updated_at`, `expires_at` (epoch seconds as `double precision`, so floats round-trip exactly),
  `runner`, `idempotency_key`, and `body`, the remaining record fields as `json`. The `json` type
  (not `jsonb`) keeps the text exactly as written: `jsonb` would turn `1e300` into a 301-digit
  integer, reject `"\\u0000"` and lone surrogates, and reorder keys.
- `runners (runner, expires_at)`: heartbeats.
- `journal (task_id, position, entry)`: the entries durable bodies replay from; the foreign key
  to `tasks` deletes them with their task (expiry, purge), and `create`'s takeover of an expired
  holder's idempotency key deletes that holder's.

Consistency: `replace` is one conditional `UPDATE` (version and non-terminal status checked by
the server); `claim` picks rows with `FOR UPDATE SKIP LOCKED`, so concurrent claimers in any number
of processes never get the same record; `create` with an idempotency key is one
`INSERT ... ON CONFLICT` that takes over an expired holder's key and yields to a live one.
Every write is committed when its coroutine returns, and is one round trip: a pool connection
carries no session state of the store's, so it goes back to the pool without asyncpg's reset query.

Wake-ups: `publish` is `pg_notify('<schema>_changes', task_id)` (`replace_and_publish` calls it
in the `UPDATE`'s own statement, so the notice leaves with that commit); each store keeps one dedicated
`LISTEN` connection (outside the pool) while it has subscribers, and fans notifications out to
them. If that connection is lost, the store reconnects in the background and then announces
every active task id once, since notifications sent meanwhile are gone (extra wake-ups are
harmless to the engine). A connection pooler in transaction mode (PgBouncer) breaks `LISTEN` and
prepared statements: point the store at PostgreSQL or at a session-mode pool.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import secrets
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from typing import Any, Literal, Protocol, cast
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import anyio

from mcptasks.errors import DatabaseNotFound as DatabaseNotFound
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
from mcptasks.stores.extras import MissingExtra

try:
    import asyncpg  # type: ignore[import-untyped,unused-ignore]
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a venv without the extra
    if (exc.name or "").partition(".")[0] != "asyncpg":
        raise
    raise MissingExtra("PostgreSQL", "asyncpg", "postgres") from exc

__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "DatabaseNotFound", "PostgresTaskStore", "SchemaVersionError"]

logger = logging.getLogger("mcptasks.stores.postgres")

DEFAULT_SCHEMA = "mcptasks"
"""The schema used when neither the `schema` argument nor the URL's `?schema=` names one."""

CONNECT_TIMEOUT = 10.0
"""Default seconds to wait for a new connection."""

CLOSE_TIMEOUT = 10.0
"""Seconds `close` waits for in-flight operations before terminating the connections."""

RUNNER_RETENTION = 3600.0
"""`delete_expired` forgets runners whose heartbeat expired longer ago than this (seconds)."""

RECONNECT_DELAYS = (0.1, 5.0)
"""First and largest pause (seconds) between attempts to restore a lost LISTEN connection."""

_MAX_SCHEMA_LENGTH = 63 - len("_changes")
"""PostgreSQL identifiers hold 63 bytes, and the notification channel adds `_changes`."""

_MAX_POSITION = 2**31 - 1
"""The largest journal position an `integer` column holds."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1. `{s}` is the quoted schema name.
    (
        """
        CREATE TABLE {s}.tasks (
            task_id         text PRIMARY KEY,
            owner           text NOT NULL,
            tool            text NOT NULL,
            status          text NOT NULL,
            version         bigint NOT NULL,
            created_at      double precision NOT NULL,
            updated_at      double precision NOT NULL,
            expires_at      double precision,
            runner          text,
            idempotency_key text,
            body            json NOT NULL
        )
        """,
        "CREATE INDEX tasks_expires_at ON {s}.tasks (expires_at) WHERE expires_at IS NOT NULL",
        "CREATE UNIQUE INDEX tasks_idempotency ON {s}.tasks (owner, idempotency_key) "
        "WHERE idempotency_key IS NOT NULL",
        "CREATE INDEX tasks_active ON {s}.tasks (created_at, task_id) "
        "WHERE status IN ('working', 'input_required')",
        "CREATE INDEX tasks_queued ON {s}.tasks (created_at, task_id) "
        "WHERE runner IS NULL AND status IN ('working', 'input_required')",
        """
        CREATE TABLE {s}.runners (
            runner     text PRIMARY KEY,
            expires_at double precision NOT NULL
        )
        """,
    ),
    # 1 -> 2: the journal of durable bodies, deleted with its task (the foreign key cascades).
    (
        """
        CREATE TABLE {s}.journal (
            task_id  text NOT NULL REFERENCES {s}.tasks (task_id) ON DELETE CASCADE,
            position integer NOT NULL,
            entry    text NOT NULL,
            PRIMARY KEY (task_id, position)
        )
        """,
    ),
)

SCHEMA_VERSION = len(_MIGRATIONS)
"""The schema version this code writes (rows 1..SCHEMA_VERSION in `schema_version`)."""

_COLUMNS = RECORD_COLUMNS
"""Record fields stored in their own columns; the rest go to `body`."""

_TEXT_COLUMNS = ("task_id", "owner", "tool", "runner", "idempotency_key")
_RETURNED = f"{', '.join(_COLUMNS)}, body"
_UNEXPIRED = "(expires_at IS NULL OR expires_at > {now})"

_OWNER_INDEX = (
    "CREATE INDEX IF NOT EXISTS tasks_owner_active ON {s}.tasks (owner) "
    "WHERE status IN ('input_required', 'working')"
)
"""The index of `count_active` and fair claims: an index, not a schema version, so a worker of
an older mcptasks still opens the schema during a rolling deploy."""

_PENDING_OUTBOX = "strpos(body::text, '\"outbox\":[{') > 0"
"""A row whose body holds webhook events (compact JSON text: the test parses nothing, so a body
holding `\\u0000` in a string, which `->` refuses to read, is still written). A nested key of the
same name may match too; `outbox_records` keeps only the records whose outbox is not empty."""

_OUTBOX_INDEX = (
    "CREATE INDEX IF NOT EXISTS tasks_outbox ON {s}.tasks (updated_at) WHERE "
    + _PENDING_OUTBOX.replace("{", "{{")
)
"""The records with undelivered webhook events (`KeepsOutbox`), an index like `_OWNER_INDEX`."""


def _fair_claim(tasks: str, only: str) -> str:
    """The claim statement: queued rows (also matching `only`) in `FAIR_ORDER`, skipping rows
    another claimer holds (`SKIP LOCKED`), taken for runner $1, at most $2, at time $3. The
    queue is ranked once; rows are then locked one by one in rank order until $2 are taken."""
    unexpired = _UNEXPIRED.format(now="$3")
    return (
        f"WITH {fair_queue(tasks, f'{unexpired} {only}', unexpired)}, "
        "picked AS MATERIALIZED (SELECT t.task_id FROM "
        f"(SELECT task_id, created_at, turn FROM fair ORDER BY {FAIR_ORDER}) AS f CROSS JOIN LATERAL "
        f"(SELECT task_id FROM {tasks} WHERE task_id = f.task_id AND runner IS NULL AND {ACTIVE} "
        "FOR UPDATE SKIP LOCKED) AS t ORDER BY f.turn, f.created_at, f.task_id LIMIT $2) "
        f"UPDATE {tasks} AS t SET runner = $1, version = t.version + 1 FROM picked "
        "WHERE t.task_id = picked.task_id RETURNING " + ", ".join(f"t.{c}" for c in (*_COLUMNS, "body"))
    )


_TOOL_ERROR = (
    "status = 'completed' AND strpos(body::text, '\"isError\":true') > 0 "
    "AND coalesce((body -> 'result' -> 'isError')::text = 'true', false)"
)
"""A row that completed with a tool error (`admin.is_tool_error`), read from its JSON body: the
substring test (bodies are compact JSON text) spares parsing the bodies of the other completed rows."""


# -- the slice of asyncpg this module uses (asyncpg ships no type information) ---------------------


class _Row(Protocol):
    def __getitem__(self, index: int) -> Any: ...


class _Queries(Protocol):
    async def execute(self, query: str, *args: object) -> str: ...

    async def fetch(self, query: str, *args: object) -> list[_Row]: ...

    async def fetchrow(self, query: str, *args: object) -> _Row | None: ...

    async def fetchval(self, query: str, *args: object) -> Any: ...


class _Connection(_Queries, Protocol):
    def transaction(
        self, *, isolation: str | None = None, readonly: bool = False
    ) -> AbstractAsyncContextManager[object]: ...

    def get_server_version(self) -> tuple[int, ...]: ...

    async def add_listener(self, channel: str, callback: Callable[[Any, int, str, str], None]) -> None: ...

    async def remove_listener(self, channel: str, callback: Callable[[Any, int, str, str], None]) -> None: ...

    def add_termination_listener(self, callback: Callable[[Any], None]) -> None: ...

    def remove_termination_listener(self, callback: Callable[[Any], None]) -> None: ...

    def is_closed(self) -> bool: ...

    async def close(self, *, timeout: float | None = None) -> None: ...  # noqa: ASYNC109 (asyncpg API)

    def terminate(self) -> None: ...


class _Pool(_Queries, Protocol):
    def acquire(self) -> Awaitable[_Connection]: ...

    async def release(self, connection: _Connection) -> None: ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


_CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)
"""What a failed connection attempt raises (refused, timed out, rejected by the server)."""


def _missing_database(dsn: str, shown: str, exc: BaseException) -> DatabaseNotFound:
    """The error for a URL naming a database the server does not have, saying how to create it."""
    parts = urlsplit(dsn)
    name = unquote(parts.path.lstrip("/")) or dict(parse_qsl(parts.query)).get("dbname", "")
    if not name:  # asyncpg took the database name from the user or the environment
        return DatabaseNotFound(
            f"{exc} (PostgreSQL at {shown}): create it with `createdb NAME` or "
            '`CREATE DATABASE "NAME";`, or name an existing database in the URL'
        )
    return DatabaseNotFound(
        f'database "{name}" does not exist on the PostgreSQL server at {shown}: create it with '
        f'`createdb {shlex.quote(name)}` or `CREATE DATABASE "{name.replace(chr(34), chr(34) * 2)}";`, '
        "or fix the database name in the URL"
    )


# -- helpers -------------------------------------------------------------------------------------


def _validate_schema(schema: str) -> str:
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise ValueError(
            f"invalid PostgreSQL schema name {schema!r}: use lower-case letters, digits and "
            "underscores, not starting with a digit"
        )
    if len(schema) > _MAX_SCHEMA_LENGTH:
        raise ValueError(f"schema name {schema!r} is longer than {_MAX_SCHEMA_LENGTH} characters")
    if schema.startswith("pg_"):
        raise ValueError(f"schema name {schema!r} is reserved (names starting with 'pg_' are PostgreSQL's)")
    return schema


def _advisory_key(schema: str) -> int:
    """A stable signed 64-bit lock id for migrating `schema`."""
    digest = hashlib.sha256(f"mcptasks.migrate:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _row_values(record: TaskRecord) -> list[Any]:
    """`_COLUMNS` values, then expires_at and body (the remaining fields as JSON text)."""
    data = record.to_dict()
    for column in _TEXT_COLUMNS:
        value = data[column]
        if value is not None and "\x00" in value:
            raise ValueError(
                f"task {column} {value!r} contains a NUL character, which PostgreSQL cannot store"
            )
    values = [data.pop(column) for column in _COLUMNS]
    try:
        body = _dumps(data)
    except ValueError as exc:  # NaN or infinity
        raise ValueError(f"task {record.task_id!r} cannot be stored as JSON: {exc}") from exc
    return [*values, record.expires_at, body]


def _record(row: _Row) -> TaskRecord:
    data: dict[str, Any] = json.loads(row[len(_COLUMNS)])
    for index, column in enumerate(_COLUMNS):
        data[column] = row[index]
    return TaskRecord.from_dict(data)


def _row_count(status: str) -> int:
    """The row count of a command tag such as `UPDATE 1` or `INSERT 0 1`."""
    return int(status.rsplit(" ", 1)[-1])


def _replacing_values(record: TaskRecord, expected_version: int) -> list[Any]:
    """The parameters of the compare-and-set `UPDATE`: the row as written (its version one up),
    then the version it must still have."""
    values = _row_values(record)
    values[_COLUMNS.index("version")] = expected_version + 1
    return [*values, expected_version]


async def _keep_session(conn: object) -> None:
    """What a pool connection needs before its next use: nothing more than asyncpg's own rollback
    of a transaction left open. The store leaves no session state on pool connections (no `SET`,
    cursors, `LISTEN` or session advisory locks: LISTEN has a connection of its own, migrations
    take a transaction-scoped lock), so asyncpg's default reset query would be a round trip per
    operation spent undoing nothing."""


def _split_url(url: str) -> tuple[str, str | None, str]:
    """`(url for asyncpg, schema from ?schema=, url safe to print)`."""
    if not isinstance(url, str):
        raise ValueError(f"PostgreSQL URL must be a string, got {url!r}")
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r} (expected 'postgresql://user@host:port/database')")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    if len(schemas) > 1:
        raise ValueError(f"PostgreSQL URL names more than one schema: {schemas!r}")
    dsn = url.strip()
    if schemas:  # asyncpg would send unknown parameters to the server as settings
        rest = [(key, value) for key, value in query if key != "schema"]
        dsn = urlunsplit(parts._replace(query=urlencode(rest)))
    userinfo, at, hosts = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    shown = f"{user}{at}{hosts}{parts.path}"
    return dsn, (schemas[0] if schemas else None), shown


# -- the store -----------------------------------------------------------------------------------


class PostgresTaskStore(StoreBase):
    """A durable `TaskStore` in a PostgreSQL schema, shared by any number of processes.

    `url` is a libpq-style URL (`postgresql://user:password@host:5432/database?sslmode=...`);
    a `schema` query parameter, which is not passed to the server, names the schema when the
    `schema` argument does not (default `mcptasks`). `min_size`/`max_size` bound the connection
    pool; subscriptions use one more connection, outside the pool, while any is open.
    `connect_timeout` bounds each connection attempt (seconds). Use one instance from one asyncio
    event loop.
    """

    durable: bool = True
    permanent_errors: tuple[type[BaseException], ...] = (
        asyncpg.exceptions.DataError,  # a value PostgreSQL cannot store (say, a NUL in a string)
        asyncpg.exceptions.IntegrityConstraintViolationError,
        asyncpg.exceptions.ProgramLimitExceededError,  # a row or value over PostgreSQL's limits
        asyncpg.exceptions.SyntaxOrAccessError,  # a schema that is not ours, or no privilege
    )
    """Errors retrying cannot cure; the engine retries every other error (`StoreRetry`)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        dsn, url_schema, shown = _split_url(url)
        if schema is not None and url_schema is not None and schema != url_schema:
            raise ValueError(f"schema {schema!r} given, but the URL names schema {url_schema!r}")
        if schema is None:
            schema = DEFAULT_SCHEMA if url_schema is None else url_schema
        self._schema = _validate_schema(schema)
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ValueError(f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}")
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be positive, got {connect_timeout!r}")
        self._dsn = dsn
        self._shown = shown
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._server_settings = None if "application_name=" in dsn else {"application_name": "mcptasks"}
        self._channel = f"{self._schema}_changes"
        self._state: Literal["new", "opening", "open", "closing", "closed"] = "new"
        self._pool_: _Pool | None = None
        self._broadcast = LocalBroadcast()
        self._listen_lock = asyncio.Lock()
        self._listen_conn: _Connection | None = None
        self._lost: anyio.Event | None = None
        """Set when the LISTEN connection is lost; one open subscription then restores it."""
        self._sql = self._statements(f'"{self._schema}"')

    def twin(self) -> PostgresTaskStore:
        """A new, unopened store on the same database and schema, with a pool of one connection
        (for another thread's event loop)."""
        return PostgresTaskStore(
            self._dsn, schema=self._schema, min_size=0, max_size=1, connect_timeout=self._connect_timeout
        )

    @property
    def schema(self) -> str:
        """The PostgreSQL schema holding this store's tables."""
        return self._schema

    @property
    def url(self) -> str:
        """The server and database, without password (for messages)."""
        return self._shown

    def __repr__(self) -> str:
        return f"PostgresTaskStore({self._shown!r}, schema={self._schema!r}, {self._state})"

    @staticmethod
    def _statements(s: str) -> dict[str, str]:
        tasks = f"{s}.tasks"
        write_columns = (*_COLUMNS, "expires_at", "body")
        placeholders = ", ".join(f"${i}" for i in range(1, len(write_columns) + 1))
        now_create = f"${len(write_columns) + 1}"
        update = (
            f"UPDATE {tasks} SET "
            + ", ".join(f"{c} = ${i}" for i, c in enumerate(write_columns[1:], start=2))
            + f" WHERE task_id = $1 AND version = ${len(write_columns) + 1} AND {NOT_TERMINAL}"
        )
        return {
            # the journal of an expired holder of the idempotency key goes with the takeover
            "create": (
                f"WITH stale AS (DELETE FROM {s}.journal WHERE task_id IN (SELECT task_id FROM {tasks} "
                f"WHERE owner = $2 AND idempotency_key = ${_COLUMNS.index('idempotency_key') + 1} "
                f"AND expires_at <= {now_create})) "
                f"INSERT INTO {tasks} AS t ({', '.join(write_columns)}) VALUES ({placeholders}) "
                "ON CONFLICT (owner, idempotency_key) WHERE idempotency_key IS NOT NULL DO UPDATE SET "
                + ", ".join(f"{c} = EXCLUDED.{c}" for c in write_columns)
                + f" WHERE t.expires_at IS NOT NULL AND t.expires_at <= {now_create} RETURNING task_id"
            ),
            "holder": (
                f"SELECT {_RETURNED} FROM {tasks} WHERE owner = $1 AND idempotency_key = $2 "
                f"AND {_UNEXPIRED.format(now='$3')}"
            ),
            "get": f"SELECT {_RETURNED} FROM {tasks} WHERE task_id = $1 AND {_UNEXPIRED.format(now='$2')}",
            "replace": update,
            # replace_outbox: the same write, which a terminal (unexpired) record also takes
            "replace_outbox": update.replace(
                NOT_TERMINAL, _UNEXPIRED.format(now=f"${len(write_columns) + 2}::double precision")
            ),
            "outbox_records": (
                f"SELECT {_RETURNED} FROM {tasks} WHERE {_PENDING_OUTBOX} "
                f"AND {_UNEXPIRED.format(now='$1')} ORDER BY updated_at LIMIT $2"
            ),
            # the replace, and its announcement sent with its commit: one row when it applied
            "replace_and_publish": (
                f"WITH changed AS ({update} RETURNING task_id) "
                f"SELECT pg_notify(${len(write_columns) + 2}, ${len(write_columns) + 3}) FROM changed"
            ),
            # one round trip: whether the task is live, and the entry stored at the position (NULL:
            # the one given, no row: a gap). A repeated position "updates" the row to itself, which
            # waits for a concurrent first writer and returns what it wrote.
            "append_journal": (
                f"WITH live AS (SELECT task_id FROM {tasks} WHERE task_id = $1::text AND {NOT_TERMINAL} "
                f"AND {_UNEXPIRED.format(now='$4::double precision')}), "
                f"written AS (INSERT INTO {s}.journal AS j (task_id, position, entry) "
                "SELECT task_id, $2::integer, $3::text FROM live WHERE $2::integer = 0 OR EXISTS "
                f"(SELECT 1 FROM {s}.journal WHERE task_id = $1::text AND position = $2::integer - 1) "
                "ON CONFLICT (task_id, position) DO UPDATE SET entry = j.entry "
                "RETURNING CASE WHEN j.entry = $3::text THEN NULL ELSE j.entry END AS stored) "
                "SELECT EXISTS (SELECT 1 FROM live), EXISTS (SELECT 1 FROM written), "
                "(SELECT stored FROM written)"
            ),
            "read_journal": (
                f"SELECT j.entry FROM {s}.journal AS j JOIN {tasks} AS t ON t.task_id = j.task_id "
                f"WHERE j.task_id = $1 AND {_UNEXPIRED.format(now='$2')} ORDER BY j.position"
            ),
            "list_active": (
                f"SELECT {_RETURNED} FROM {tasks} WHERE {ACTIVE} AND {_UNEXPIRED.format(now='$1')} "
                "ORDER BY created_at, task_id"
            ),
            "active_ids": f"SELECT task_id FROM {tasks} WHERE {ACTIVE} AND {_UNEXPIRED.format(now='$1')}",
            "delete_expired": f"DELETE FROM {tasks} WHERE expires_at <= $1",
            "forget_runners": f"DELETE FROM {s}.runners WHERE expires_at <= $1",
            "heartbeat": (
                f"INSERT INTO {s}.runners (runner, expires_at) VALUES ($1, $2) "
                "ON CONFLICT (runner) DO UPDATE SET expires_at = EXCLUDED.expires_at"
            ),
            "live_runners": f"SELECT runner FROM {s}.runners WHERE expires_at > $1",
            # a table of its own, made by the first offer: no schema version change, so a worker of
            # an older mcptasks still opens the schema during a rolling deploy. Its rows go with
            # their runner's (`forget_runners`).
            "runner_tools_table": (
                f"CREATE TABLE IF NOT EXISTS {s}.runner_tools (runner text PRIMARY KEY "
                f"REFERENCES {s}.runners (runner) ON DELETE CASCADE, tools text[] NOT NULL)"
            ),
            "offer": (
                f"INSERT INTO {s}.runner_tools (runner, tools) VALUES ($1, $2) "
                "ON CONFLICT (runner) DO UPDATE SET tools = EXCLUDED.tools"
            ),
            "runner_offers": (
                f"SELECT r.runner, r.expires_at, t.tools FROM {s}.runners AS r "
                f"LEFT JOIN {s}.runner_tools AS t ON t.runner = r.runner"
            ),
            "runner_leases": f"SELECT runner, expires_at, NULL::text[] FROM {s}.runners",
            "claim_tools": _fair_claim(tasks, "AND tool = ANY($4::text[])"),
            "claim": _fair_claim(tasks, ""),
            "count_active": (
                f"SELECT count(*) FROM {tasks} WHERE owner = $1 AND {ACTIVE} "
                f"AND {_UNEXPIRED.format(now='$2')}"
            ),
        }

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the connection pool and create or migrate the schema.

        Raises `ConnectionError` when the server cannot be reached (or refuses the login;
        `DatabaseNotFound`, saying how to create it, when the URL's database does not exist),
        `SchemaVersionError` when the schema was written by a newer mcptasks.
        """
        await self._open(None)

    async def open_existing(self, *, migrate: bool = False) -> None:
        """Like `open`, but create nothing: `StoreNotFound` when the schema does not exist or has
        no mcptasks tables; an older schema is migrated with `migrate`, else `SchemaVersionError`."""
        await self._open(migrate)

    async def _existing_version(self, conn: _Connection, migrate: bool) -> int:
        """The version of the existing schema (`StoreNotFound`, `SchemaVersionError` as above)."""
        s = f'"{self._schema}"'
        missing = StoreNotFound(
            f"no task store in schema {self._schema!r} at {self._shown} (check the URL's database "
            "and ?schema=)"
        )
        if not await conn.fetchval("SELECT to_regclass($1)", f"{s}.schema_version"):
            raise missing
        found = int(await conn.fetchval(f"SELECT coalesce(max(version), 0) FROM {s}.schema_version"))
        if found == 0:
            raise missing
        if found < len(_MIGRATIONS) and not migrate:
            raise SchemaVersionError(
                f"task store schema {self._schema!r} at {self._shown} has version {found}, older than "
                f"this mcptasks' {len(_MIGRATIONS)}, and a read-only command does not migrate it: "
                "start `mcptasks serve` with this version once, or use the mcptasks that wrote it"
            )
        return found

    async def _open(self, existing: bool | None) -> None:
        """`open` (`existing` None) or `open_existing(migrate=existing)`."""
        if self._state == "open":
            return
        if self._state in ("opening", "closing"):
            raise RuntimeError(f"{self!r}: open() called while the store is {self._state}")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "PostgresTaskStore needs the asyncio event loop (asyncpg does not run on trio)"
            ) from None
        previous = self._state
        self._state = "opening"
        self._listen_lock = asyncio.Lock()  # bound to this event loop
        self._lost = anyio.Event()
        pool: _Pool | None = None
        try:
            try:
                pool = cast(
                    _Pool,
                    await asyncpg.create_pool(
                        dsn=self._dsn,
                        min_size=self._min_size,
                        max_size=self._max_size,
                        timeout=self._connect_timeout,
                        server_settings=self._server_settings,
                        reset=_keep_session,
                    ),
                )
                conn = await pool.acquire()
            except asyncpg.InvalidCatalogNameError as exc:
                raise _missing_database(self._dsn, self._shown, exc) from exc
            except _CONNECT_ERRORS as exc:
                raise ConnectionError(f"cannot reach PostgreSQL at {self._shown}: {exc}") from exc
            try:
                if existing is None or await self._existing_version(conn, existing) != len(_MIGRATIONS):
                    await self._migrate(conn)
            finally:
                await pool.release(conn)
        except BaseException:
            self._state = previous
            if pool is not None:
                pool.terminate()
            raise
        self._pool_ = pool
        self._state = "open"

    async def _migrate(self, conn: _Connection) -> int:
        """Bring the schema to `SCHEMA_VERSION` under an advisory lock; return the version found."""
        major = conn.get_server_version()[0]
        if major < 12:
            raise RuntimeError(f"PostgresTaskStore needs PostgreSQL 12 or newer; {self._shown} runs {major}")
        s = f'"{self._schema}"'
        target = len(_MIGRATIONS)
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _advisory_key(self._schema))
            if not await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", self._schema):
                await conn.execute(f"CREATE SCHEMA {s}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {s}.schema_version ("
                "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            found = int(await conn.fetchval(f"SELECT coalesce(max(version), 0) FROM {s}.schema_version"))
            if found > target:
                raise SchemaVersionError(
                    f"task store schema {self._schema!r} at {self._shown} has version {found}, but this "
                    f"mcptasks only knows versions up to {target}: upgrade mcptasks, or use another schema"
                )
            if found == 0 and await conn.fetchval("SELECT to_regclass($1)", f"{s}.tasks"):
                raise SchemaVersionError(
                    f"schema {self._schema!r} at {self._shown} already has a 'tasks' table that "
                    "mcptasks did not create; use another schema"
                )
            for version in range(found + 1, target + 1):
                for statement in _MIGRATIONS[version - 1]:
                    await conn.execute(statement.format(s=s))
                await conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES ($1)", version)
            await conn.execute(_OWNER_INDEX.format(s=s))
            await conn.execute(_OUTBOX_INDEX.format(s=s))
        if found != target:
            logger.info("migrated task store schema %r from version %d to %d", self._schema, found, target)
        return found

    async def close(self) -> None:
        """End subscriptions, wait (briefly) for in-flight operations, close every connection.

        Safe to call more than once; a closed store may be opened again.
        """
        if self._state != "open":
            return
        self._state = "closing"
        pool, self._pool_ = self._pool_, None
        try:
            with anyio.CancelScope(shield=True):
                async with self._listen_lock:
                    await self._unlisten()
                self._broadcast.close()
                if pool is not None:
                    with anyio.move_on_after(CLOSE_TIMEOUT) as scope:
                        await pool.close()
                    if scope.cancelled_caught:
                        pool.terminate()
        finally:
            self._state = "closed"

    def _pool(self) -> _Pool:
        if self._state != "open" or self._pool_ is None:
            if self._state in ("new", "opening"):
                raise RuntimeError(f"{self!r} is not open: call `await store.open()` first")
            raise RuntimeError(f"{self!r} is closed")
        return self._pool_

    # -- the TaskStore operations --------------------------------------------------------------

    async def create(self, record: TaskRecord) -> TaskRecord:
        """Insert `record` and return it; `TaskExists` if its id is taken. Committed once this returns.

        With an idempotency key held by an unexpired record of the same owner, nothing is inserted
        and that record is returned; an expired holder gives its key up to the new record (and,
        being expired, is deleted by the takeover).
        """
        pool = self._pool()
        values = _row_values(record)
        while True:
            try:
                inserted = await pool.fetchval(self._sql["create"], *values, time.time())
            except asyncpg.UniqueViolationError as exc:
                if getattr(exc, "constraint_name", None) == "tasks_pkey":
                    raise TaskExists(record.task_id) from None
                raise
            if inserted is not None:
                return record
            # A live record holds the key (or held it a moment ago and has expired since: retry).
            row = await pool.fetchrow(self._sql["holder"], record.owner, record.idempotency_key, time.time())
            if row is not None:
                return _record(row)

    async def get(self, task_id: str, *, owner: str | None = None) -> TaskRecord | None:
        """The record, unless unknown, expired, or owned by someone other than `owner`."""
        row = await self._pool().fetchrow(self._sql["get"], task_id, time.time())
        if row is None:
            return None
        record = _record(row)
        if owner is not None and record.owner != owner:
            return None
        return record

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version`, checked by the server; a terminal record is never changed."""
        values = _replacing_values(record, expected_version)
        status = await self._pool().execute(self._sql["replace"], *values)
        if _row_count(status) != 1:
            return False
        record.version = expected_version + 1
        return True

    async def replace_and_publish(self, record: TaskRecord, *, expected_version: int, message: str) -> bool:
        """`replace`, and when it applied, `publish(message)` in the same statement (one round
        trip): the notification is sent when the write commits, and only then."""
        values = _replacing_values(record, expected_version)
        row = await self._pool().fetchrow(self._sql["replace_and_publish"], *values, self._channel, message)
        if row is None:
            return False
        record.version = expected_version + 1
        return True

    async def replace_outbox(self, record: TaskRecord, *, expected_version: int) -> bool:
        """Compare-and-set on `version` that a terminal record also takes (`KeepsOutbox`)."""
        values = _replacing_values(record, expected_version)
        status = await self._pool().execute(self._sql["replace_outbox"], *values, time.time())
        if _row_count(status) != 1:
            return False
        record.version = expected_version + 1
        return True

    async def outbox_records(self, limit: int) -> list[TaskRecord]:
        """Unexpired records with undelivered webhook events, least recently updated first (the
        partial index `tasks_outbox` holds only those rows)."""
        rows = await self._pool().fetch(self._sql["outbox_records"], time.time(), max(limit, 0))
        return [record for record in map(_record, rows) if record.outbox]

    async def list_active(self) -> list[TaskRecord]:
        """Every unexpired `working` / `input_required` record, oldest first."""
        rows = await self._pool().fetch(self._sql["list_active"], time.time())
        return [_record(row) for row in rows]

    async def delete_expired(self, now: float) -> int:
        """Delete every record whose TTL elapsed at `now`; return how many.

        Also forgets runners whose heartbeat expired more than `RUNNER_RETENTION` seconds ago.
        """
        pool = self._pool()
        deleted = _row_count(await pool.execute(self._sql["delete_expired"], now))
        await pool.execute(self._sql["forget_runners"], min(now, time.time()) - RUNNER_RETENTION)
        return deleted

    async def heartbeat(self, runner: str, ttl: float, *, tools: Collection[str] | None = None) -> None:
        """Record `runner` as alive until now + `ttl` (this host's clock), running `tools` (None:
        not said)."""
        pool = self._pool()
        await pool.execute(self._sql["heartbeat"], runner, time.time() + ttl)
        if tools is None:
            return
        offered = sorted(tools)
        try:
            await pool.execute(self._sql["offer"], runner, offered)
        except asyncpg.exceptions.UndefinedTableError:
            # another runner may make it at the same moment
            with suppress(asyncpg.exceptions.UniqueViolationError, asyncpg.exceptions.DuplicateTableError):
                await pool.execute(self._sql["runner_tools_table"])
            await pool.execute(self._sql["offer"], runner, offered)

    async def runner_offers(self) -> dict[str, RunnerOffer]:
        """The latest heartbeat of every runner not yet forgotten (`RUNNER_RETENTION`)."""
        pool = self._pool()
        try:
            rows = await pool.fetch(self._sql["runner_offers"])
        except asyncpg.exceptions.UndefinedTableError:  # no runner has offered tools yet
            rows = await pool.fetch(self._sql["runner_leases"])
        return {row[0]: RunnerOffer(row[1], None if row[2] is None else frozenset(row[2])) for row in rows}

    async def epoch(self) -> str:
        """The id of the data this schema holds, made by the first call over it (a database
        restored from an older backup, or recreated, answers with another)."""
        s = f'"{self._schema}"'
        pool = self._pool()
        try:
            found = await pool.fetchval(f"SELECT epoch FROM {s}.store_epoch WHERE id = 1")
        except asyncpg.exceptions.UndefinedTableError:
            found = None
        if found is not None:
            return str(found)
        conn = await pool.acquire()
        try:
            async with conn.transaction():  # the lock: concurrent creators of the table wait
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _advisory_key(self._schema))
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {s}.store_epoch "
                    "(id integer PRIMARY KEY CHECK (id = 1), epoch text NOT NULL)"
                )
                await conn.execute(
                    f"INSERT INTO {s}.store_epoch (id, epoch) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
                    secrets.token_hex(8),
                )
                return str(await conn.fetchval(f"SELECT epoch FROM {s}.store_epoch WHERE id = 1"))
        finally:
            await pool.release(conn)

    async def count_active(self, owner: str) -> int:
        """How many unexpired active records `owner` has (`CountsActive`; an index lookup)."""
        return int(await self._pool().fetchval(self._sql["count_active"], owner, time.time()))

    async def live_runners(self) -> set[str]:
        """Runners with an unexpired heartbeat."""
        rows = await self._pool().fetch(self._sql["live_runners"], time.time())
        return {row[0] for row in rows}

    async def claim(
        self, runner: str, limit: int, *, tools: Collection[str] | None = None
    ) -> list[TaskRecord]:
        """Assign up to `limit` queued records (of `tools`, when given) to `runner`, fairly
        across owners (`TaskStore.claim`), in one statement.

        Rows another claimer holds are skipped (`SKIP LOCKED`), so each record goes to exactly one
        claimer; the claimed records' versions are bumped.
        """
        pool = self._pool()
        if limit <= 0 or (tools is not None and not tools):
            return []
        if tools is None:
            rows = await pool.fetch(self._sql["claim"], runner, limit, time.time())
        else:
            rows = await pool.fetch(self._sql["claim_tools"], runner, limit, time.time(), list(tools))
        return sorted((_record(row) for row in rows), key=lambda r: (r.created_at, r.task_id))

    async def list_tasks(self, query: TaskQuery, *, limit: int = 100, after: str | None = None) -> TaskPage:
        """Matching unexpired records, newest first, one page."""
        limit = check_limit(limit)
        where = SqlFilter(lambda n: f"${n}", _TOOL_ERROR)
        sql = f'SELECT {_RETURNED} FROM "{self._schema}".tasks {where.listing(query, time.time(), after)} '
        sql += f"ORDER BY created_at DESC, task_id DESC LIMIT {where.param(limit + 1)}"
        rows = await self._pool().fetch(sql, *where.params)
        return split_page([_record(row) for row in rows], limit)

    async def stats(self) -> TaskStats:
        """Counts, oldest active record, queue depth and live runners (one repeatable-read snapshot)."""
        s = f'"{self._schema}"'
        active = f"{ACTIVE} AND {_UNEXPIRED.format(now='$1')}"
        now = time.time()
        pool = self._pool()
        conn = await pool.acquire()
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                counts = await conn.fetch(  # tool errors counted in the same scan
                    f"SELECT tool, status, count(*), count(*) FILTER (WHERE {_TOOL_ERROR}) FROM {s}.tasks "
                    f"WHERE {_UNEXPIRED.format(now='$1')} GROUP BY tool, status",
                    now,
                )
                row = await conn.fetchrow(
                    f"SELECT min(created_at), count(CASE WHEN runner IS NULL THEN 1 END) FROM {s}.tasks "
                    f"WHERE {active}",
                    now,
                )
                leases = await conn.fetch(
                    f"SELECT runner, expires_at FROM {s}.runners WHERE expires_at > $1", now
                )
                held = await conn.fetch(
                    f"SELECT runner, count(*) FROM {s}.tasks WHERE runner IS NOT NULL AND {active} GROUP BY runner",
                    now,
                )
        finally:
            await pool.release(conn)
        assert row is not None
        return stats_from_rows(
            [(r[0], r[1], r[2]) for r in counts],
            row[0],
            row[1],
            [(r[0], r[1]) for r in leases],
            [(r[0], r[1]) for r in held],
            sum(r[3] for r in counts),
        )

    async def purge(self, statuses: Collection[str], older_than: float) -> int:
        """Delete terminal records in `statuses` last updated before `older_than`; return how many."""
        chosen = sorted(check_purge(statuses))
        status = await self._pool().execute(
            f'DELETE FROM "{self._schema}".tasks WHERE status = ANY($1::text[]) AND updated_at < $2',
            chosen,
            float(older_than),
        )
        return _row_count(status)

    async def append_journal(self, task_id: str, position: int, entry: str) -> str | None:
        """Store `entry` at `position` of the task's journal, or return the entry already there
        (one statement, one round trip); None when the task is unknown, expired or terminal;
        `ValueError` for a gap."""
        check_journal_append(position, entry)
        if position > _MAX_POSITION:
            raise ValueError(journal_gap(task_id, position))
        if "\x00" in task_id:
            return None  # no task has such an id (`create` refuses it)
        if "\x00" in entry:
            raise ValueError(
                f"journal entry of task {task_id!r} contains a NUL character, which PostgreSQL cannot store"
            )
        try:
            row = await self._pool().fetchrow(
                self._sql["append_journal"], task_id, position, entry, time.time()
            )
        except asyncpg.ForeignKeyViolationError:
            return None  # the task was deleted while the entry was written
        assert row is not None
        live, written, stored = row[0], row[1], row[2]
        if not live:
            return None
        if not written:
            raise ValueError(journal_gap(task_id, position))
        return entry if stored is None else str(stored)

    async def read_journal(self, task_id: str) -> list[str]:
        """The task's entries in position order (empty when the task is unknown or expired)."""
        rows = await self._pool().fetch(self._sql["read_journal"], task_id, time.time())
        return [str(row[0]) for row in rows]

    async def publish(self, task_id: str) -> None:
        """`pg_notify` the id to every subscriber of this schema, in any process."""
        await self._pool().execute("SELECT pg_notify($1, $2)", self._channel, task_id)

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Receive the ids published to this schema by any process; `LISTEN` is active on entry.

        May also yield ids nobody published (after the listening connection was lost and
        restored, every active task's id), so treat an id as "look again", not as an event.
        """
        return self._subscription()

    # -- notifications -------------------------------------------------------------------------

    @asynccontextmanager
    async def _subscription(self) -> AsyncIterator[AsyncIterator[str]]:
        self._pool()  # raises unless open
        try:
            async with AsyncExitStack() as stack:
                async with self._listen_lock:
                    if self._listen_conn is None:
                        await self._listen()
                    changes = await stack.enter_async_context(self._broadcast.subscribe())
                group = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(group.cancel_scope.cancel)
                group.start_soon(self._keep_listening)
                yield changes
        finally:
            if not self._broadcast.subscribed:
                with anyio.CancelScope(shield=True):
                    async with self._listen_lock:
                        if not self._broadcast.subscribed:
                            await self._unlisten()

    async def _keep_listening(self) -> None:
        """While a subscription is open: restore LISTEN each time it is lost (one subscription
        takes each loss; if its own subscription closes first, it hands the loss on)."""
        while True:
            lost = self._lost
            if lost is None:
                lost = self._lost = anyio.Event()
            await lost.wait()
            if self._lost is not lost:
                continue  # another subscription took this loss
            self._lost = anyio.Event()
            try:
                await self._reconnect()
            except BaseException:
                if self._listen_conn is None:
                    self._lost.set()
                raise

    async def _listen(self) -> None:
        """Open the LISTEN connection (caller holds `_listen_lock`)."""
        try:
            conn = cast(
                _Connection,
                await asyncpg.connect(
                    dsn=self._dsn, timeout=self._connect_timeout, server_settings=self._server_settings
                ),
            )
        except _CONNECT_ERRORS as exc:
            raise ConnectionError(f"cannot reach PostgreSQL at {self._shown}: {exc}") from exc
        try:
            conn.add_termination_listener(self._on_listener_lost)
            await conn.add_listener(self._channel, self._on_notification)
        except BaseException:
            conn.remove_termination_listener(self._on_listener_lost)
            conn.terminate()
            raise
        self._listen_conn = conn

    async def _unlisten(self) -> None:
        """Close the LISTEN connection (caller holds `_listen_lock`)."""
        conn, self._listen_conn = self._listen_conn, None
        if conn is None:
            return
        conn.remove_termination_listener(self._on_listener_lost)
        try:
            await conn.remove_listener(self._channel, self._on_notification)
            await conn.close(timeout=CLOSE_TIMEOUT)
        except Exception:
            conn.terminate()

    def _on_notification(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self._broadcast.publish(payload)

    def _on_listener_lost(self, conn: Any) -> None:
        if conn is not self._listen_conn:
            return
        self._listen_conn = None
        logger.warning("lost the LISTEN connection of task store %r; reconnecting", self._schema)
        if self._lost is not None:
            self._lost.set()

    async def _reconnect(self) -> None:
        """Restore LISTEN, then wake every subscriber for every active task (notifications sent
        while the connection was down are lost)."""
        delay, longest = RECONNECT_DELAYS
        while True:
            try:
                async with self._listen_lock:
                    if not self._broadcast.subscribed or self._state != "open":
                        return
                    if self._listen_conn is None:
                        await self._listen()
                    rows: Sequence[_Row] = await self._pool().fetch(self._sql["active_ids"], time.time())
                if self._listen_conn is not None:  # else lost again while fetching: go round
                    logger.info("restored the LISTEN connection of task store %r", self._schema)
                    for row in rows:
                        self._broadcast.publish(row[0])
                    return
            except Exception as exc:
                logger.warning("cannot restore the LISTEN connection of %r yet: %s", self._schema, exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, longest)
