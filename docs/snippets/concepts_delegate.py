"""A helper generator that reports progress and asks a question for its caller (the Concepts
page, "Helpers that report and ask")."""

from pydantic import BaseModel

from mcptasks import Accepted, Answer, Delegate, Elicit, Result, TaskServer, Yields

app = TaskServer("delegate")


class Confirm(BaseModel):
    confirm: bool


async def migrate(table: str) -> Yields:
    """A helper: reports, asks, and ends with `Result(...)`, its value for the caller."""
    yield f"checking {table}"
    answer: Answer[Confirm] = yield Elicit(f"Migrate {table}?", schema=Confirm)
    if not (isinstance(answer, Accepted) and answer.data.confirm):
        yield Result(0)
    yield f"migrating {table}"
    yield Result(len(table))  # say, the rows it moved


@app.task_tool
async def migrate_all(tables: list[str]) -> Yields:
    """Migrate each table the user confirms; the helper's questions reach the client."""
    moved = 0
    for table in tables:
        moved += yield Delegate(migrate(table))
    yield Result(f"moved {moved} rows")


if __name__ == "__main__":
    app.run()
