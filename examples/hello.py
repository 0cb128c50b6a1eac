"""The smallest task tool.

Run it:  mcptasks serve examples/hello.py      (or: python examples/hello.py; both speak stdio)
"""

from collections.abc import AsyncIterator

import anyio

from mcptasks import Result, TaskServer

app = TaskServer("hello")


@app.task_tool
async def hello(name: str = "world") -> AsyncIterator[str | Result]:
    """Greet `name`, taking a moment to think about it."""
    yield f"thinking about {name}..."  # becomes the task's statusMessage
    await anyio.sleep(1)
    yield Result(f"Hello, {name}!")  # ends the task; the tool result


if __name__ == "__main__":
    app.run()
