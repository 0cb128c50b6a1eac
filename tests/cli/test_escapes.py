"""Terminal escapes and forged lines from a server, a tool body or a client never reach the
operator raw: `mcptasks call` on a terminal and without one, `tasks get`, `admin list --json`,
`admin show`, and the log lines of `mcptasks serve` (text and JSON).

One `mcptasks serve tests/escapes_app.py` (SQLite store, `--accept-missing-mcp-name`) serves the
module; its tools put OSC 52, OSC 0, `ESC[2J`, the C1 CSI U+009B, a bidi override, a newline and
a line separator into every text a user sees.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from escapes_app import HOSTILE, RAW
from processes import ROOT, clean_env, free_port, serving_http
from sdk_helpers import TIMEOUT, RawClient, eventually, poll, the_input_request

from mcptasks.cli.logsetup import configure_logging
from mcptasks.cli.main import main

pexpect = pytest.importorskip("pexpect")

APP = ROOT / "tests" / "escapes_app.py"
MAIN = "import sys; from mcptasks.cli.main import main; sys.exit(main(sys.argv[1:]))"
FORGED = "\n2026-01-01 00:00:00,000 CRITICAL mcptasks: forged\x1b[2J"
"""What a client sends to forge a log line (and clear the operator's screen)."""
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")


@dataclass
class Server:
    url: str
    store: str
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("escapes")
    store = f"sqlite:///{folder / 'tasks.db'}"
    port = free_port()
    log = folder / "server.log"
    extra = ("--store", store, "--accept-missing-mcp-name")
    with serving_http(APP, port=port, log=log, extra=extra):
        yield Server(f"http://127.0.0.1:{port}/mcp", store, log)


def assert_no_raw(text: str, *, allowed: str = "") -> None:
    """`text` holds none of the attack characters raw (`allowed`: the one sequence the CLI itself
    sends, removed first)."""
    if allowed:
        text = text.replace(allowed, "")
    found = [char for char in RAW if char in text]
    assert not found, (found, text)


@pytest.fixture(scope="module")
def piped_call(server: Server) -> tuple[str, str, str]:
    """`mcptasks call` of the hostile tool without a terminal (answered on the command line);
    (task id, stdout, stderr)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", MAIN, "call", server.url, "hostile_texts", "--answer", "pick=a"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = re.search(r"task (\S+) started", done.stderr)
    assert found is not None, done.stderr
    return found.group(1), done.stdout, done.stderr


def test_call_on_a_terminal_shows_every_tool_text_escaped(server: Server) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-c", MAIN, "call", server.url, "hostile_texts"],
        encoding="utf-8",
        timeout=60,
        dimensions=(24, 400),
        env=clean_env(TERM="xterm"),
        cwd=str(ROOT),
    )
    seen = io.StringIO()
    child.logfile_read = seen
    child.expect_exact("? question ")
    child.expect_exact("[a]ccept, [d]ecline or [s]kip? [a] ")
    child.sendline("")
    child.expect_exact("choice [1-2]: ")
    child.sendline("1")
    child.expect_exact("second line")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    shown = seen.getvalue()
    # The live line's own erase is the only escape sequence on the terminal.
    assert_no_raw(shown, allowed="\r\x1b[K")
    for text in ("status ", "? question ", "title ", "description ", "first "):
        assert f"{text}\\x1b]52;c;" in shown, text  # shown, escaped
    assert "\\u202etxt.exe" in shown and "\\x9b31m" in shown
    # A status message or a question cannot start a line of its own (the result, last, keeps the
    # line breaks the tool meant).
    before_result = shown.split("result \\x1b")[0]
    assert not any(line.startswith("mcptasks: error: forged") for line in before_result.splitlines())


def test_call_without_a_terminal_escapes_status_lines_and_the_result(
    piped_call: tuple[str, str, str],
) -> None:
    _, out, err = piped_call
    assert_no_raw(out)
    assert_no_raw(err)
    assert "status \\x1b]52;c;" in err and "answered 'question \\x1b]52;c;" in err
    assert not any(line.startswith("mcptasks: error: forged") for line in err.splitlines())
    # The result keeps the line breaks the tool meant, and nothing else raw.
    assert out.splitlines()[-1] == "second line"
    assert out.startswith("result \\x1b]52;c;")


def test_tasks_get_writes_control_characters_as_json_escapes(
    server: Server, piped_call: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = piped_call[0]
    assert main(["tasks", "get", server.url, "--", task_id]) == 0
    out = capsys.readouterr().out
    assert_no_raw(out)
    assert "\\u009b31m\\u202etxt.exe" in out
    task = json.loads(out)
    assert task["result"]["content"][0]["text"] == f"result {HOSTILE}\nsecond line"  # the same value


def test_admin_list_json_and_show_escape_the_store_texts(
    server: Server, piped_call: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = piped_call[0]
    assert main(["admin", "list", "--store", server.store, "--json"]) == 0
    out = capsys.readouterr().out
    assert_no_raw(out)
    listed = {task["taskId"]: task for task in json.loads(out)["tasks"]}
    assert listed[task_id]["statusMessage"].endswith(HOSTILE)
    assert main(["admin", "show", "--store", server.store, "--result", task_id]) == 0
    out = capsys.readouterr().out
    assert_no_raw(out)
    assert "\\x9b31m" in out


@pytest.mark.anyio
async def test_server_log_lines_escape_what_clients_send(server: Server) -> None:
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
        client = RawClient(http, server.url)
        created = (await client.call("waits_for_an_answer", {})).result
        task_id = created["taskId"]
        task = await poll(
            lambda: client.get(task_id), lambda t: t["status"] == "input_required", what="the question"
        )
        key, _ = the_input_request(task)
        refusal = {"code": -32000, "message": f"no{FORGED}"}
        await client.send("tasks/update", {"taskId": task_id, "inputResponses": {key: refusal}})
        ended = await client.finish(task_id)
        assert ended["status"] == "failed" and ended["error"]["message"] == f"no{FORGED}"
        # A client without Mcp-Name is named in a warning: its clientInfo is the client's text.
        info = {"name": f"evil{FORGED}", "version": "1"}
        await client.send(
            "tasks/get",
            {"taskId": task_id, "_meta": {"io.modelcontextprotocol/clientInfo": info}},
            headers={"Mcp-Name": None},
        )

    def logged() -> str:
        return server.log.read_text(encoding="utf-8", errors="replace")

    await eventually(lambda: "without an Mcp-Name header from client evil" in logged(), "the warning")
    text = logged()
    assert_no_raw(text)
    assert "mcptasks: forged\\x1b[2J" in text  # the client's text is there, escaped
    lines = text.splitlines()
    forged = [line for line in lines if "forged" in line]
    assert len(forged) == 2, forged  # the failed task's line and the warning, nothing more
    assert not [
        line for line in lines if line.startswith("2026-01-01") or " CRITICAL mcptasks: " in line[:40]
    ]
    assert all(LOG_LINE.match(line) for line in forged)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_log_formats_keep_tracebacks_and_forge_no_line(log_format: Any) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.getLogger("mcptasks").level)
    stream = io.StringIO()
    try:
        configure_logging("info", log_format, stream)
        logger = logging.getLogger("mcptasks.test_escapes")
        logger.warning("client said %s", f"hi{FORGED}\u202e\x9b")
        try:
            raise ValueError(f"body text{FORGED}")
        except ValueError:
            logger.exception("task tool %r raised", "tool")
    finally:
        root.handlers[:], level, own = saved
        root.setLevel(level)
        logging.getLogger("mcptasks").setLevel(own)
    text = stream.getvalue()
    assert_no_raw(text)
    lines = text.splitlines()
    if log_format == "json":
        records = [json.loads(line) for line in lines]
        assert records[0]["message"] == f"client said hi{FORGED}\u202e\x9b"
        assert f"ValueError: body text{FORGED}" in records[1]["exception"]
        return
    assert [line for line in lines if LOG_LINE.match(line)] == [lines[0], lines[1]]
    assert lines[0].endswith(
        "client said hi\\n2026-01-01 00:00:00,000 CRITICAL mcptasks: forged\\x1b[2J\\u202e\\x9b"
    )
    assert lines[2] == "Traceback (most recent call last):"  # the traceback keeps its lines
    assert lines[-1] == "ValueError: body text\\n2026-01-01 00:00:00,000 CRITICAL mcptasks: forged\\x1b[2J"


def test_every_cli_module_prints_through_the_output_module() -> None:
    """No `print(...)` and no `stream.write(...)` outside `mcptasks/cli/output.py`: a new print
    path gets the escaping because there is no other way to print."""
    import ast

    offenders = []
    for path in sorted((ROOT / "mcptasks" / "cli").glob("*.py")):
        if path.name == "output.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "print") or (
                isinstance(func, ast.Attribute) and func.attr == "write"
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders


def test_every_control_format_and_separator_character_is_escaped() -> None:
    """Against this Python's Unicode database: whatever the fast path skips holds nothing to escape,
    and letters, emoji and their joiners stay as they are."""
    import unicodedata

    from mcptasks._runtime.safe_text import escape_controls

    kept = {"\u200c", "\u200d"}
    missed = [
        hex(code)
        for code in range(0x110000)
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        and chr(code) not in kept
        and escape_controls(chr(code)) == chr(code)
    ]
    assert not missed, missed[:20]
    family = "ü 中文 👨\u200d👩\u200d👧 \U0001f3f3\ufe0f e\u0301"
    assert escape_controls(family) == family
