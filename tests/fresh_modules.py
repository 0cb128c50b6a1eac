"""Import a Python file as a fresh module each time (a fresh server, engine and store per test)."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

_counter = itertools.count()


def load_fresh(path: Path) -> ModuleType:
    """Import the Python file `path` under a new module name, registered in `sys.modules` while it
    lives (pydantic resolves the module's annotations through it)."""
    module_name = f"_fresh_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
