"""The executor seam: where task bodies run when this process does not run them itself.

By default an engine runs bodies in its own event loop (`mcptasks serve`), or leaves them queued in
a shared store for `mcptasks worker` processes that claim them. An `Executor` hands that job to a
durable execution engine instead (Temporal, DBOS): the engine still creates every task, answers
`tasks/get` / `tasks/update` / `tasks/cancel` from the store and pushes changes; the executor only
decides *where and when* a body runs, and retries it where it was lost.

The store stays the source of truth. An executor never writes a record itself: its workers call
`ExecutorHost.run_task`, which claims the record with a compare-and-set, replays a durable body
from its journal and writes every change through the engine's fenced transitions. `tasks/get` never
asks the executor anything.

Executors are named by URL (`temporal://127.0.0.1:7233/default`, `dbos+postgresql://...`,
`dbos+sqlite:///tasks-dbos.db`); `executor_from_url` loads the adapter of an optional extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import urlsplit

from mcptasks.errors import HandedOver as HandedOver
from mcptasks.errors import HeldElsewhere as HeldElsewhere
from mcptasks.errors import NotServedHere as NotServedHere
from mcptasks.stores.base import TaskRecord

if TYPE_CHECKING:
    pass

EXECUTOR_ENV = "MCPTASKS_EXECUTOR"
"""The environment variable `mcptasks serve` / `worker` read an executor URL from."""


class ExecutorHost(Protocol):
    """What an executor's workers may call on the engine that hosts them."""

    @property
    def instance_id(self) -> str:
        """This engine's runner id in the store."""

    @property
    def lease_ttl(self) -> float:
        """How long a runner counts as alive after its last heartbeat (seconds)."""

    @property
    def max_concurrent(self) -> int | None:
        """The most tasks this engine runs at once (None: no bound)."""

    async def run_task(self, task_id: str) -> str:
        """Claim the task and run its body here until it ends; return its final status.

        Returns at once with the status of a task that already ended (or `"gone"`), so a repeated
        call is harmless, and `"parked"` when its durable body waits for answers in the store
        (then the executor holds nothing for it until `Executor.resume`). Raises `HeldElsewhere` when another live runner holds it, `HandedOver`
        when the body stopped without ending the task and `NotServedHere` when this worker does
        not know its tool (run it on another worker).
        """

    async def cancel_task(self, task_id: str, reason: str) -> bool:
        """Cancel the task as an operator would (it was cancelled in the executor's own tools)."""

    async def fail_task(self, task_id: str, message: str, *, reason: str) -> bool:
        """Fail an active task with `message` (its run was lost inside the executor)."""


@runtime_checkable
class Executor(Protocol):
    """Runs task bodies somewhere else than the engine that created them.

    An engine with an executor never runs a task body itself: a `tools/call` always answers with a
    task (no immediate results), and a body that asked its `before_task` questions in input rounds
    is started again by a worker (a durable body replays the answers from its journal).
    """

    name: str
    """A short name for logs and errors ("temporal", "dbos")."""

    def serving(self, host: ExecutorHost) -> AbstractAsyncContextManager[None]:
        """Connect for `submit`, `stop` and `reconcile` (entered by every engine with this executor)."""

    def working(self, host: ExecutorHost) -> AbstractAsyncContextManager[None]:
        """Run bodies for the executor while entered: call `host.run_task` for each task it assigns
        here (entered by engines that run tasks: `mcptasks worker`)."""

    async def submit(self, record: TaskRecord) -> None:
        """Start running the new task `record` (idempotent: a second submit starts nothing)."""

    async def resume(self, record: TaskRecord) -> None:
        """The durable body of the task waited for answers in the store (`run_task` returned
        `"parked"`, holding no worker) and they came: run the task again (idempotent; `reconcile`
        also resumes a task answered where no engine with this executor saw it)."""

    async def stop(self, task_id: str) -> None:
        """The task's record is terminal (cancelled): release whatever the executor holds for it."""

    async def reconcile(self, active: Sequence[TaskRecord], live: set[str]) -> int:
        """Bring the executor in line with the store's active records (`live`: runner ids with a
        live heartbeat): submit what was never started, fail what the executor ended without
        ending its task. Returns how many records it changed or submitted."""


_SCHEMES = {
    "temporal": "mcptasks.executors.temporal:TemporalExecutor",
    "dbos+postgresql": "mcptasks.executors.dbos:DBOSExecutor",
    "dbos+postgres": "mcptasks.executors.dbos:DBOSExecutor",
    "dbos+sqlite": "mcptasks.executors.dbos:DBOSExecutor",
}
_EXTRAS = {"temporal": "temporal"}


def executor_from_url(url: str) -> Executor:
    """The executor a URL names (`temporal://HOST:PORT[/NAMESPACE]`, `dbos+postgresql://...`,
    `dbos+sqlite:///PATH`); `ValueError` for an unknown scheme, `ImportError` naming the extra to
    install when its package is missing."""
    scheme = urlsplit(url).scheme
    target = _SCHEMES.get(scheme)
    if target is None:
        known = ", ".join(f"{name}://" for name in sorted(_SCHEMES))
        raise ValueError(f"unknown executor URL {url!r}: the scheme must be one of {known}")
    module_name, _, class_name = target.partition(":")
    extra = _EXTRAS.get(scheme, "dbos")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"the {scheme}:// executor needs the {extra!r} extra: pip install 'mcptasks[{extra}]' ({exc})"
        ) from exc
    factory = getattr(module, class_name)
    executor: Executor = factory.from_url(url)
    return executor
