"""`TaskLedger`: the task ids a client started, in an SQLite file, so a restarted client can resume."""

from __future__ import annotations

import contextlib
import os
import shlex
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from mcptasks.wire import ACTIVE_STATUSES


@dataclass(frozen=True)
class LedgerEntry:
    """One task a client started: where, which tool, when, and its last known status."""

    server: str
    task_id: str
    tool: str | None
    status: str
    created_at: float
    updated_at: float

    @property
    def pending(self) -> bool:
        """Not known to be terminal: worth resuming."""
        return self.status in ACTIVE_STATUSES


class TaskLedger:
    """Task ids a client started, in an SQLite file, so a restarted client can resume them.

    Every write is one transaction (atomic; safe with several processes on one file). `server`
    identifies the endpoint (`server_identity`: the URL, or `stdio:` plus the command line).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        if not self._ready:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS tasks ("
                " server TEXT NOT NULL, task_id TEXT NOT NULL, tool TEXT, status TEXT NOT NULL,"
                " created_at REAL NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (server, task_id))"
            )
            self._ready = True
        return connection

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            connection.close()

    def record(
        self,
        server: str,
        task_id: str,
        *,
        tool: str | None = None,
        status: str = "working",
        created_at: float | None = None,
    ) -> LedgerEntry:
        """Insert (or refresh) a task; the first `created_at` and `tool` recorded are kept."""
        now = time.time()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO tasks (server, task_id, tool, status, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, task_id) DO UPDATE SET"
                " status = excluded.status, updated_at = excluded.updated_at,"
                " tool = COALESCE(tasks.tool, excluded.tool)",
                (server, task_id, tool, status, created_at if created_at is not None else now, now),
            )
        entry = self.get(server, task_id)
        assert entry is not None
        return entry

    def update(self, server: str, task_id: str, status: str) -> None:
        """Set the last known status of a recorded task (unknown tasks are ignored)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE tasks SET status = ?, updated_at = ? WHERE server = ? AND task_id = ?",
                (status, time.time(), server, task_id),
            )

    def forget(self, server: str, task_id: str) -> None:
        """Remove a task from the ledger."""
        with self._transaction() as db:
            db.execute("DELETE FROM tasks WHERE server = ? AND task_id = ?", (server, task_id))

    def get(self, server: str, task_id: str) -> LedgerEntry | None:
        """The entry of one task, if recorded."""
        rows = self._select("WHERE server = ? AND task_id = ?", (server, task_id))
        return rows[0] if rows else None

    def entries(self, server: str | None = None) -> list[LedgerEntry]:
        """Every recorded task (of one server, when given), oldest first."""
        if server is None:
            return self._select("", ())
        return self._select("WHERE server = ?", (server,))

    def pending(self, server: str | None = None) -> list[LedgerEntry]:
        """The tasks not known to be terminal (of one server, when given), oldest first."""
        return [entry for entry in self.entries(server) if entry.pending]

    def _select(self, where: str, args: tuple[Any, ...]) -> list[LedgerEntry]:
        connection = self._connect()
        try:
            rows = connection.execute(
                "SELECT server, task_id, tool, status, created_at, updated_at FROM tasks "
                f"{where} ORDER BY created_at, rowid",
                args,
            ).fetchall()
        finally:
            connection.close()
        return [LedgerEntry(*row) for row in rows]


def server_identity(server: object) -> str:
    """A stable name of the endpoint a `Client` talks to, for the ledger.

    A URL is kept as is (without user info); a `StdioServerParameters` becomes `stdio:` plus the
    command line; anything else (an in-process server, a custom transport) is named by type.
    """
    if isinstance(server, str):
        scheme, sep, rest = server.partition("://")
        if sep and "@" in rest.split("/", 1)[0]:
            host_and_path = rest.split("@", 1)[1]
            return f"{scheme}://{host_and_path}"
        return server
    if isinstance(server, StdioServerParameters):
        return "stdio:" + shlex.join([server.command, *server.args])
    name = getattr(server, "name", None)
    if isinstance(name, str):
        return f"inprocess:{name}"
    return f"{type(server).__module__}.{type(server).__qualname__}"
