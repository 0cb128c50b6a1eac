# --8<-- [start:head]
"""Durable task bodies: steps and answers journalled with the task, replayed after a restart."""

import time

from pydantic import BaseModel

from mcptasks import Accepted, Elicit, Result, Step, StepFailed, TaskContext, TaskServer, ToolError

app = TaskServer("billing")  # serve it with a persistent store: --store sqlite:///billing.db
# --8<-- [end:head]


# --8<-- [start:steps]
CHARGES: dict[str, int] = {}
"""Stands for the payment provider, which keeps one charge per idempotency key."""


def charge_card(customer: str, cents: int, idempotency_key: str) -> dict:
    """The side effect. A provider that de-duplicates by key makes a repeated call harmless."""
    CHARGES.setdefault(idempotency_key, cents)
    return {"charge": f"ch_{idempotency_key}", "cents": CHARGES[idempotency_key]}


async def send_receipt(customer: str, charge: str) -> str:
    return f"receipt for {charge} sent to {customer}"


class Confirm(BaseModel):
    ok: bool


@app.task_tool(durable=True)
async def bill(customer: str, cents: int, ctx: TaskContext):
    """Charge `customer` once they confirm; the task survives restarts of the server."""
    started = await ctx.now()  # journalled: a replay sees the time the first run saw
    answer = yield Elicit(f"Charge {customer} {cents / 100:.2f}?", schema=Confirm)
    if isinstance(answer, Accepted) and answer.data.ok:
        key = f"{ctx.task_id}-charge"  # the same on every run of this task
        charged = await ctx.step(charge_card, customer, cents, key)
        receipt = await ctx.step(send_receipt, customer, charged["charge"])
        took = round(await ctx.now() - started, 3)
        yield Result({"charged": True, **charged, "receipt": receipt, "seconds": took})
    else:
        yield Result({"charged": False})


# --8<-- [end:steps]


# --8<-- [start:failures]
def reserve(sku: str) -> str:
    if sku == "sold-out":
        raise LookupError(f"{sku} is not in stock")
    return f"reservation of {sku}"


@app.task_tool(durable=True)
async def order(sku: str, ctx: TaskContext) -> str:
    """A step that raises raises `StepFailed`, on the first run and on every replay."""
    try:
        return await ctx.step(reserve, sku)
    except StepFailed as failed:  # failed.step == "reserve", failed.type == "LookupError"
        raise ToolError(f"cannot order {sku}: {failed.message}") from None


# --8<-- [end:failures]


# --8<-- [start:def-generator]
def fetch_rates(day: str) -> dict:
    time.sleep(0.01)  # blocking I/O is fine: a sync step runs in a worker thread
    return {"day": day, "eur_usd": 1.08}


@app.task_tool(durable=True)
def rates(day: str):
    """A `def` generator cannot await: it yields `Step(...)` and gets the step's value back."""
    yield f"fetching the rates of {day}"
    found = yield Step(fetch_rates, day)
    yield Result(found)


# --8<-- [end:def-generator]


# --8<-- [start:versioning]
BODY_VERSION = 2
"""Bumped when the steps of `migrate` change; a task in flight keeps the version it started with."""


def body_version() -> int:
    return BODY_VERSION


def copy_table(table: str) -> int:
    return 1204  # rows copied


def analyze_table(table: str) -> str:
    return f"{table}: statistics updated"


@app.task_tool(durable=True)
async def migrate(table: str, ctx: TaskContext):
    """The version is the first step: a replay gets the version its task started with."""
    version = await ctx.step(body_version)
    rows = await ctx.step(copy_table, table)
    report = {"table": table, "rows": rows, "version": version}
    if version >= 2:  # new in version 2: tasks started under version 1 never ask for it
        report["analyzed"] = await ctx.step(analyze_table, table)
    yield Result(report)


# --8<-- [end:versioning]
