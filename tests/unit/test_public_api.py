"""The public surface of `mcptasks`: one table of names, and one root for every exception."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import mcptasks
from mcptasks import MCPTasksError
from mcptasks._runtime.driver import Interrupt

INTERNAL_EXCEPTIONS = {
    "mcptasks.client.extension._TaskStarted",  # caught by start_tool_call around its own call
}


def test_the_type_checking_imports_match_the_table() -> None:
    tree = ast.parse(Path(mcptasks.__file__).read_text())
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    )
    imported = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    assert imported == mcptasks._PUBLIC


def test_every_public_name_loads_from_its_module() -> None:
    assert mcptasks.__all__ == [*mcptasks._PUBLIC, "__version__"]
    for name, module in mcptasks._PUBLIC.items():
        assert getattr(mcptasks, name) is getattr(importlib.import_module(module), name)
    assert set(mcptasks.__all__) <= set(dir(mcptasks))


def test_every_exception_mcptasks_defines_has_one_root() -> None:
    orphans = []
    for info in pkgutil.walk_packages(mcptasks.__path__, "mcptasks."):
        if info.name == "mcptasks.__main__":
            continue  # importing it runs the command line
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                qualified = f"{info.name}.{name}"
                if issubclass(value, Interrupt):
                    continue  # control flow (a BaseException) that never leaves the engine
                if not issubclass(value, MCPTasksError) and qualified not in INTERNAL_EXCEPTIONS:
                    orphans.append(qualified)
    assert orphans == []
