"""`mcptasks admin`: operator commands run as real processes against SQLite, PostgreSQL and Redis
stores that a real engine is using, plus the table output and the errors, in-process."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from operator_stores import PG_URL, listening, seeded_sqlite, store_url, workload
from processes import cli_command

from mcptasks._runtime.operator import owner_hash, parse_duration, parse_since
from mcptasks.cli.main import main
from mcptasks.stores import TaskRecord
from mcptasks.stores.base import KeepsJournal
from mcptasks.stores.sqlite import SCHEMA_VERSION
from mcptasks.stores.url import store_from_url

__all__ = ["store_url"]  # the fixture, re-exported so pytest finds it here

OWNER = "alice@example.com"


async def admin(*args: str) -> tuple[int, str, str]:
    """Run `mcptasks admin ARGS` in a fresh interpreter; (exit status, stdout, stderr)."""
    done = await anyio.run_process([sys.executable, "-m", "mcptasks", "admin", *args], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def admin_json(*args: str) -> Any:
    code, out, err = await admin(*args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.anyio
async def test_admin_commands_on_a_live_store(store_url: str) -> None:
    async with workload(store_url, owner=OWNER) as load:
        ids = load.ids
        listed = await admin_json("list", "--store", store_url)
        assert listed["nextCursor"] is None
        by_status = {task["status"]: task for task in listed["tasks"]}
        assert {status: task["taskId"] for status, task in by_status.items()} == ids
        assert all("owner" not in task and task["ownerHash"] == owner_hash(OWNER) for task in listed["tasks"])
        assert by_status["working"]["runner"] == load.engine.instance_id
        assert by_status["working"]["statusMessage"].startswith("<script>")

        only = await admin_json(
            "list", "--store", store_url, "--status", "failed,completed", "--tool", "boom"
        )
        assert [task["taskId"] for task in only["tasks"]] == [ids["failed"]]
        owners = await admin_json(
            "list", "--store", store_url, "--show-owners", "--owner", OWNER, "--since", "1h"
        )
        assert {task["owner"] for task in owners["tasks"]} == {OWNER} and len(owners["tasks"]) == 4
        paged = await admin_json("list", "--store", store_url, "--limit", "3")
        assert len(paged["tasks"]) == 3 and paged["nextCursor"]
        rest = await admin_json("list", "--store", store_url, "--after", paged["nextCursor"])
        assert len(rest["tasks"]) == 1 and rest["nextCursor"] is None

        failed = await admin_json("show", ids["failed"], "--store", store_url)
        assert failed["error"] == {"code": -32603, "message": "disk <full>"}
        assert [entry["status"] for entry in failed["timeline"]] == ["created", "failed"]
        assert "result" not in failed and "arguments" not in failed and "owner" not in failed
        waiting = await admin_json("show", ids["input_required"], "--store", store_url)
        [request] = waiting["inputRequests"].values()
        assert request["method"] == "elicitation/create"
        assert waiting["timeline"][-1]["status"] == "input_required"
        completed = await admin_json("show", ids["completed"], "--store", store_url, "--result")
        assert completed["arguments"] == {"n": 7}
        assert completed["result"]["content"][0]["text"] == "finished 7"

        stats = await admin_json("stats", "--store", store_url)
        assert stats["by_status"] == {"working": 1, "input_required": 1, "failed": 1, "completed": 1}
        assert stats["by_tool"]["spin"] == {"working": 1}
        assert stats["queued"] == 0 and stats["oldest_active"]
        assert stats["runners"][load.engine.instance_id]["active_tasks"] == 2

        code, out, err = await admin("cancel", ids["working"], "--store", store_url)
        assert code == 0 and out == f"{ids['working']}: cancelled\n"
        [logged] = err.splitlines()  # the command's own log line
        assert f"INFO mcptasks.tasks: task {ids['working']} cancelled (tool spin) in " in logged
        assert logged.endswith(": Cancelled by an operator.")
        record = await load.engine.store.get(ids["working"])
        assert record is not None and record.status == "cancelled"
        assert record.status_message == "Cancelled by an operator."
        if not store_url.startswith("sqlite"):  # wake-ups cross processes on Redis and PostgreSQL
            with anyio.fail_after(30):
                await load.stopped.wait()
        code, out, _ = await admin("cancel", ids["completed"], "--store", store_url)
        assert code == 0 and "already completed, unchanged" in out

        purged = await admin_json("purge", "--store", store_url, "--status", "failed", "--older-than", "0s")
        assert purged["deleted"] == 1
        assert await load.engine.store.get(ids["failed"]) is None
        code, _, err = await admin("show", ids["failed"], "--store", store_url)
        assert code == 2 and "no task" in err
        code, _, err = await admin("purge", "--store", store_url, "--status", "working", "--older-than", "1d")
        assert code == 2 and "terminal" in err


# -- in-process: tables, escaping and errors (SQLite) ------------------------------------------


def test_list_table_escapes_control_characters_and_hides_owners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = seeded_sqlite(
        tmp_path / "t.db",
        TaskRecord(task_id="t-1", owner="bob", tool="build", status_message="\x1b[31mred\x1b[0m\nnext"),
    )
    assert main(["admin", "list", "--store", url]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()
    assert header.split() == ["TASK", "ID", "TOOL", "STATUS", "OWNER", "AGE", "ATTEMPT", "RUNNER", "MESSAGE"]
    assert "\x1b" not in out and "\\x1b[31mred\\x1b[0m\\nnext" in row
    assert owner_hash("bob") in row and "bob" not in row
    assert main(["admin", "list", "--store", url, "--show-owners"]) == 0
    assert " bob " in capsys.readouterr().out


def test_show_and_stats_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = TaskRecord(task_id="t-2", owner="bob", tool="build", created_at=time.time() - 7200)
    waiting = record.evolve(status="input_required", status_message="need a token")
    broken = {"content": [{"type": "text", "text": "no such branch"}], "isError": True}
    url = seeded_sqlite(
        tmp_path / "t.db",
        waiting,
        TaskRecord(task_id="t-3", owner="bob", tool="lint", status="failed"),
        TaskRecord(task_id="t-4", owner="bob", tool="lint", status="completed", result=broken),
    )
    assert main(["admin", "show", "t-2", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "taskId:" in out and "input_required  need a token" in out and "created" in out
    assert main(["admin", "stats", "--store", url]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "TOOL",
        "WORKING",
        "INPUT_REQUIRED",
        "COMPLETED",
        "FAILED",
        "TOTAL",
    ]
    assert "(all)" in out and "oldest active:" in out and "2h0" in out and "live runners: none" in out
    assert "tool errors (completed with isError): 1\n" in out


async def _seed_journal(url: str, record: TaskRecord, entries: list[str]) -> None:
    """Write `record` and its journal `entries` into the store `url` names (creating it)."""
    store = store_from_url(url)
    await store.open()
    try:
        await store.create(record)
        assert isinstance(store, KeepsJournal)
        for position, entry in enumerate(entries):
            assert await store.append_journal(record.task_id, position, entry) == entry
    finally:
        await store.close()


_JOURNAL = [
    json.dumps({"kind": "step", "name": "build", "value": {"artifact": "app.tar", "bytes": 1234}}),
    json.dumps({"kind": "ask", "name": "confirm", "request": {"message": "ship \x1b[31mit\x1b[0m?"}}),
    json.dumps({"kind": "answer", "name": "confirm", "value": {"action": "accept", "text": "y" * 500}}),
    json.dumps(["not", "an", "object"]),
]


@pytest.mark.anyio
async def test_show_prints_the_journal(store_url: str) -> None:
    record = TaskRecord(task_id="t-journal", owner=OWNER, tool="deploy")
    await _seed_journal(store_url, record, _JOURNAL)
    code, out, err = await admin("show", "t-journal", "--store", store_url)
    assert code == 0, err
    hidden = out[out.index("Journal (4 entries):") :].splitlines()
    assert [line.split() for line in hidden[1:]] == [
        ["0", "step", "build"],
        ["1", "ask", "confirm"],
        ["2", "answer", "confirm"],
        ["3", "-", "-", '"(hidden:', "--result", "shows", 'it)"'],
    ]
    assert "app.tar" not in out  # a step's value is a result: shown with --result only
    assert (await admin_json("show", "t-journal", "--store", store_url))["journal"][0] == {
        "kind": "step",
        "name": "build",
    }
    code, out, err = await admin("show", "t-journal", "--result", "--store", store_url)
    assert code == 0, err
    section = out[out.index("Journal (4 entries):") :].splitlines()
    assert len(section) == 5
    assert section[1].split(None, 3) == [
        "0",
        "step",
        "build",
        '{"value":{"artifact":"app.tar","bytes":1234}}',
    ]
    assert section[2].split()[:3] == ["1", "ask", "confirm"] and "\x1b" not in section[2]
    assert "\\u001b[31mit" in section[2]  # escaped, it cannot drive the terminal
    answer = section[3].split(None, 3)
    assert answer[:3] == ["2", "answer", "confirm"] and len(answer[3]) == 120 and answer[3].endswith("…")
    assert section[4].split(None, 3) == ["3", "-", "-", '["not","an","object"]']
    shown = await admin_json("show", "t-journal", "--result", "--store", store_url)
    assert shown["journal"] == [json.loads(entry) for entry in _JOURNAL]
    assert shown["taskId"] == "t-journal"


@pytest.mark.anyio
async def test_show_without_a_journal_prints_none(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    await _seed_journal(url, TaskRecord(task_id="t-plain", owner=OWNER, tool="deploy"), [])
    code, out, err = await admin("show", "t-plain", "--store", url)
    assert code == 0, err
    assert "Journal" not in out and "timeline:" in out
    assert "journal" not in await admin_json("show", "t-plain", "--store", url)
    one = TaskRecord(task_id="t-one", owner=OWNER, tool="deploy")
    await _seed_journal(url, one, [json.dumps({"kind": "step", "name": "only"})])
    code, out, err = await admin("show", "t-one", "--store", url)
    assert code == 0 and "Journal (1 entry):\n  0  step  only\n" in out, (out, err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["admin", "list"], "name the task store"),
        (["admin", "list", "--store", "memory://"], "memory:// holds tasks inside one server process"),
        (["admin", "list", "--store", "ftp://x"], "unsupported store URL"),
        (["admin", "list", "--since", "yesterday-ish"], "not a time or a duration"),
        (["admin", "list", "--status", "running"], "unknown task status"),
        (["admin", "list", "--after", "???"], "malformed listing cursor"),
        (["admin", "list", "--limit", "0"], "--limit must be a positive integer"),
        (["admin", "purge", "--older-than", "soon"], "not a duration"),
        (["admin", "cancel", "nope"], "no task 'nope'"),
    ],
)
def test_bad_input_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, monkeypatch: Any
) -> None:
    monkeypatch.delenv("MCPTASKS_STORE", raising=False)
    if "--store" not in argv and message != "name the task store":
        argv = [*argv, "--store", seeded_sqlite(tmp_path / "e.db")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("mcptasks admin: error: ") and message in err and len(err.splitlines()) == 1


def test_store_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv(
        "MCPTASKS_STORE", seeded_sqlite(tmp_path / "env.db", TaskRecord(task_id="t-9", owner="o", tool="x"))
    )
    assert main(["admin", "list", "--json"]) == 0
    assert [task["taskId"] for task in json.loads(capsys.readouterr().out)["tasks"]] == ["t-9"]


def test_durations_and_times() -> None:
    assert parse_duration("90") == 90 and parse_duration("1h30m") == 5400 and parse_duration("2d") == 172800
    assert parse_since("2026-11-30T12:00:00Z") == parse_since("2026-11-30T12:00:00") == 1796040000.0
    assert parse_since("10m", now=1000.0) == 400.0
    for bad in ("", "h", "5x", "1h 2"):
        with pytest.raises(ValueError):
            parse_duration(bad)


# -- stores that cannot be used, and stores that must not be created ---------------------------


def _cli(*args: str, without: str | None = None, cwd: Path | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        cli_command(*args, without=without),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def _one_line(err: str, prog: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.mark.parametrize(
    "command", [["admin", "list"], ["admin", "stats"], ["admin", "cancel", "t-1"], ["dashboard"]]
)
@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [("redis://127.0.0.1:6379/0", "redis", "redis"), ("postgresql://127.0.0.1/test", "asyncpg", "postgres")],
)
def test_a_missing_extra_is_one_line(command: list[str], url: str, package: str, extra: str) -> None:
    code, out, err = _cli(*command, "--store", url, without=package)
    assert code == 2 and out == "", (code, out, err)
    prog = "mcptasks dashboard" if command == ["dashboard"] else "mcptasks admin"
    _one_line(err, prog, f"needs the {package!r} package", f"pip install 'mcptasks[{extra}]'")


@pytest.mark.parametrize(
    "command",
    [
        ["admin", "list"],
        ["admin", "show", "t-1"],
        ["admin", "stats"],
        ["admin", "cancel", "t-1"],
        ["admin", "purge", "--older-than", "1d"],
        ["dashboard"],
    ],
)
def test_no_command_creates_a_store(tmp_path: Path, command: list[str]) -> None:
    code, _, err = _cli(*command, "--store", "sqlite:///typo.db", cwd=tmp_path)
    assert code == 2
    prog = "mcptasks dashboard" if command == ["dashboard"] else "mcptasks admin"
    _one_line(err, prog, "no task store at 'typo.db'", "no such file")
    assert list(tmp_path.iterdir()) == []


def test_an_unusable_store_is_one_line(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not an SQLite database " * 100)
    for command in (["admin", "list"], ["dashboard"]):
        code, _, err = _cli(*command, "--store", f"sqlite:///{corrupt}")
        assert code == 2
        _one_line(err, f"mcptasks {command[0]}", "cannot open the task store", "not a database")
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    code, _, err = _cli("admin", "stats", "--store", f"sqlite:///{empty}")
    assert code == 2
    _one_line(err, "mcptasks admin", "is not an mcptasks task store")
    assert empty.stat().st_size == 0


def test_a_missing_postgres_database_says_how_to_create_it() -> None:
    if not listening(5432):
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    name = f"mcptasks_absent_{uuid.uuid4().hex[:12]}"  # never created
    base = urlsplit(PG_URL)
    url = f"postgresql://{base.username or 'postgres'}:s3cret@{base.hostname}:{base.port or 5432}/{name}"
    code, _, err = _cli("admin", "stats", "--store", url)
    assert code == 2
    _one_line(
        err,
        "mcptasks admin",
        f"cannot open the task store postgresql://{base.username or 'postgres'}:***@",
        f'database "{name}" does not exist',
        f'create it with `createdb {name}` or `CREATE DATABASE "{name}";`',
    )
    assert "s3cret" not in err and "is running" not in err


def test_reads_do_not_migrate_an_older_schema(tmp_path: Path) -> None:
    if SCHEMA_VERSION < 2:
        pytest.skip("there is no older SQLite schema yet")
    url = seeded_sqlite(tmp_path / "old.db", TaskRecord(task_id="t-1", owner="o", tool="x"))
    with sqlite3.connect(tmp_path / "old.db") as conn:  # as an older mcptasks left it
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    for command in (["admin", "list"], ["admin", "show", "t-1"], ["admin", "stats"], ["dashboard"]):
        code, _, err = _cli(*command, "--store", url)
        assert code == 2
        _one_line(err, f"mcptasks {command[0]}", f"schema version {SCHEMA_VERSION - 1}", "does not migrate")
    with sqlite3.connect(tmp_path / "old.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION - 1


def test_a_purge_is_logged_by_the_command(tmp_path: Path) -> None:
    old = TaskRecord(
        task_id="t-1", owner="o", tool="x", status="completed", created_at=time.time() - 3 * 86400
    )
    url = seeded_sqlite(tmp_path / "p.db", old)
    code, out, err = _cli("admin", "purge", "--store", url, "--older-than", "1d")
    assert code == 0 and out.startswith("deleted 1 cancelled/completed/failed task(s)"), (out, err)
    [logged] = err.splitlines()
    assert (
        "INFO mcptasks.operator: purged 1 cancelled/completed/failed task(s) last updated before " in logged
    )
