"""Private Redis and PostgreSQL servers for tests that must crash their store.

The shared servers on the default ports are never stopped. These start their own instance on a
free port in their own directory, can kill it (SIGKILL for Redis, an immediate shutdown, which is a
crash, for PostgreSQL) and start it again over the same data: Redis with an append-only file
(`appendfsync always`, so every acknowledged write survives), PostgreSQL with its own data dir.
PostgreSQL refuses to run as root: as root, `initdb`/`pg_ctl` run as the `postgres` user.
`as_ordinary_user` likewise runs any command without root's privileges (for checks that root's
file access would defeat).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from processes import free_port

STARTUP_TIMEOUT = 60.0


def _wait_listening(port: int, alive: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"the server exited with {alive.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on port {port} after {STARTUP_TIMEOUT} s") from None
            time.sleep(0.05)


def as_ordinary_user(command: Sequence[str]) -> list[str]:
    """`command` run without root's privileges: unchanged for an ordinary user; as root, run by
    `setpriv` as the `nobody` user (its own group, no others).

    Like `runuser`, but `nobody` keeps CAP_DAC_READ_SEARCH (read and search any directory, never
    write), so an interpreter or a venv in root's home still starts; every write is checked
    against the file modes as for any user who owns none of the files.
    """
    if os.geteuid() != 0:
        return list(command)
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and there is no 'nobody' user to run this as")
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux) to run this as an ordinary user")
    keep = "dac_read_search"
    return [
        "setpriv",
        f"--reuid={nobody.pw_uid}",
        f"--regid={nobody.pw_gid}",
        "--clear-groups",
        f"--inh-caps=-all,+{keep}",
        f"--ambient-caps=+{keep}",
        "--",
        *command,
    ]


class PrivateRedis:
    """`redis-server` on a free port with AOF in its own directory; `kill()` and `start()` it.

    Not `persistent`: no AOF and no snapshots, so a restart comes back empty (a wiped store).
    """

    def __init__(self, directory: Path, *, persistent: bool = True) -> None:
        self.directory = directory
        self.persistent = persistent
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.directory),
        ]
        if self.persistent:
            command += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            command += ["--appendonly", "no"]
        command += ["--save", "", "--daemonize", "no"]
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        _wait_listening(self.port, self.process)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@contextmanager
def private_redis(*, persistent: bool = True) -> Iterator[PrivateRedis]:
    """A running private Redis (with AOF unless not `persistent`), killed and its directory
    removed afterwards."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    directory = Path(tempfile.mkdtemp(prefix="mcptasks-redis-"))
    server = PrivateRedis(directory, persistent=persistent)
    try:
        server.start()
        yield server
    finally:
        server.kill()
        shutil.rmtree(directory, ignore_errors=True)


class PrivatePostgres:
    """A PostgreSQL cluster of its own (initdb) on a free port; `kill()` crashes it, `start()` restarts."""

    def __init__(self, directory: Path, bindir: Path) -> None:
        self.directory = directory
        self.bindir = bindir
        self.data = directory / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*prefix, *command],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.directory,
        )

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync"
        )

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} -c fsync=off"
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.directory / "pg.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        _wait_listening(self.port)

    def kill(self) -> None:
        """An immediate shutdown: no checkpoint, clients cut off, crash recovery at the next start."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A running private PostgreSQL, stopped and its directory removed afterwards."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found or (os.geteuid() == 0 and shutil.which("runuser") is None):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    directory = Path(tempfile.mkdtemp(prefix="mcptasks-pg-"))
    server = PrivatePostgres(directory, Path(found[-1]).parent)
    try:
        server.init()
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            server.kill()
        shutil.rmtree(directory, ignore_errors=True)
