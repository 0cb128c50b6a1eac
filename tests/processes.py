"""Real `mcptasks serve` processes for tests: start one over HTTP on 127.0.0.1, wait until it
accepts connections, and always stop it (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcptasks import EngineConfig

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 60.0
_WITHOUT = """
import sys
blocked = set(sys.argv[1].split(","))

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Block())
from mcptasks.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def cli_command(*args: str, without: str | None = None) -> list[str]:
    """`python -m mcptasks ARGS`, or with `without` (comma-separated top-level packages) the CLI
    run with those packages unimportable, as in an install without that extra."""
    prefix = ["-c", _WITHOUT, without] if without else ["-m", "mcptasks"]
    return [sys.executable, *prefix, *args]


EXIT_WAIT = 30.0
"""How long a killed process may take to be reaped."""


def process_test_marks() -> list[pytest.MarkDecorator]:
    """The marks of a test module that starts real processes (`pytestmark = process_test_marks()`):
    its tests are async, and slow (`-m "not slow"` leaves them out)."""
    return [pytest.mark.anyio, pytest.mark.slow]


@dataclasses.dataclass
class ServerProcess:
    """One `mcptasks serve` (or worker) process a test started; its output goes to `log`."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    port: int | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=EXIT_WAIT)


def clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment without mcptasks settings that would leak into a child."""
    settings = {"MCPTASKS_" + spec.name.upper() for spec in dataclasses.fields(EngineConfig)}
    leaking = {"MCPTASKS_STORE", "MCPTASKS_LEDGER", *settings}
    env = {k: v for k, v in os.environ.items() if k not in leaking}
    env.update(overrides)
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(url: str, default_port: int) -> bool:
    """Whether something accepts TCP connections at `url`'s host and port (a database server, say)."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server: SIGTERM (uvicorn shuts down gracefully), then SIGKILL."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@contextmanager
def serving_http(
    target: str | Path,
    *,
    port: int,
    log: Path,
    extra: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    open_files: int | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """`mcptasks serve TARGET --transport http` on 127.0.0.1:`port`, yielded once it accepts
    (`open_files`: the server's open-file limit, `ulimit -n`)."""
    command = [sys.executable, "-m", "mcptasks", "serve", str(target), "--transport", "http"]
    command += ["--host", "127.0.0.1", "--port", str(port), *extra]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else clean_env(),
            cwd=cwd,
            preexec_fn=None if open_files is None else partial(_limit_open_files, open_files),
        )
    try:
        wait_accepting(process, port, log)
        yield process
    finally:
        stop(process)


def _limit_open_files(count: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))


def wait_accepting(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Wait until `process` accepts TCP connections on 127.0.0.1:`port`; fail if it exits first."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the server did not accept connections in {STARTUP_TIMEOUT} s:\n{log.read_text()}"
                )
            time.sleep(0.05)


def postgres_execute(url: str, sql: str) -> None:
    """Run one SQL statement on the PostgreSQL server at `url`, from synchronous code (in a thread
    of its own: a test's event loop may be running in this one)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import asyncpg  # type: ignore[import-untyped]

    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, run()).result()
