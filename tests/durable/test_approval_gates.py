"""Approval gates on real `mcptasks serve tests/durable_app.py` processes (the `gate` tool):

- an operator answers with `mcptasks admin answer` (a separate process, on SQLite, PostgreSQL and Redis)
  and the body, waiting in `serve`, resumes and completes; `admin show` says who answered, when;
- an operator answers from the dashboard's question card in headless Chromium;
- a key takes one answer only: a different second answer is refused as stale (the CLI and a
  client's `tasks/update`), the same one again is a no-op;
- a question re-asked differently after the code changed (a replay) does not take the answer
  given to the old one: it is asked afresh under a new key, and a late answer to the old key is
  refused as stale;
- a question's deadline answers it as its author chose, on a body in memory and after a restart,
  journalled like any answer and logged as the deadline's.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
from browser import Browser, chromium_or_skip
from cli.test_dashboard import TOKEN, dashboard
from durable.durable_helpers import (
    assert_once,
    body_pids,
    client_of,
    servers_on,
    shared_store,
    sqlite_url,
    stored,
    until,
)
from sdk_helpers import accept, the_input_request

from mcptasks._runtime.operator import iso

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SHORT_LEASE = 4.0
"""The lease of the PostgreSQL and Redis servers: recovery (and the deadline sweep) every 2 s."""


async def admin(*args: str) -> tuple[int, str, str]:
    """`mcptasks admin ARGS` in a fresh interpreter: (exit status, stdout, stderr)."""
    done = await anyio.run_process([sys.executable, "-m", "mcptasks", "admin", *args], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def shown(store: str, task_id: str) -> dict[str, Any]:
    code, out, err = await admin("show", task_id, "--store", store, "--json")
    assert code == 0, err
    view: dict[str, Any] = json.loads(out)
    return view


def answer_of(key: str, **content: Any) -> str:
    """`--answer KEY=JSON`: the content accepting question KEY (as `mcptasks call` takes it)."""
    return f"{key}={json.dumps(content)}"


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
async def test_an_operator_answers_from_the_cli_and_the_body_completes(tmp_path: Path, backend: str) -> None:
    with shared_store(backend) if backend != "sqlite" else nullcontext(sqlite_url(tmp_path)) as store:
        lease = SHORT_LEASE if backend != "sqlite" else 30.0
        with servers_on(store, tmp_path, lease_ttl=lease) as servers:
            server = servers.start("only")
            async with client_of(server) as tasks:
                task_id = str((await tasks.start("gate", {"confirm": True}))["taskId"])
                key, request = the_input_request(await tasks.wait_input(task_id, count=1))
                assert request["params"]["message"].startswith("Apply plan-"), request

                code, out, err = await admin(
                    "answer",
                    task_id,
                    "--store",
                    store,
                    "--answer",
                    answer_of(key, confirm=True),
                    "--name",
                    "alice",
                )
                assert code == 0 and out == f"{task_id}: answered; now working\n", (out, err)
                assert (
                    f"INFO mcptasks.operator: task {task_id} answered by an operator (alice): {key}" in err
                ), err

                # The body resumed and asks its second question.
                waiting = await tasks.wait(
                    task_id,
                    lambda t: t["status"] == "input_required" and key not in t.get("inputRequests", {}),
                    "the second question",
                )
                second, _ = the_input_request(waiting)
                # The first key took its answer: another one is stale, the same one again is a no-op.
                code, _, err = await admin(
                    "answer", task_id, "--store", store, "--answer", answer_of(key, confirm=False)
                )
                assert code == 2, err
                assert f"stale answer: input key {key!r} was answered already by an operator" in err, err
                # A client's answer to it is ignored, as the protocol says: acked, nothing taken.
                assert await tasks.update(task_id, {key: accept(confirm=False)}) == {"resultType": "complete"}
                assert set((await tasks.get(task_id))["inputRequests"]) == {second}
                # The client answers the second question itself.
                await tasks.update(task_id, {second: accept(confirm=True)})
                done = await tasks.finish(task_id)

        assert done["status"] == "completed", done
        assert done["result"]["structuredContent"]["outcome"].endswith(" applied"), done
        assert_once(servers.counters, task_id, "prepare", "apply")
        view = await shown(store, task_id)
        audit = view["answers"]
        assert set(audit) == {key, second}, audit
        assert (audit[key]["by"], audit[key]["name"]) == ("operator", "alice"), audit
        assert audit[second]["by"] == "client" and "name" not in audit[second], audit
        assert view["createdAt"] <= audit[key]["at"] <= audit[second]["at"] <= view["lastUpdatedAt"], view
        code, table, _ = await admin("show", task_id, "--store", store)
        assert code == 0
        assert f"  {key}: operator (alice) at {audit[key]['at']}\n" in table, table
        assert f"  {second}: client at {audit[second]['at']}\n" in table, table


async def test_the_cli_declines_and_refuses_bad_answers_with_nothing_written(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        server = servers.start("only")
        async with client_of(server) as tasks:
            task_id = str((await tasks.start("gate", {}))["taskId"])
            key, _ = the_input_request(await tasks.wait_input(task_id, count=1))
            before, _ = await stored(store, task_id)
            for args, message in [
                (["--answer", f"{key}=maybe"], "does not fit its schema"),
                (["--answer", answer_of(key, confirm="maybe")], "does not fit its schema"),
                (["--answer", "nokey"], "--answer expects KEY=JSON"),
                (["--answer", answer_of("input-99", confirm=True)], "'input-99' is not a pending question"),
                ([], "no answer given"),
                (["--answer", f'{key}={{"confirm": true, "x": "\\ud800"}}'], "no answer was recorded"),
            ]:
                code, out, err = await admin("answer", task_id, "--store", store, *args)
                assert code == 2 and out == "" and message in err, (args, out, err)
            after, _ = await stored(store, task_id)
            assert after.version == before.version and after.answer_log == {}, after
            code, out, err = await admin("answer", task_id, "--store", store, "--decline")
            assert code == 0, err
            done = await tasks.finish(task_id)
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"]["action"] == "decline", done
    assert done["result"]["structuredContent"]["outcome"].endswith(" skipped"), done
    code, _, err = await admin("answer", task_id, "--store", store, "--cancel")
    assert code == 2 and "is completed; it takes no answers" in err, err


async def test_a_question_asked_differently_after_a_restart_does_not_take_the_old_answer(
    tmp_path: Path,
) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        first = servers.start("first")
        async with client_of(first) as tasks:
            task_id = str((await tasks.start("gate", {}))["taskId"])
            old_key, old = the_input_request(await tasks.wait_input(task_id, count=1))
        first.sigterm()
        # An answer to the old question lands while no server runs the body.
        code, _, err = await admin(
            "answer", task_id, "--store", store, "--answer", answer_of(old_key, confirm=True)
        )
        assert code == 0, err
        record, _ = await stored(store, task_id)
        assert old_key in record.input_responses, record

        # The code changed: variant "b" words the question differently.
        second = servers.start("second", variant="b")
        async with client_of(second) as tasks:
            await until(lambda: len(body_pids(servers.counters, task_id)) == 2, "the replay")
            waiting = await tasks.wait(
                task_id,
                lambda t: t["status"] == "input_required" and old_key not in t.get("inputRequests", {}),
                "the question asked afresh",
            )
            new_key, new = the_input_request(waiting)
            assert new_key != old_key
            assert new["params"]["message"] == old["params"]["message"].replace("?", " to production?")
            # The old key is withdrawn: a client's answer to it is ignored (acked, nothing taken).
            assert await tasks.update(task_id, {old_key: accept(confirm=True)}) == {"resultType": "complete"}
            assert set((await tasks.get(task_id))["inputRequests"]) == {new_key}
            await tasks.update(task_id, {new_key: accept(confirm=False)})
            done = await tasks.finish(task_id)

    assert done["status"] == "completed", done
    structured = done["result"]["structuredContent"]
    # The old "yes" was not taken: the answer to the new question ("no") was.
    assert structured["outcome"].endswith(" skipped") and "production" in structured["question"], structured
    assert_once(servers.counters, task_id, "prepare", "apply")
    record, journal = await stored(store, task_id)
    assert [e["kind"] for e in journal] == ["step", "ask", "ask", "answer", "step"], journal
    assert journal[2]["replaces"] == [old_key] and journal[2]["keys"] == [new_key], journal
    assert journal[1]["digest"] != journal[2]["digest"], journal
    assert record.answer_log[old_key]["by"] == "withdrawn", record.answer_log
    assert record.answer_log[new_key]["by"] == "client", record.answer_log


async def test_a_deadline_answers_a_body_in_memory_as_its_author_chose(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        server = servers.start("only")
        async with client_of(server) as tasks:
            declined = str((await tasks.start("gate", {"within": 1.0}))["taskId"])
            defaulted = str((await tasks.start("gate", {"within": 1.0, "on_timeout": "yes"}))["taskId"])
            cancelled = str((await tasks.start("gate", {"within": 1.0, "on_timeout": "cancel"}))["taskId"])
            finals = {task_id: await tasks.finish(task_id) for task_id in (declined, defaulted, cancelled)}

    expected = {
        declined: ("decline", "skipped"),
        defaulted: ("accept", "applied"),
        cancelled: ("cancel", "skipped"),
    }
    for task_id, (action, outcome) in expected.items():
        structured = finals[task_id]["result"]["structuredContent"]
        assert (structured["action"], structured["outcome"].split()[-1]) == (action, outcome), structured
        record, journal = await stored(store, task_id)
        [key] = record.answer_log
        logged = record.answer_log[key]
        assert logged["by"] == "deadline" and logged["at"] >= logged["deadline"], logged
        assert logged["deadline"] - record.created_at >= 1.0, (logged, record.created_at)
        [answer] = [entry for entry in journal if entry["kind"] == "answer"]
        assert answer["answers"][0]["action"] == action, journal
        view = await shown(store, task_id)
        assert view["answers"][key]["deadline"] == iso(logged["deadline"]), view
        assert view["inputDeadlines"] == {}, view


async def test_a_deadline_passed_while_serve_was_down_is_honoured_after_the_restart(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        first = servers.start("first")
        async with client_of(first) as tasks:
            task_id = str((await tasks.start("gate", {"within": 3.0, "on_timeout": "yes"}))["taskId"])
            key, _ = the_input_request(await tasks.wait_input(task_id, count=1))
        first.kill9()
        view = await shown(store, task_id)
        deadline = view["inputDeadlines"][key]
        assert deadline["answer"] == accept(confirm=True), deadline
        record, _ = await stored(store, task_id)
        due = record.input_deadlines[key]["at"]
        await until(lambda: time.time() > due + 0.5, "the deadline to pass while no server runs")
        record, _ = await stored(store, task_id)
        assert record.status == "input_required" and not record.answer_log, record

        second = servers.start("second")
        async with client_of(second) as tasks:
            done = await tasks.finish(task_id)

    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"]["outcome"].endswith(" applied"), done
    assert_once(servers.counters, task_id, "prepare", "apply")
    record, journal = await stored(store, task_id)
    assert record.answer_log[key]["by"] == "deadline", record.answer_log
    assert record.answer_log[key]["deadline"] == due, record.answer_log
    assert [e["kind"] for e in journal] == ["step", "ask", "answer", "step"], journal
    assert journal[2]["answers"] == [accept(confirm=True)], journal


async def test_a_replay_takes_the_deadline_answer_from_the_journal(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        first = servers.start("first")
        async with client_of(first) as tasks:
            arguments = {"within": 1.0, "on_timeout": "yes", "confirm": True}
            task_id = str((await tasks.start("gate", arguments))["taskId"])
            # the deadline answers the approval ("yes"), the body asks its second question
            waiting = await tasks.wait(
                task_id,
                lambda t: (
                    t["status"] == "input_required"
                    and any(r["params"]["message"] == "Really?" for r in t.get("inputRequests", {}).values())
                ),
                "the second question",
            )
            second_key, _ = the_input_request(waiting)
        first.kill9()
        _, journal = await stored(store, task_id)
        assert [e["kind"] for e in journal] == ["step", "ask", "answer", "ask"], journal
        assert journal[2]["answers"] == [accept(confirm=True)], journal

        second = servers.start("second")
        async with client_of(second) as tasks:
            await until(lambda: len(body_pids(servers.counters, task_id)) == 2, "the replay")
            again = await tasks.wait_input(task_id, count=1)
            assert the_input_request(again)[0] == second_key, again
            await tasks.update(task_id, {second_key: accept(confirm=True)})
            done = await tasks.finish(task_id)

    structured = done["result"]["structuredContent"]
    # applied: the replay took the deadline's "yes" from the journal (no new deadline, no new answer)
    assert (structured["action"], structured["outcome"].split()[-1]) == ("accept", "applied"), structured
    assert structured["pid"] == second.pid, structured
    assert_once(servers.counters, task_id, "prepare", "apply")
    record, journal = await stored(store, task_id)
    assert [e["kind"] for e in journal] == ["step", "ask", "answer", "ask", "answer", "step"], journal
    assert [entry["by"] for entry in record.answer_log.values()] == ["deadline", "client"], record.answer_log


async def test_an_operator_answers_from_the_dashboard_in_a_browser(tmp_path: Path) -> None:
    executable = chromium_or_skip()
    store = sqlite_url(tmp_path)
    with servers_on(store, tmp_path) as servers:
        server = servers.start("only")
        async with client_of(server) as tasks:
            task_id = str((await tasks.start("gate", {"within": 3600.0}))["taskId"])
            key, _ = the_input_request(await tasks.wait_input(task_id, count=1))
            with dashboard(store, tmp_path) as base:
                browser = await _thread(Browser, executable)
                try:
                    js = browser.evaluate
                    await _thread(browser.open, f"{base}tasks/{task_id}")
                    await _thread(browser.wait_until, "Number(document.body.dataset.updates) >= 1")
                    card = f"document.querySelector('#inputs .question[data-key={json.dumps(key)}]')"
                    due = await _thread(js, f"{card}.querySelector('.q-deadline').textContent")
                    assert due.startswith("Unless answered, its deadline answers it at "), due
                    assert due.endswith(': {"action":"decline"}'), due
                    area = f"{card}.querySelector('form.answer textarea')"
                    accept_button = f"{card}.querySelector('form.answer button[data-action=accept]')"
                    notice = "document.getElementById('notice').textContent"

                    await _thread(js, "document.getElementById('token').value = ''")
                    await _thread(js, f"{accept_button}.click()")
                    assert await _thread(js, notice) == "Enter the operator token to answer."
                    await _thread(js, "document.getElementById('token').value = 'wrong'")
                    await _thread(js, f"{area}.value = '{{\"confirm\": true}}'")
                    await _thread(js, f"{accept_button}.click()")
                    await _thread(browser.wait_until, f"{notice}.includes('valid operator token')")
                    await _thread(js, f"document.getElementById('token').value = {json.dumps(TOKEN)}")
                    await _thread(js, f"{area}.value = 'yes please'")
                    await _thread(js, f"{accept_button}.click()")
                    assert (await _thread(js, notice)).startswith("The answer is not JSON"), notice
                    record, _ = await stored(store, task_id)
                    assert record.status == "input_required" and not record.answer_log, record

                    await _thread(js, f"{area}.value = '{{\"confirm\": true}}'")
                    await _thread(js, f"{accept_button}.click()")
                    await _thread(browser.wait_until, f"{notice} === 'Answered {key}.'")
                    done = await tasks.finish(task_id)
                    who = "document.querySelector('#answers li .by')?.textContent"
                    await _thread(browser.wait_until, f"{who} === 'operator (dashboard)'")
                    assert await _thread(js, "document.getElementById('s-inputs').hidden")
                finally:
                    await _thread(browser.close)

    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"]["outcome"].endswith(" applied"), done
    record, _ = await stored(store, task_id)
    assert (record.answer_log[key]["by"], record.answer_log[key]["name"]) == ("operator", "dashboard")


async def _thread(fn: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(fn, *args)
