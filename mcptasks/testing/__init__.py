"""Test helpers for code built on mcptasks. Importing this package requires pytest (and anyio's
pytest plugin, which ships with anyio).

`StoreContract` is the suite every `TaskStore` backend must pass; subclass it in your tests.
`ExecutorContract` is the suite every `Executor` must pass (asyncio only).
`run_tool` runs a task tool's body without a server, for unit tests of the body alone.
"""

from __future__ import annotations

from mcptasks.testing.bodies import BodyRun, run_tool
from mcptasks.testing.executor_contract import ExecutorContract
from mcptasks.testing.store_contract import StoreContract

__all__ = ["BodyRun", "ExecutorContract", "StoreContract", "run_tool"]
