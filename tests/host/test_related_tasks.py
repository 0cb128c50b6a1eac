"""Related tasks (`_meta["io.modelcontextprotocol/relatedTaskIds"]`, the ext-tasks draft) over
authenticated Streamable HTTP: kept only when the server opts in, each id checked as `tasks/get`
would for the caller, foreign and unknown ids dropped without a word, never a task created, and
the body reads the kept tasks' state and results.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.server.auth.settings import AuthSettings
from sdk_helpers import HostApp, StaticTokens, Tasks, as_user, mcp_error, serve_http, text

from mcptasks import Result, TaskContext
from mcptasks.wire import INVALID_PARAMS, RELATED_TASK_IDS_META

pytestmark = pytest.mark.anyio


def related_host(**options: Any) -> HostApp:
    host = HostApp(
        **options,
        token_verifier=StaticTokens("alice", "bob"),
        auth=AuthSettings(
            issuer_url="http://127.0.0.1:9/",
            resource_server_url="http://127.0.0.1:9/mcp",
            validate_token_resource=False,
        ),
    )

    @host.app.task_tool(poll_interval=0.05)
    async def follow_up(ctx: TaskContext):
        """Report the related tasks the call named, as the body reads them."""
        yield "reading the related tasks"
        related = await ctx.related_tasks()
        yield Result(
            json.dumps(
                {
                    "ids": list(ctx.related_task_ids),
                    "tasks": [
                        {
                            "id": task.task_id,
                            "tool": task.tool,
                            "status": task.status,
                            "terminal": task.terminal,
                            "result": text(task.result) if task.result is not None else None,
                        }
                        for task in related
                    ],
                }
            )
        )

    return host


def related(*task_ids: Any) -> dict[str, Any]:
    return {RELATED_TASK_IDS_META: list(task_ids)}


async def finished(tasks: Tasks, name: str, arguments: dict[str, Any]) -> str:
    task_id = str((await tasks.start(name, arguments))["taskId"])
    assert (await tasks.finish(task_id))["status"] == "completed"
    return task_id


async def report(tasks: Tasks, meta: dict[str, Any]) -> dict[str, Any]:
    task_id = str((await tasks.start("follow_up", meta=meta))["taskId"])
    done = await tasks.finish(task_id)
    assert done["status"] == "completed", done
    return dict(json.loads(text(done["result"])))


async def test_the_body_reads_the_callers_related_tasks_and_nothing_else() -> None:
    host = related_host(related_tasks=True)
    async with (
        serve_http(host.app.streamable_http_app()) as url,
        as_user(url, "alice") as alice,
        as_user(url, "bob") as bob,
    ):
        mine = await finished(alice, "quick", {"n": 3})
        waiting = str((await alice.start("gated", {"label": "related"}))["taskId"])
        foreign = await finished(bob, "quick", {"n": 4})

        seen = await report(alice, related(mine, foreign, "no-such-task", waiting, mine))
        assert seen["ids"] == [mine, waiting]  # bob's and the unknown id dropped, repeats folded
        assert seen["tasks"] == [
            {"id": mine, "tool": "quick", "status": "completed", "terminal": True, "result": "counted to 3"},
            {"id": waiting, "tool": "gated", "status": "working", "terminal": False, "result": None},
        ]
        assert foreign not in json.dumps(seen)

        # Naming tasks created none and changed none: bob's task is as it was, alice's still runs.
        assert (await bob.get(foreign))["status"] == "completed"
        assert (await alice.get(waiting))["status"] == "working"
        host.release("related")
        assert (await alice.finish(waiting))["status"] == "completed"

        # The same ids named by bob: only his own task is kept.
        assert (await report(bob, related(mine, foreign)))["ids"] == [foreign]


async def test_a_malformed_value_is_refused_before_a_task_exists() -> None:
    host = related_host(related_tasks=True)
    async with serve_http(host.app.streamable_http_app()) as url, as_user(url, "alice") as alice:
        for value in ("not-a-list", [1, 2], [""], [f"id-{n}" for n in range(33)]):
            error = await mcp_error(alice.call("follow_up", meta={RELATED_TASK_IDS_META: value}))
            assert error.code == INVALID_PARAMS, value
            assert RELATED_TASK_IDS_META in error.message


async def test_ignored_unless_the_server_opts_in() -> None:
    host = related_host()
    async with serve_http(host.app.streamable_http_app()) as url, as_user(url, "alice") as alice:
        mine = await finished(alice, "quick", {"n": 1})
        assert await report(alice, related(mine)) == {"ids": [], "tasks": []}
        # a malformed value is not even looked at
        assert await report(alice, {RELATED_TASK_IDS_META: "not-a-list"}) == {"ids": [], "tasks": []}


async def test_the_ids_are_kept_with_the_record_on_a_durable_store(tmp_path: Any) -> None:
    """A body run later elsewhere (a worker, a re-run) reads the ids from the stored record."""
    from mcptasks.stores import SqliteTaskStore, TaskRecord

    store = SqliteTaskStore(str(tmp_path / "tasks.db"))
    await store.open()
    try:
        record = await store.create(
            TaskRecord(task_id="t1", owner="alice", tool="t", related_task_ids=["a", "b"])
        )
        reopened = SqliteTaskStore(str(tmp_path / "tasks.db"))
        await reopened.open()
        try:
            stored = await reopened.get("t1")
            assert stored is not None and stored.related_task_ids == ["a", "b"] == record.related_task_ids
        finally:
            await reopened.close()
    finally:
        await store.close()
