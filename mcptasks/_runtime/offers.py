"""Tool offers: which task tools the live runners run, and the queued tasks none of them serves.

During a rolling deploy some workers know a task tool and some do not yet (or no longer). A runner
therefore says which tools it runs with every heartbeat (`offered_tools`, stored by a store that
`KeepsOffers`), claims only records of those tools, and an executor's worker that lacks a tool
hands the task back to the executor (`NotServedHere`) instead of failing it. A queued task fails
(`no_worker_for_tool`) only once no live runner has offered its tool for `no_worker_timeout`
seconds (`unserved`). Every time that goes into the decision is read from the store (the record's
`updated_at`, the lease ends of the runners that offered the tool), so a restart of the process
that checks does not restart the count.

A store without offers, or a live runner whose heartbeat does not say (an older mcptasks), means
any runner may run any tool: then nothing is failed here, and a worker that lacks the tool fails
the task as before (`No worker knows the task tool ...`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from mcptasks._runtime.driver import Outcome
from mcptasks.stores.base import RunnerOffer, TaskRecord, TaskStore, keeps_offers
from mcptasks.wire import INTERNAL_ERROR

NO_WORKER_REASON = "no_worker_for_tool"
"""`data.reason` of a task failed because no live worker runs its tool."""


def offered_tools(tools: Iterable[str], *, runs_tasks: bool) -> frozenset[str]:
    """The tools an engine offers: the task tools it knows when it runs bodies, else none."""
    return frozenset(tools) if runs_tasks else frozenset()


async def heartbeat(store: TaskStore, runner: str, ttl: float, tools: Collection[str]) -> None:
    """Renew `runner`'s lease, saying it runs `tools` when the store keeps offers."""
    offers = keeps_offers(store)
    if offers is None:
        await store.heartbeat(runner, ttl)
    else:
        await offers.heartbeat(runner, ttl, tools=tools)


def unserved(
    queued: Iterable[TaskRecord], offers: Mapping[str, RunnerOffer], *, now: float, bound: float
) -> list[TaskRecord]:
    """The queued records (`runner is None`) whose tool no live runner offers, and none has
    offered for `bound` seconds: since the record last changed (it was created or re-queued) and
    since the lease of the last runner that offered the tool ended. None while a live runner does
    not say what it runs."""
    live = [offer for offer in offers.values() if offer.until > now]
    served: set[str] = set()
    for offer in live:
        if offer.tools is None:
            return []
        served.update(offer.tools)
    last_offered: dict[str, float] = {}
    for offer in offers.values():
        for tool in offer.tools or ():
            last_offered[tool] = max(last_offered.get(tool, 0.0), offer.until)
    return [
        record
        for record in queued
        if record.runner is None
        and not record.terminal
        and record.tool not in served
        and now - max(record.updated_at, last_offered.get(record.tool, 0.0)) >= bound
    ]


def no_worker_outcome(record: TaskRecord, bound: float) -> Outcome:
    """The failure of a task no live worker has offered to run for `bound` seconds."""
    message = (
        f"No live worker runs the task tool {record.tool!r}: none has offered it for {bound:g} s "
        "(no_worker_timeout), so the task cannot run. Deploy workers that know the tool."
    )
    data: dict[str, Any] = {"reason": NO_WORKER_REASON, "tool": record.tool, "waitedSeconds": bound}
    return Outcome("failed", error={"code": INTERNAL_ERROR, "message": message, "data": data})
