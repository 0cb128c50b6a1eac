"""What a type checker sees: mypy --strict on the README example and on typed bodies.

`TaskTool` keeps the decorated function's parameters, answers narrow with `match` / `isinstance`,
and mistakes (an unnarrowed `answer.data`, a wrong argument) are reported. Runs mypy in a
subprocess, so it fails when the typing of the public API breaks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TYPED = """
from typing import Any

from pydantic import BaseModel

from mcptasks import (
    Accepted, Answer, Delegate, Elicit, ListRoots, Result, Sample, TaskContext, Unsupported, Yields,
    task_tool,
)
from mcptasks.authoring import Roots, RootsAnswer, SampleAnswer, Sampled


class Publish(BaseModel):
    publish: bool


@task_tool(ttl=600, timeout=60)
async def release(version: str, dry_run: bool = False) -> Yields:
    yield f"releasing {version}"
    answer: Answer[Publish] = yield Elicit("Publish?", Publish)
    match answer:
        case Accepted(data=data):
            reveal_type(data)
            yield Result(data.publish and not dry_run)
        case Unsupported(capability=capability):
            yield Result(f"cannot ask: {capability}")
        case _:
            yield Result(False)


async def helper() -> Yields:
    sampled: SampleAnswer = yield Sample("hi")
    roots: RootsAnswer = yield ListRoots()
    if isinstance(sampled, Sampled) and isinstance(roots, Roots):
        yield Result(f"{sampled.text} {len(roots.roots)}")


@task_tool
async def count(n: int, ctx: TaskContext) -> int:
    answer = await ctx.elicit("More?", Publish)
    if isinstance(answer, Accepted) and answer.data.publish:
        return n + 1
    return n


async def uses() -> None:
    reveal_type(release)
    reveal_type(count)
    body = release("1.0", dry_run=True)
    reveal_type(body)
    total: int = await count.fn(2, ctx=None)  # type: ignore[arg-type]
    print(total, Delegate(helper()))
"""

MISTAKES = """
from mcptasks import Answer, Elicit, Result, Yields, task_tool


@task_tool
async def release(version: str) -> Yields:
    answer: Answer[dict[str, str]] = yield Elicit("Publish?")
    yield Result(answer.data)  # line 8: not narrowed


async def uses() -> None:
    release(3)  # line 12: wrong argument type
"""


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match is not None
    return match.group(1)


def _mypy(tmp_path: Path, files: dict[str, str]) -> dict[str, list[str]]:
    for name, source in files.items():
        (tmp_path / name).write_text(source)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            *files,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert not run.stderr.strip(), run.stderr
    lines: dict[str, list[str]] = {name: [] for name in files}
    for line in run.stdout.splitlines():
        lines[line.split(":", 1)[0]].append(line)
    return lines


def test_mypy_strict_sees_signatures_and_narrows_answers(tmp_path: Path) -> None:
    out = _mypy(tmp_path, {"readme.py": _readme_example(), "typed.py": TYPED, "mistakes.py": MISTAKES})
    assert out["readme.py"] == []
    notes = [line for line in out["typed.py"] if "note: Revealed type" in line]
    assert [line for line in out["typed.py"] if line not in notes] == []
    revealed = "\n".join(notes)
    assert '"typed.Publish"' in revealed
    assert "TaskTool[[version: str, dry_run: bool =], typing.AsyncGenerator[Any, Any]]" in revealed
    assert (
        "TaskTool[[n: int, ctx: mcptasks._authoring.context.TaskContext], typing.Coroutine[Any, Any, int]]"
        in (revealed)
    )
    assert 'typed.py:50: note: Revealed type is "typing.AsyncGenerator[Any, Any]"' in revealed
    errors = out["mistakes.py"]
    unnarrowed = [e for e in errors if e.startswith("mistakes.py:8:") and "union-attr" in e]
    assert {e.split('"')[1] for e in unnarrowed} == {"Declined", "Cancelled", "Unsupported"}, errors
    assert [e for e in errors if e not in unnarrowed] == [
        'mistakes.py:12: error: Argument 1 to "__call__" of "TaskTool" has incompatible type "int"; '
        'expected "str"  [arg-type]'
    ]
