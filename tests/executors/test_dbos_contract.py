"""`DBOSExecutor` against the executor contract: a fresh SQLite DBOS system database and a SQLite
task store file per test, shared by the serving and the working engine (DBOS keeps one instance per
process: only the working engine launches it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engines import dbos_sqlite_url

from mcptasks.testing.executor_contract import ExecutorContract

pytest.importorskip("dbos", reason="dbos is not installed (pip install 'mcptasks[dbos]')")


class TestDBOSExecutor(ExecutorContract):
    @pytest.fixture(autouse=True)
    def _in(self, tmp_path: Path) -> None:
        self.directory = tmp_path

    def executor_url(self) -> str:
        return "dbos+" + dbos_sqlite_url(self.directory)

    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'tasks.db'}"
