"""A rolling deploy on the queue placement, with real processes on one SQLite file:
`mcptasks serve tests/rolling_app.py --enqueue-only` (the new version) creates the tasks, and
`mcptasks worker` processes of the old version (without the task tool `fresh`) and of the new one
claim them. A worker never fails a task for a tool it lacks: it leaves the task to one that knows
the tool; a task fails (`no_worker_for_tool`) only when no live worker has offered its tool for
`no_worker_timeout` (shortened here).
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from durable.durable_helpers import BOUND, client_of, sqlite_url
from rolling_deploy import NO_WORKER_TIMEOUT, Deploy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TASKS = 20


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deploy]:
    """The new server and an old worker (tests add the new worker)."""
    workdir = tmp_path_factory.mktemp("rolling")
    deploy = Deploy(sqlite_url(workdir), workdir)
    try:
        deploy.serve()
        deploy.worker("old")
        yield deploy
    finally:
        deploy.close()


async def test_a_task_no_live_worker_can_run_fails_naming_the_tool_after_the_bound(deploy: Deploy) -> None:
    assert "new" not in deploy.workers, "runs before the new worker starts"
    assert deploy.server is not None
    async with client_of(deploy.server) as tasks:
        task_id = str((await tasks.start("fresh"))["taskId"])
        with anyio.fail_after(BOUND):
            done = await tasks.finish(task_id)
    assert done["status"] == "failed", done
    error = done["error"]
    assert error["data"]["reason"] == "no_worker_for_tool", error
    assert error["data"]["tool"] == "fresh", error
    assert "'fresh'" in error["message"] and f"{NO_WORKER_TIMEOUT:g} s" in error["message"], error


async def test_old_workers_leave_new_tools_to_new_workers_and_no_task_fails(deploy: Deploy) -> None:
    new = deploy.workers.get("new") or deploy.worker("new")
    old = deploy.workers["old"]
    assert deploy.server is not None
    async with client_of(deploy.server) as tasks:
        fresh = [str((await tasks.start("fresh"))["taskId"]) for _ in range(TASKS)]
        stable = [str((await tasks.start("stable"))["taskId"]) for _ in range(4)]
        with anyio.fail_after(BOUND):
            finals = {task_id: await tasks.finish(task_id) for task_id in [*fresh, *stable]}
    failed = {task_id: final for task_id, final in finals.items() if final["status"] != "completed"}
    assert not failed, failed
    ran_on = {finals[task_id]["result"]["structuredContent"]["pid"] for task_id in fresh}
    assert ran_on == {new.pid}, (ran_on, new.pid, old.pid)
    # the old worker still runs the tools it knows
    assert {finals[t]["result"]["structuredContent"]["pid"] for t in stable} <= {new.pid, old.pid}
