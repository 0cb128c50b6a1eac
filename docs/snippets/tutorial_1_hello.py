"""Tutorial step 1: the smallest task tool.

Run it:  mcptasks serve docs/snippets/tutorial_1_hello.py   (stdio)
"""

import anyio

from mcptasks import Result, TaskServer

app = TaskServer("tutorial")


@app.task_tool
async def hello(name: str = "world"):
    """Greet `name`, taking a moment to think about it."""
    yield f"thinking about {name}..."  # sets the task's statusMessage
    await anyio.sleep(1)  # stands in for real work
    yield Result(f"Hello, {name}!")  # ends the task; becomes the tool result


if __name__ == "__main__":
    app.run()
