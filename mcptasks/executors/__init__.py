"""Where task bodies run when not in the serving process, for people who configure or write an
executor.

`Executor` is the seam (`EngineConfig.executor`, `--executor`), `ExecutorHost` what an executor's
workers call on the engine, and `HeldElsewhere` / `HandedOver` what `ExecutorHost.run_task` raises
when the task must be tried again later, `NotServedHere` what it raises when this worker lacks the
task's tool (a rolling deploy).

The shipped executors run bodies on a durable execution engine (optional extras):
`TemporalExecutor` (`pip install 'mcptasks[temporal]'`) and `DBOSExecutor`
(`pip install 'mcptasks[dbos]'`). Their modules, `mcptasks.executors.temporal` and
`mcptasks.executors.dbos`, are the only ones of mcptasks that import `temporalio` or `dbos`, and
they are imported on first use; or name the executor by URL.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcptasks._runtime.executor import Executor, ExecutorHost
from mcptasks.errors import HandedOver, HeldElsewhere, NotServedHere

_ON_FIRST_USE = {"TemporalExecutor": "mcptasks.executors.temporal", "DBOSExecutor": "mcptasks.executors.dbos"}

__all__ = [
    "DBOSExecutor",
    "Executor",
    "ExecutorHost",
    "HandedOver",
    "HeldElsewhere",
    "NotServedHere",
    "TemporalExecutor",
]


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcptasks.executors' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})


if TYPE_CHECKING:
    from mcptasks.executors.dbos import DBOSExecutor as DBOSExecutor
    from mcptasks.executors.temporal import TemporalExecutor as TemporalExecutor
