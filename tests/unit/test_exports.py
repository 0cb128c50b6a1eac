"""The public surface, pinned: the names `mcptasks` offers, its lower faces, the names it offered
before 0.4.0 (deprecated), and the exception tree drawn in `mcptasks.errors`."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import mcptasks
import mcptasks.errors

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "reference" / "api.md").read_text()
CLIENT = (ROOT / "docs" / "reference" / "client.md").read_text()
TESTING = (ROOT / "docs" / "reference" / "testing.md").read_text()

TOP_LEVEL = [
    "task_tool",
    "TaskContext",
    "Yields",
    "Result",
    "Elicit",
    "Sample",
    "ListRoots",
    "Inputs",
    "Delegate",
    "Step",
    "Answer",
    "Accepted",
    "Declined",
    "Cancelled",
    "Unsupported",
    "TaskServer",
    "TasksExtension",
    "EngineConfig",
    "Limits",
    "store_from_url",
    "MemoryTaskStore",
    "SqliteTaskStore",
    "RedisTaskStore",
    "PostgresTaskStore",
    "TasksClient",
    "start_tool_call",
    "TaskHandle",
    "MCPTasksError",
    "ToolError",
    "ProtocolError",
    "StepFailed",
    "TaskNotFound",
    "TaskFailed",
    "TaskCancelled",
    "__version__",
]

FACES = [
    "mcptasks.authoring",
    "mcptasks.errors",
    "mcptasks.stores",
    "mcptasks.executors",
    "mcptasks.client",
    "mcptasks.lowlevel",
    "mcptasks.testing",
]


def test_the_top_level_is_exactly_the_promised_names() -> None:
    assert mcptasks.__all__ == TOP_LEVEL
    assert len(mcptasks.__all__) <= 35


def test_dir_offers_the_top_level_and_not_the_moved_names() -> None:
    listed = dir(mcptasks)
    assert set(mcptasks.__all__) <= set(listed)
    assert not set(mcptasks._MOVED) & set(listed)


@pytest.mark.parametrize("face", FACES)
def test_each_face_resolves_its_names_and_says_who_it_is_for(face: str) -> None:
    module = importlib.import_module(face)
    assert module.__doc__ and len(module.__doc__.split()) > 10
    assert module.__all__, face
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{face}.{name}"
    assert set(module.__all__) <= set(dir(module))


def _documented(face: str, name: str) -> bool:
    """Whether a reference page shows `face.name` under some public path to the same object (the
    client's names are on the client page, an exception a face re-exports at its home)."""
    value = getattr(importlib.import_module(face), name)
    homes = ["mcptasks", *FACES, getattr(value, "__module__", face)]
    return any(
        f"::: {home}.{name}\n" in page
        for home in homes
        if (home != "mcptasks" or name in mcptasks.__all__)  # a moved name would warn
        and getattr(importlib.import_module(home), name, None) is value
        for page in (API, CLIENT, TESTING)
    )


def test_every_public_name_is_documented() -> None:
    missing = [
        f"mcptasks.{n}" for n in mcptasks.__all__ if n != "__version__" and not _documented("mcptasks", n)
    ]
    for face in FACES:
        module = importlib.import_module(face)
        missing += [f"{face}.{n}" for n in module.__all__ if n != "EXTENSION_ID" and not _documented(face, n)]
    assert missing == []


def test_every_exception_in_errors_is_documented() -> None:
    missing = [
        name
        for name, value in vars(mcptasks.errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == "mcptasks.errors"
        and not _documented("mcptasks.errors", name)
    ]
    assert missing == []


@pytest.mark.parametrize("name", sorted(mcptasks._MOVED))
def test_each_moved_name_warns_and_returns_the_same_object(name: str) -> None:
    face = mcptasks._MOVED[name]
    expected = getattr(importlib.import_module(face), name)
    module = importlib.import_module(face)
    assert name in getattr(module, "__all__", vars(module)), face  # mcptasks.wire has no __all__
    message = f"mcptasks.{name} moved to {face}.{name}; the old name goes in 0.5"
    with pytest.warns(DeprecationWarning, match=re.escape(message)):
        assert getattr(mcptasks, name) is expected
    with pytest.warns(DeprecationWarning, match=re.escape(message)):
        exec(f"from mcptasks import {name} as imported", namespace := {})
    assert namespace["imported"] is expected


def test_the_moved_names_are_no_longer_offered() -> None:
    assert not set(mcptasks._MOVED) & set(mcptasks.__all__)
    assert not set(mcptasks._MOVED) & set(mcptasks._PUBLIC)


def test_the_moved_names_stay_visible_to_type_checkers() -> None:
    tree = ast.parse(Path(mcptasks.__file__).read_text())
    blocks = [
        node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    ]
    imported = {
        alias.name: node.module
        for block in blocks[1:]
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    assert imported == mcptasks._MOVED


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
            mcptasks.NoSuchName  # noqa: B018


def test_the_faces_load_no_sdk_and_no_optional_driver() -> None:
    code = (
        "import sys, mcptasks, mcptasks.authoring, mcptasks.errors, mcptasks.stores, "
        "mcptasks.executors, mcptasks.lowlevel\n"
        "heavy = {'mcp', 'mcp_types', 'temporalio', 'dbos', 'redis', 'asyncpg'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


def test_the_version_lives_in_its_own_module() -> None:
    from mcptasks._version import __version__

    assert mcptasks.__version__ == __version__


# -- the exception tree ---------------------------------------------------------------------------

_TREE_LINE = re.compile(r"^(?P<indent>(?:│   |    )*)(?:├── |└── )?(?P<name>[A-Z]\w+)(?P<rest>.*)$")


def _drawn_tree() -> list[tuple[int, str, str]]:
    """(depth, name, the rest of the line) of each line of the tree in the errors docstring."""
    assert mcptasks.errors.__doc__ is not None
    block = mcptasks.errors.__doc__.split("\n\n")[1]
    lines = []
    for raw in block.splitlines():
        line = raw[4:]
        match = _TREE_LINE.match(line)
        assert match, raw
        depth = (
            0 if line == match.group("name") + match.group("rest") else len(match.group("indent")) // 4 + 1
        )
        lines.append((depth, match.group("name"), match.group("rest")))
    return lines


def _drawn_class(name: str, rest: str) -> type[BaseException]:
    if "(mcptasks.client)" in rest:
        return getattr(importlib.import_module("mcptasks.client"), name)  # type: ignore[no-any-return]
    return getattr(mcptasks.errors, name)  # type: ignore[no-any-return]


def test_the_drawn_tree_is_the_real_tree() -> None:
    parents: list[type[BaseException]] = []
    for depth, name, rest in _drawn_tree():
        cls = _drawn_class(name, rest)
        del parents[depth:]
        if parents:
            assert issubclass(cls, parents[-1]), f"{name} is drawn under {parents[-1].__name__}"
            assert parents[-1] in cls.__mro__[1:]
        else:
            assert cls is mcptasks.errors.MCPTasksError
        parents.append(cls)


def test_every_exception_in_errors_is_in_the_drawn_tree() -> None:
    drawn = {name for _, name, _ in _drawn_tree()}
    defined = {
        name
        for name, value in vars(mcptasks.errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and not name.startswith("_")
    }
    assert defined - drawn == set()
    client = importlib.import_module("mcptasks.client.errors")
    client_errors = {
        name
        for name, value in vars(client).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == client.__name__
        and not name.startswith("_")
    }
    assert client_errors - drawn == set()


def test_the_errors_page_draws_the_same_tree() -> None:
    page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    assert mcptasks.errors.__doc__ is not None
    block = "\n".join(line[4:] for line in mcptasks.errors.__doc__.split("\n\n")[1].splitlines())
    assert f"```\n{block}\n```" in page


# -- the project itself uses the new homes ---------------------------------------------------------


def _python_sources() -> list[tuple[str, str]]:
    sources = []
    for folder in ("tests", "examples", "benchmarks", "docs/snippets"):
        sources += [(str(path), path.read_text()) for path in (ROOT / folder).rglob("*.py")]
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        if page.name != "changelog.md":
            blocks = re.findall(r"^```python\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL)
            sources += [(f"{page}#{i}", block) for i, block in enumerate(blocks)]
    return sources


def test_the_project_uses_no_moved_name() -> None:
    used = []
    for where, source in _python_sources():
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue  # a page's partial block
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "mcptasks":
                used += [f"{where}: {a.name}" for a in node.names if a.name in mcptasks._MOVED]
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "mcptasks"
                and node.attr in mcptasks._MOVED
            ):
                used.append(f"{where}: mcptasks.{node.attr}")
    assert used == []
