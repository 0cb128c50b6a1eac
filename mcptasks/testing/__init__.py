"""Test helpers for code built on mcptasks. Importing this package requires pytest (and anyio's
pytest plugin, which ships with anyio).

`StoreContract` is the suite every `TaskStore` backend must pass; subclass it in your tests.
`run_tool` runs a task tool's body without a server, for unit tests of the body alone.
"""

from __future__ import annotations

from mcptasks.testing.bodies import BodyRun, run_tool
from mcptasks.testing.store_contract import StoreContract

__all__ = ["BodyRun", "StoreContract", "run_tool"]
