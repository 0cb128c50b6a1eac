# --8<-- [start:head]
"""The two-tool fallback: task tools for hosts that do not speak the Tasks extension.

Run it:  mcptasks serve docs/snippets/howto_fallback.py --transport http --port 8000
"""

import anyio
from pydantic import BaseModel, Field

from mcptasks import Accepted, Elicit, EngineConfig, Result, TaskServer

# --8<-- [end:head]


# --8<-- [start:server]
# every task tool; or per tool: @app.task_tool(fallback="tools")
app = TaskServer("exports", config=EngineConfig(fallback="tools"))


class Confirm(BaseModel):
    confirm: bool = Field(description="Export every row?")


@app.task_tool(poll_interval=5.0)
async def export_table(table: str):
    """Export `table` to CSV; big tables take minutes."""
    yield f"counting the rows of {table}"
    await anyio.sleep(0.2)
    answer = yield Elicit(f"{table} has 2,000,000 rows. Export all of them?", schema=Confirm)
    if not (isinstance(answer, Accepted) and answer.data.confirm):
        yield Result("export skipped")
    yield f"exporting {table}"
    await anyio.sleep(0.2)
    yield Result(f"exported {table} to exports/{table}.csv")


if __name__ == "__main__":
    app.run()
# --8<-- [end:server]
