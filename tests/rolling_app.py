"""A `TaskServer` in two versions, as during a rolling deploy (`tests/test_rolling_deploy.py` and
the executor tests): `$MCPTASKS_ROLLING_VERSION` "old" has the task tool `stable` only, "new"
(the default) adds `fresh`. Each tool returns the id of the process that ran it.

    MCPTASKS_ROLLING_VERSION=old mcptasks worker tests/rolling_app.py --store URL
"""

from __future__ import annotations

import os
from typing import Any

from mcptasks import TaskServer

VERSION = os.environ.get("MCPTASKS_ROLLING_VERSION", "new")

app = TaskServer("mcptasks-rolling")  # no config: the environment's


@app.task_tool()
async def stable() -> dict[str, Any]:
    """A tool every version has."""
    return {"pid": os.getpid()}


if VERSION == "new":

    @app.task_tool()
    async def fresh() -> dict[str, Any]:
        """A tool only the new version has."""
        return {"pid": os.getpid()}
