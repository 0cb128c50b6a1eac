"""`mcptasks call` / `mcptasks tasks` as a user runs them: real subprocesses, a real server.

The conformance example is served over HTTP by `mcptasks serve` in a subprocess (one per module);
the command under test runs as `python -c "...mcptasks.cli.main.main..."` (the `mcptasks` entry
point) or in this process, without a terminal (`subprocess.run`, stdin closed) or on a
pseudo-terminal (`pexpect`) for the live status line, the elicitation prompts and Ctrl-C.
Every wait is an `expect` on output or a bounded poll; nothing synchronises by sleeping.
"""

from __future__ import annotations

import io
import json
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from processes import clean_env, free_port, serving_http

from mcptasks.cli.arguments import parse_arguments
from mcptasks.cli.forms import FormField, form_fields, parse_answer
from mcptasks.cli.main import main
from mcptasks.cli.render import render_result

pexpect = pytest.importorskip("pexpect")

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "examples" / "conformance_server.py"
MAIN = "import sys; from mcptasks.cli.main import main; sys.exit(main(sys.argv[1:]))"
TIMEOUT = 60.0
"""Upper bound of every wait; never a synchronisation delay."""
TASK_ID = r"[A-Za-z0-9_-]{20,}"
STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] (working|input_required|completed|failed|cancelled)(: .*)?$")


@contextmanager
def serving(tmp_path: Path, port: int, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`mcptasks serve examples/conformance_server.py` over HTTP on 127.0.0.1:`port`, accepting."""
    log = tmp_path / f"server-{port}-{time.monotonic_ns()}.log"
    with serving_http(CONFORMANCE, port=port, log=log, extra=extra) as process:
        yield process


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The conformance example served over HTTP for the whole module."""
    port = free_port()
    with serving(tmp_path_factory.mktemp("server"), port):
        yield f"http://127.0.0.1:{port}/mcp"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command to completion without a terminal (stdin closed, output captured)."""
    return subprocess.run(
        [sys.executable, "-c", MAIN, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env if env is not None else clean_env(),
        cwd=ROOT,
        timeout=TIMEOUT,
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the command in this process (fast: no interpreter start); (status, stdout, stderr)."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def on_terminal(*args: str) -> Any:
    """Run the command on a pseudo-terminal (stdin, stdout and stderr are all the terminal)."""
    child = pexpect.spawn(
        sys.executable,
        ["-c", MAIN, *args],
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(24, 200),
        env=clean_env(TERM="xterm"),
        cwd=str(ROOT),
    )
    return child


def finish(child: Any) -> int:
    """Wait for the end of a terminal session; its exit status."""
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus is None, child.signalstatus
    return int(child.exitstatus)


class Follower:
    """`mcptasks call ...` without a terminal, its stderr read line by line with deadlines."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", MAIN, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
            cwd=ROOT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put("")

    def until_following(self) -> None:
        """Read stderr until the first timestamped status line: the task is being followed."""
        while not any(STAMPED.match(line.rstrip("\n")) for line in self.seen):
            line = self.lines.get(timeout=TIMEOUT)
            assert line, "".join(self.seen)
            self.seen.append(line)

    def finish(self) -> tuple[int, str]:
        """Wait for the exit; (status, all of stderr)."""
        status = self.process.wait(timeout=TIMEOUT)
        self.reader.join(timeout=TIMEOUT)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return status, "".join(self.seen)

    def stop(self) -> None:
        """Kill the process if it still runs (test cleanup)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def task_state(capsys: pytest.CaptureFixture[str], url: str, task_id: str) -> dict[str, Any]:
    """`tasks get` (in process)."""
    status, out, err = run(capsys, "tasks", "get", url, "--", task_id)
    assert status == 0, err
    state: dict[str, Any] = json.loads(out)
    return state


def one_error_line(stderr: str, *fragments: str) -> str:
    """Exactly one `mcptasks: error:` line, naming every fragment, and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("mcptasks: error: ")]
    assert len(lines) == 1, stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# -- pure helpers ----------------------------------------------------------------------------------


def test_key_value_arguments_parse_as_json_or_string() -> None:
    pairs = ["n=3", "x=1.5", "ok=true", "name=Ada", 'tags=["a","b"]', 'quoted="3"', "empty=", "eq=a=b"]
    assert parse_arguments(pairs, None) == {
        "n": 3,
        "x": 1.5,
        "ok": True,
        "name": "Ada",
        "tags": ["a", "b"],
        "quoted": "3",
        "empty": "",
        "eq": "a=b",
    }
    assert parse_arguments(["b=2"], '{"a": 1, "b": 1}') == {"a": 1, "b": 2}


def test_form_fields_from_a_requested_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "ratio": {"type": "number", "default": 0.5},
            "ok": {"type": "boolean", "description": "Go ahead?", "default": True},
            "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
            "size": {
                "type": "string",
                "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            },
            "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y", "z"]}, "maxItems": 2},
        },
        "required": ["name", "age"],
    }
    fields = {f.name: f for f in form_fields(schema)}
    assert [f.kind for f in fields.values()] == [
        "string",
        "integer",
        "number",
        "boolean",
        "enum",
        "enum",
        "multi",
    ]
    assert fields["name"].required and fields["name"].label == "Name" and not fields["ratio"].required
    assert fields["color"].options == [("r", "Red"), ("g", "Green")]
    assert fields["size"].options == [("s", "Small"), ("l", "Large")]
    assert parse_answer(fields["name"], "Ada") == "Ada"
    assert parse_answer(fields["age"], " 42 ") == 42
    assert parse_answer(fields["ratio"], "2") == 2 and parse_answer(fields["ratio"], "0.25") == 0.25
    assert parse_answer(fields["ok"], "Yes") is True and parse_answer(fields["ok"], "n") is False
    assert parse_answer(fields["color"], "2") == "g" and parse_answer(fields["color"], "red") == "r"
    assert parse_answer(fields["size"], "l") == "l"
    assert parse_answer(fields["tags"], "1, z") == ["x", "z"]
    for name, bad in [
        ("name", "A"),
        ("age", "x"),
        ("age", "200"),
        ("ok", "maybe"),
        ("color", "9"),
        ("tags", "x,y,z"),
    ]:
        with pytest.raises(ValueError):
            parse_answer(fields[name], bad)


def test_render_result_shows_text_or_structured_content() -> None:
    from mcp_types import CallToolResult

    text = CallToolResult.model_validate(
        {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"a": 1}}
    )
    assert render_result(text) == "hi"
    structured = CallToolResult.model_validate({"content": [], "structuredContent": {"a": 1}})
    assert json.loads(render_result(structured)) == {"a": 1}
    as_json = CallToolResult.model_validate({"content": [{"type": "text", "text": '{"a":[1,2]}'}]})
    assert render_result(as_json) == '{"a":[1,2]}'  # piped: as the tool sent it
    assert render_result(as_json, pretty=True) == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert render_result(structured) == '{"a": 1}'
    assert render_result(structured, pretty=True) == '{\n  "a": 1\n}'
    image = CallToolResult.model_validate(
        {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}
    )
    assert render_result(image) == "[image image/png, 3 bytes]"


def test_building_the_parser_does_not_import_the_sdk() -> None:
    # `mcptasks --help` / `--version` / `call` build the parser with every subcommand: keep it cheap.
    probe = "import sys, mcptasks.cli.main as c; c.build_parser(); print(sorted(m for m in ('mcp', 'mcp_types', 'mcptasks.client') if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT, check=True
    )
    assert done.stdout.strip() == "[]"


def test_form_field_defaults() -> None:
    field = FormField(name="n", kind="string", label="n")
    assert parse_answer(field, "free text") == "free text"


# -- without a terminal ----------------------------------------------------------------------------


def test_plain_timestamped_lines_and_the_result_on_stdout(url: str) -> None:
    done = cli("call", url, "slow_compute", "seconds=0.6", "label=plain")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "plain: finished after 0.6 s\n"
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    lines = done.stderr.splitlines()
    assert re.fullmatch(rf"mcptasks: task {TASK_ID} started \(Ctrl-C to cancel or detach\)", lines[0]), lines
    assert all(STAMPED.match(line) for line in lines[1:]), lines
    assert lines[-1].split("] ", 1)[1] == "completed"  # not the last working message
    assert any("] working: plain: " in line for line in lines)  # the statusMessage is shown


def test_json_output(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(
        capsys, "call", url, "slow_compute", "--json", '{"seconds": 0, "label": "j"}', "--json-output"
    )
    assert status == 0, err
    result = json.loads(out)
    assert result["content"] == [{"type": "text", "text": "j: finished after 0 s"}]
    assert result["isError"] is False


def test_an_ordinary_tool_answers_at_once(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "call", url, "greet", "name=Bob") == (0, "Hello, Bob!\n", "")
    status, out, _ = run(capsys, "call", url, "greet", "name=Bob", "--json-output")
    assert status == 0
    assert json.loads(out)["structuredContent"] == {"result": "Hello, Bob!"}


def test_options_may_sit_anywhere(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(
        capsys, "call", "--json-output", url, "-H", "X-Trace: t-1", "greet", "--ledger", "", "name=Bo"
    )
    assert status == 0, err
    assert json.loads(out)["structuredContent"] == {"result": "Hello, Bo!"}
    status, out, err = run(capsys, "call", url, "greet", "--", "name=-Bo")
    assert (status, out) == (0, "Hello, -Bo!\n"), err


def test_a_tool_error_exits_1(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "call", url, "failing_job")
    assert (status, out) == (1, "")
    assert "the tool reported an error:\nthe job failed: disk quota exceeded" in err


def test_a_failed_task_exits_3(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "call", url, "protocol_error_job")
    assert (status, out) == (3, "")
    one_error_line(err, "failed: backend unavailable (code -32603)", '"retryable": true')
    status, out, err = run(capsys, "call", url, "protocol_error_job", "--json-output")
    assert status == 3
    task = json.loads(out)
    assert task["status"] == "failed"
    assert task["error"] == {"code": -32603, "message": "backend unavailable", "data": {"retryable": True}}


def hinted_answer(stderr: str, url: str) -> list[str]:
    """The `mcptasks tasks answer` command printed for an unanswered question, as words."""
    match = re.search(rf"\n  (mcptasks tasks answer {re.escape(url)} .* -- {TASK_ID})\n", stderr)
    assert match, stderr
    return shlex.split(match.group(1))


def hinted_task_id(stderr: str, url: str) -> str:
    """The task id of the `mcptasks tasks answer` hint printed for an unanswered question."""
    return hinted_answer(stderr, url)[-1]


def test_without_a_terminal_an_unanswered_question_exits_2_and_leaves_the_task_waiting(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "call", url, "confirm_delete", "filename=x.txt")
    assert (status, out) == (2, "")
    one_error_line(err, "question input-1 ('Delete x.txt?') has no answer", "confirm (boolean, required)")
    task_id = hinted_task_id(err, url)
    assert f"mcptasks call {url} confirm_delete --resume={task_id}" in err
    state = task_state(capsys, url, task_id)
    assert state["status"] == "input_required" and list(state["inputRequests"]) == ["input-1"]

    status, out, err = run(capsys, "tasks", "answer", url, "--answer", "confirm=true", "--", task_id)
    assert status == 0, err
    assert out.startswith(f"answered input-1; task {task_id} is ")
    status, out, err = run(capsys, "call", url, "confirm_delete", f"--resume={task_id}")
    assert (status, out) == (0, "deleted x.txt\n"), err


def test_the_answer_hint_names_the_real_key_and_fields_and_runs_as_copied(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "call", url, "multi_input")
    assert (status, out) == (2, ""), err
    assert "answer with (your values in place of the examples):" in err
    words = hinted_answer(err, url)
    task_id = words[-1]
    assert words == ["mcptasks", "tasks", "answer", url, "--answer", 'input-1={"name": "..."}', "--", task_id]
    status, out, err = run(capsys, *words[1:])
    assert (status, out) == (0, f"answered input-1; task {task_id} is input_required\n"), err
    # the next question of the same task, asked on resume: its own key and field
    status, out, err = run(capsys, "call", url, "multi_input", f"--resume={task_id}")
    assert (status, out) == (2, ""), err
    words = hinted_answer(err, url)
    assert words[4:] == ["--answer", 'input-2={"confirm": true}', "--", task_id]
    status, out, err = run(capsys, *words[1:])
    assert status == 0, err
    status, out, err = run(capsys, "call", url, "multi_input", f"--resume={task_id}")
    assert (status, out) == (0, "... says go\n"), err


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (["--answer", "input-1=true"], "deleted"),  # the inputRequests key, a bare value
        (["--answer", 'input-1={"confirm": false}'], "kept"),  # the key, the whole form
        (["--answer", "confirm=true"], "deleted"),  # the field name
        (["--answer", "true"], "deleted"),  # no key: the first question
        (["--decline"], "kept"),
        (["--cancel"], "kept"),
    ],
)
def test_answers_on_the_command_line(
    url: str, answers: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "call", url, "confirm_delete", "filename=a.txt", *answers)
    assert (status, out) == (0, f"{expected} a.txt\n"), err
    action = {"--decline": "decline", "--cancel": "cancel"}.get(answers[0], "accept")
    assert f"mcptasks: answered 'Delete a.txt?': {action}" in err


def test_an_answers_file_and_field_answers_fill_several_questions(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"name": "Ada", "input-2": {"confirm": True}}))
    status, out, err = run(capsys, "call", url, "multi_input", "--answers", str(answers))
    assert (status, out) == (0, "Ada says go\n"), err
    # `name=5` fits the string field only as text; the answer before the task exists by its key
    status, out, err = run(
        capsys, "call", url, "multi_input", "--answer", "name=5", "--answer", "confirm=false"
    )
    assert (status, out) == (0, "5 says stop\n"), err
    status, out, err = run(capsys, "call", url, "test_tool_with_task", "--answer", "user_name=Bo")
    assert (status, out) == (0, "Hello, Bo!\n"), err


def test_an_answer_that_does_not_fit_is_refused_before_it_is_sent(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(
        capsys, "call", url, "confirm_delete", "filename=b.txt", "--answer", 'confirm="yes"'
    )
    assert (status, out) == (2, "")
    one_error_line(
        err, "question input-1 ('Delete b.txt?') does not fit its schema", "'yes' is not of type 'boolean'"
    )
    task_id = hinted_task_id(err, url)
    assert task_state(capsys, url, task_id)["status"] == "input_required"  # nothing was sent

    status, out, err = run(capsys, "tasks", "answer", url, "--answer", "confirm=maybe", "--", task_id)
    assert (status, out) == (2, "")
    one_error_line(err, "does not fit its schema", "confirm (boolean, required)")
    status, out, err = run(capsys, "tasks", "answer", url, "--answer", "confrm=true", "--", task_id)
    assert (status, out) == (2, "")
    one_error_line(err, "takes confrm (did you mean confirm?)", "input-1 ('Delete b.txt?')")
    assert task_state(capsys, url, task_id)["status"] == "input_required"
    status, out, err = run(capsys, "tasks", "answer", url, "--decline", "--", task_id)
    assert status == 0, err
    status, out, err = run(capsys, "call", url, "confirm_delete", f"--resume={task_id}")
    assert (status, out) == (0, "kept b.txt\n"), err


def test_tasks_answer_waits_for_the_questions_and_refuses_ambiguity(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "call", url, "multi_input", "--detach")
    assert status == 0, err
    task_id = out.strip()
    status, out, err = run(capsys, "tasks", "answer", url, "--answer", '"Ada"', "--", task_id)
    assert (status, out) == (2, "")
    one_error_line(err, "asks 2 questions", "input-1 ('Your name?')", "input-2 ('Go ahead?')")
    status, out, err = run(capsys, "tasks", "answer", url, "--answer", "name=Ada", "--", task_id)
    assert (status, out) == (0, f"answered input-1; task {task_id} is input_required\n"), err
    assert "still unanswered: input-2" in err
    status, out, err = run(capsys, "tasks", "answer", url, "--answer", "input-2=true", "--", task_id)
    assert status == 0, err
    status, out, err = run(capsys, "call", url, "multi_input", f"--resume={task_id}")
    assert (status, out) == (0, "Ada says go\n"), err
    status, out, err = run(capsys, "tasks", "answer", url, "--answer", "true", "--", task_id)
    assert (status, out) == (2, "")
    one_error_line(err, f"task {task_id} is completed: it has no question to answer")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ["greet", "nm=Ada"],
            ["greet has no parameter 'nm' (did you mean name?); greet takes name (string)"],
        ),
        (["confirm_delete"], ["confirm_delete needs filename=...", "filename (string, required)"]),
        (["slow_compute", "seconds=soon"], ["seconds: 'soon' is not of type 'number'", "label (string)"]),
        (["multi_input", "x=1"], ["multi_input has no parameter 'x'", "multi_input takes no arguments"]),
        (["gret"], ["the server has no tool 'gret' (did you mean greet?)", "greet, multi_input"]),
    ],
)
def test_arguments_are_checked_against_the_input_schema(
    url: str, args: list[str], fragments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "call", url, *args)
    assert (status, out) == (2, "")
    one_error_line(err, *fragments)
    assert "started" not in err  # nothing was called


def test_a_json_looking_value_for_a_string_parameter_stays_text(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "call", url, "greet", "name=123")[:2] == (0, "Hello, 123!\n")


def test_the_scripted_answers_example_runs_as_shown(url: str) -> None:
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    script = page.split("<!-- scripted-answers -->\n```bash\n", 1)[1].split("```", 1)[0]
    shown = page.split("<!-- scripted-answers -->", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    script = script.replace("http://127.0.0.1:8000/mcp", url)
    bin_dir = str(Path(sys.executable).parent)
    env = clean_env(PATH=f"{bin_dir}:{clean_env().get('PATH', '')}")
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    expected = shown.splitlines()
    assert len(lines) == len(expected), done.stdout
    match = re.fullmatch(rf"answered input-1; task ({TASK_ID}) is \w+", lines[1])
    assert match, lines
    task_id = match.group(1)
    for line, documented in zip(lines, expected, strict=True):
        pattern = re.escape(documented).replace(re.escape("MxN...Q3w"), re.escape(task_id))
        pattern = pattern.replace("working", "(working|completed)")
        assert re.fullmatch(pattern, line), (line, documented)


def test_detach_then_get_cancel_and_resume(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "call", url, "slow_compute", "seconds=120", "--detach")
    assert status == 0, err
    task_id = out.strip()
    assert re.fullmatch(TASK_ID, task_id)
    assert f"mcptasks call {url} slow_compute --resume={task_id}" in err

    state = task_state(capsys, url, task_id)
    assert state["taskId"] == task_id
    assert state["status"] == "working"
    assert "resultType" not in state  # the task, not the tasks/get response around it

    status, out, err = run(capsys, "tasks", "cancel", url, "--", task_id)
    assert (status, out) == (0, f"cancellation requested; task {task_id} is cancelled\n"), err
    assert task_state(capsys, url, task_id)["status"] == "cancelled"

    status, out, err = run(capsys, "call", url, "slow_compute", f"--resume={task_id}")
    assert status == 4, err
    assert f"task {task_id} was cancelled" in err


def test_detach_json_output(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "call", url, "slow_compute", "seconds=120", "--detach", "--json-output")
    assert status == 0, err
    created = json.loads(out)
    assert created["status"] == "working" and re.fullmatch(TASK_ID, created["taskId"])
    assert run(capsys, "tasks", "cancel", url, "--", created["taskId"])[0] == 0


def test_the_ledger_lists_pending_tasks_until_resumed(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = str(tmp_path / "ledger.db")
    status, out, err = run(
        capsys, "call", url, "slow_compute", "seconds=0.5", "label=led", "--detach", "--ledger", ledger
    )
    assert status == 0, err
    task_id = out.strip()

    monkeypatch.setenv("MCPTASKS_LEDGER", ledger)
    status, out, err = run(capsys, "tasks", "pending")
    assert status == 0, err
    assert task_id in out
    assert f"mcptasks call {url} slow_compute --resume={task_id}" in out
    monkeypatch.delenv("MCPTASKS_LEDGER")
    rows = json.loads(run(capsys, "tasks", "pending", "--ledger", ledger, "--json-output")[1])
    assert [(row["taskId"], row["tool"], row["server"]) for row in rows] == [(task_id, "slow_compute", url)]

    status, out, err = run(capsys, "call", url, "slow_compute", f"--resume={task_id}", "--ledger", ledger)
    assert (status, out) == (0, "led: finished after 0.5 s\n"), err
    assert json.loads(run(capsys, "tasks", "pending", "--ledger", ledger, "--json-output")[1]) == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "missing the server"),
        (["{url}"], "missing the TOOL"),
        (["localhost:8000", "greet"], "expected the server's URL"),
        (["{url}", "greet", "=x"], "expected key=value"),
        (["{url}", "greet", "noequals"], "expected key=value"),
        (["{url}", "greet", "--json", "[1]"], "--json must be a JSON object"),
        (["{url}", "greet", "--json", "{"], "--json is not valid JSON"),
        (["{url}", "greet", "a=1", "--resume", "abc"], "--resume follows an existing task"),
        (["{url}", "greet", "--stuck-after", "0"], "--stuck-after must be a positive number"),
        (["--stdio", "", "greet"], "--stdio needs a command"),
        (["--stdio", "python 'x.py", "greet"], "--stdio: No closing quotation"),
        (["--stdio", "python x.py", "-H", "A: b", "greet"], "--header applies to HTTP servers only"),
        (["{url}", "greet", "-H", "nocolon"], "--header must look like"),
        (["{url}", "greet", "--answer", "yes"], "--answer expects KEY=JSON or one JSON value"),
        (["{url}", "greet", "--answer", "1", "--answer", "2"], "more than one --answer without a KEY"),
        (["{url}", "greet", "--decline", "--cancel"], "--decline and --cancel exclude each other"),
        (["{url}", "greet", "--answers", "/no/such/answers.json"], "--answers: cannot read"),
    ],
)
def test_usage_errors_exit_2(args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "call", *(arg.replace("{url}", "http://127.0.0.1:1/mcp") for arg in args))
    assert (status, out) == (2, "")
    one_error_line(err, fragment)


def test_argparse_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for args in (
        ["call", "--no-such-option"],
        ["call", "http://127.0.0.1:1/mcp", "greet", "--detatch"],
        ["tasks"],
        ["tasks", "frobnicate"],
        ["tasks", "get", "http://127.0.0.1:1/mcp", "-abc"],  # an id starting with "-" needs `--`
    ):
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert exited.value.code == 2
        assert "usage:" in capsys.readouterr().err
    monkeypatch.delenv("MCPTASKS_LEDGER", raising=False)
    status, _, err = run(capsys, "tasks", "pending")
    assert status == 2
    one_error_line(err, "no ledger")
    status, _, err = run(capsys, "tasks", "get", "http://127.0.0.1:1/mcp")
    assert status == 2
    one_error_line(err, "exactly one TASK_ID")


def test_tasks_get_of_an_unknown_task_exits_3(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "tasks", "get", url, "no-such-task")
    assert (status, out) == (3, "")
    one_error_line(err, "Unknown task", "-32602")
    # Task ids may start with "-": `--` (positional) and `--resume=ID` keep argparse out of the way.
    status, out, err = run(capsys, "tasks", "get", url, "--", "-no-such-task")
    assert (status, out) == (3, "")
    one_error_line(err, "Unknown task")
    status, out, err = run(capsys, "call", url, "slow_compute", "--resume=-no-such-task")
    assert (status, out) == (3, "")
    one_error_line(err, "Unknown task")


def test_an_unreachable_server_exits_3_naming_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    down = f"http://127.0.0.1:{free_port()}/mcp"
    for args in (("call", down, "greet"), ("tasks", "get", down, "some-task")):
        status, _, err = run(capsys, *args)
        assert status == 3
        one_error_line(err, f"cannot connect to {down} (connection refused): is the server running there?")


@pytest.mark.parametrize("path", ["/", "/sse", "/mcp/tools"])
def test_a_wrong_path_names_the_likely_url(url: str, path: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = url.removesuffix("/mcp")
    status, _, err = run(capsys, "call", base + path, "greet")
    assert status == 3
    one_error_line(err, f"no MCP endpoint at {base + path} (HTTP 404 Not Found)", f"try {url}")


def test_a_request_without_the_protocol_header_is_told_the_header(url: str) -> None:
    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    response = httpx2.post(url, json=body, headers=headers, timeout=TIMEOUT)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith("Bad Request: Missing session ID"), message
    assert "send the header 'MCP-Protocol-Version: 2026-07-28'" in message
    assert int(response.headers["content-length"]) == len(response.content)


def test_over_stdio() -> None:
    command = f"{sys.executable} -m mcptasks serve {CONFORMANCE}"
    done = cli("call", "--stdio", command, "slow_compute", "seconds=0.2", "label=stdio")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stdio: finished after 0.2 s\n"


def test_sigint_without_a_terminal_detaches(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    follower = Follower("call", url, "slow_compute", "seconds=120")
    try:
        follower.until_following()
        follower.process.send_signal(signal.SIGINT)
        status, output = follower.finish()
    finally:
        follower.stop()
    assert status == 130, output
    match = re.search(rf"mcptasks call {re.escape(url)} slow_compute --resume=({TASK_ID})", output)
    assert match, output
    task_id = match.group(1)
    assert task_state(capsys, url, task_id)["status"] == "working"  # detached, not cancelled
    assert run(capsys, "tasks", "cancel", url, "--", task_id)[0] == 0


def test_a_server_crash_prints_the_resume_command_and_resume_finds_the_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    store = ("--store", f"sqlite:///{tmp_path / 'tasks.db'}")
    with serving(tmp_path, port, *store) as server:
        follower = Follower("call", url, "slow_compute", "seconds=120")
        try:
            follower.until_following()
            server.kill()  # the server dies while the task runs
            server.wait(timeout=TIMEOUT)
            status, err = follower.finish()
        finally:
            follower.stop()
    assert status == 3, err
    hint = rf"may still be running; resume with:\n  mcptasks call {re.escape(url)} slow_compute --resume=({TASK_ID})"
    match = re.search(hint, err)
    assert match, err
    task_id = match.group(1)
    # A new server on the same durable store: the task's runner is gone, and the task says so.
    with serving(tmp_path, port, *store):
        status, out, err = run(capsys, "call", url, "slow_compute", f"--resume={task_id}")
    assert (status, out) == (3, ""), err
    one_error_line(err, f"task {task_id} failed", '"reason": "worker_lost"')


# -- on a terminal ---------------------------------------------------------------------------------


YES_NO = "Delete the file? [y/n] (or d: decline, s: skip): "


def test_a_single_boolean_is_one_prompt(url: str) -> None:
    child = on_terminal("call", url, "confirm_delete", "filename=notes.txt")
    child.expect_exact("? Delete notes.txt?")
    child.expect_exact(YES_NO)
    child.sendline("maybe")
    child.expect_exact("answer y or n (or d to decline, s to skip)")
    child.expect_exact(YES_NO)
    child.sendline("y")
    child.expect_exact("deleted notes.txt")
    assert finish(child) == 0


@pytest.mark.parametrize("answer", ["n", "d", "decline", "s", "skip"])
def test_a_single_boolean_answered_no_declined_or_skipped(url: str, answer: str) -> None:
    child = on_terminal("call", url, "confirm_delete", "filename=keep.txt")
    child.expect_exact(YES_NO)
    child.sendline(answer)
    child.expect_exact("kept keep.txt")
    assert finish(child) == 0


def test_terminal_prompts_for_two_inputs_one_at_a_time(url: str) -> None:
    child = on_terminal("call", url, "multi_input")
    answered: set[str] = set()
    while len(answered) < 2:
        which = child.expect_exact(["? Your name?", "? Go ahead?"])
        if which == 0:
            child.expect_exact("[a]ccept, [d]ecline or [s]kip? [a] ")
            child.sendline("")  # the default: accept
            child.expect_exact("Name: ")
            child.sendline("Ada")
            answered.add("name")
        else:
            child.expect_exact("[y/n] (or d: decline, s: skip): ")
            child.sendline("yes")
            answered.add("go")
    child.expect_exact("Ada says go")
    assert finish(child) == 0


def test_on_a_terminal_answers_are_used_and_other_questions_asked(url: str) -> None:
    child = on_terminal("call", url, "confirm_delete", "filename=t.txt", "--answer", "confirm=true")
    child.expect_exact("answered 'Delete t.txt?': accept")
    child.expect_exact("deleted t.txt")
    assert "? Delete t.txt?" not in (child.before or "")
    assert finish(child) == 0

    child = on_terminal("call", url, "multi_input", "--answer", "name=Ada")
    child.expect_exact("? Go ahead?")
    child.expect_exact("[y/n] (or d: decline, s: skip): ")
    child.sendline("y")
    child.expect_exact("Ada says go")
    assert "? Your name?" not in (child.before or "")
    assert finish(child) == 0


def test_live_status_line(url: str) -> None:
    child = on_terminal("call", url, "slow_compute", "seconds=1", "label=live")
    child.expect(rf"task ({TASK_ID}) started")
    child.expect_exact("\r\x1b[K")
    child.expect(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] \d\d:\d\d working · live: ")
    child.expect_exact("live: finished after 1 s")
    assert finish(child) == 0


def started(child: Any) -> str:
    """Wait until the live line shows the task's progress; the task id."""
    child.expect(rf"task ({TASK_ID}) started")
    task_id = str(child.match.group(1))
    child.expect_exact(" working · compute: ")  # any progress (a slow poll may skip "started")
    return task_id


def test_ctrl_c_then_detach_prints_the_resume_command(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    child = on_terminal("call", url, "slow_compute", "seconds=120")
    task_id = started(child)
    child.sendintr()
    child.expect_exact(f"Task {task_id} is still running.")
    child.expect_exact("[c]ancel the task, [l]eave it running (detach), or [w]ait? [w] ")
    child.sendline("x")
    child.expect_exact("answer c (cancel the task), l (leave it running) or w (wait)")
    child.expect_exact("[w] ")
    child.sendline("l")
    child.expect_exact(f"mcptasks call {url} slow_compute --resume={task_id}")
    assert finish(child) == 130
    assert task_state(capsys, url, task_id)["status"] == "working"
    assert run(capsys, "tasks", "cancel", url, "--", task_id)[0] == 0


def test_ctrl_c_then_cancel_exits_4(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    child = on_terminal("call", url, "slow_compute", "seconds=120")
    task_id = started(child)
    child.sendintr()
    child.expect_exact("[w] ")
    child.sendline("c")
    child.expect_exact(f"task {task_id} was cancelled")
    assert finish(child) == 4
    assert task_state(capsys, url, task_id)["status"] == "cancelled"


def test_ctrl_c_then_wait_keeps_following(url: str) -> None:
    child = on_terminal("call", url, "slow_compute", "seconds=2")
    started(child)
    child.sendintr()
    child.expect_exact("[w] ")
    child.sendline("w")
    child.expect_exact("compute: finished after 2 s")
    assert finish(child) == 0


def test_ctrl_c_during_a_question_keeps_it_and_waiting_asks_again(url: str) -> None:
    child = on_terminal("call", url, "confirm_delete", "filename=q.txt")
    child.logfile_read = transcript = io.StringIO()
    child.expect(rf"task ({TASK_ID}) started")
    task_id = str(child.match.group(1))
    child.expect_exact(YES_NO)
    child.sendintr()
    child.expect_exact(f"Task {task_id} is waiting for your answer to: Delete q.txt?")
    child.expect_exact("or [w]ait and answer? [w] ")
    after_prompt = transcript.getvalue().rsplit(YES_NO, 1)[1]
    # The prompt line is ended, not erased: a line break comes before any erase-line sequence.
    assert after_prompt.index("\n") < after_prompt.find("\x1b[K") % len(after_prompt), repr(after_prompt)
    child.sendline("")
    child.expect_exact("? Delete q.txt?")
    child.expect_exact(YES_NO)
    child.sendline("y")
    child.expect_exact("deleted q.txt")
    assert finish(child) == 0


def test_ctrl_c_twice_detaches(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    child = on_terminal("call", url, "slow_compute", "seconds=120")
    task_id = started(child)
    child.sendintr()
    child.expect_exact("[w] ")
    child.sendintr()
    child.expect_exact(f"--resume={task_id}")
    assert finish(child) == 130
    assert run(capsys, "tasks", "cancel", url, "--", task_id)[0] == 0


# -- structured results ----------------------------------------------------------------------------


def test_structured_results_are_indented_on_a_terminal_and_one_line_when_piped(tmp_path: Path) -> None:
    steps = json.dumps([[sys.executable, "-c", "print('step ok')"]])
    env = clean_env(JOB_RUNNER_STEPS_TEST=steps)
    port = free_port()
    with serving_http(
        ROOT / "examples" / "job_runner.py", port=port, log=tmp_path / "job-runner.log", env=env
    ):
        url = f"http://127.0.0.1:{port}/mcp"
        child = on_terminal("call", url, "run_pipeline", "kind=test")
        child.expect_exact("Publish the artifacts of this run? [y/n] (or d: decline, s: skip): ")
        child.sendline("n")
        child.expect_exact('{\r\n  "kind": "test",\r\n  "exit_code": 0,')
        assert finish(child) == 0
        piped = cli("call", url, "run_pipeline", "kind=test", "--answer", "publish=false")
    assert piped.returncode == 0, piped.stderr
    (line,) = piped.stdout.splitlines()
    report = json.loads(line)
    assert (report["kind"], report["exit_code"], report["published"]) == ("test", 0, False)
