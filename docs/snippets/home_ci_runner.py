"""The example on the home page (the README's example)."""

# --8<-- [start:example]
from typing import Literal

from pydantic import BaseModel

from mcptasks import Elicit, Result, TaskServer

app = TaskServer("ci-runner")  # store="sqlite:///tasks.db" to survive restarts


class Confirm(BaseModel):
    publish: bool


@app.task_tool(poll_interval=2.0, ttl=3600)
async def run_pipeline(kind: Literal["test", "build"]):
    """Run the CI pipeline and report the result."""
    yield f"starting {kind}"  # a str sets the task's statusMessage
    answer = yield Elicit("Publish the image?", schema=Confirm)  # task goes input_required
    yield Result(f"{kind} passed, published={answer.accepted and answer.data.publish}")


if __name__ == "__main__":
    app.run()  # stdio; app.run("http", port=8000) for HTTP
# --8<-- [end:example]
