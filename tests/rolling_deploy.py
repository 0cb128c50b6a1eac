"""Rolling deploys with real processes: a server of the new version of `tests/rolling_app.py`
and workers of the old and the new version on one store (`tests/durable/test_rolling_deploy.py`,
`tests/executors/test_executor_processes.py`)."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from durable.durable_helpers import BOUND, Server
from processes import ROOT, ServerProcess, clean_env, free_port, stop, wait_accepting

APP = "tests/rolling_app.py"
LEASE = 3.0
NO_WORKER_TIMEOUT = 2.0
"""`no_worker_timeout` of every process (shortened)."""


@dataclass
class Deploy:
    """An enqueue-only server of the new version and the workers started beside it."""

    store: str
    workdir: Path
    flags: tuple[str, ...] = ("--enqueue-only",)
    """What makes the server create tasks for workers: `--enqueue-only`, or `--executor URL`
    (workers get every flag but `--enqueue-only`)."""
    server: Server | None = None
    workers: dict[str, ServerProcess] = field(default_factory=dict)

    def _popen(self, name: str, argv: list[str], version: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.workdir / f"{name}.log"
        env = clean_env(
            MCPTASKS_ROLLING_VERSION=version,
            MCPTASKS_NO_WORKER_TIMEOUT=str(NO_WORKER_TIMEOUT),
            MCPTASKS_IMMEDIATE_RESULTS="false",
            PYTHONUNBUFFERED="1",
        )
        with log.open("wb") as output:
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mcptasks",
                    *argv,
                    APP,
                    "--store",
                    self.store,
                    "--lease-ttl",
                    str(LEASE),
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        return popen, log

    def serve(self) -> Server:
        port = free_port()
        argv = ["serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), *self.flags]
        popen, log = self._popen("serve", argv, "new")
        self.server = Server("serve", popen, log, port)
        wait_accepting(popen, port, log)
        return self.server

    def worker(self, version: str) -> ServerProcess:
        """A worker of `version`, once it runs (it has heartbeated, saying which tools it runs)."""
        popen, log = self._popen(
            f"worker-{version}", ["worker", *(f for f in self.flags if f != "--enqueue-only")], version
        )
        worker = self.workers[version] = ServerProcess(f"worker-{version}", popen, log)
        deadline = time.monotonic() + BOUND
        while "mcptasks worker " not in worker.output():
            assert popen.poll() is None, worker.output()
            assert time.monotonic() < deadline, f"no worker after {BOUND} s:\n{worker.output()}"
            time.sleep(0.05)
        return worker

    def close(self) -> None:
        for proc in [*self.workers.values(), *([self.server] if self.server else [])]:
            stop(proc.popen)
            print(f"--- {proc.name} ---\n{proc.output()[-3000:]}")  # shown for a failed test only
