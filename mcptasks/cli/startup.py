"""The start-up block `mcptasks serve` prints on stderr: where it serves, the store, the tools.

    mcptasks 0.4.0: serving 'ci-runner' over Streamable HTTP at http://127.0.0.1:8000/mcp
      store     sqlite:///tasks.db
      tasks     run in this process
      fallback  inline (clients without the tasks extension get the result on the call)
      tools     run_pipeline (task optional), deploy (task required), ping (no task)
      log       info, text (one line per task transition)
      metrics   http://127.0.0.1:9464/metrics (Prometheus text format)
      webhooks  https://hooks.example.com/mcptasks (task events, signed)
    Ctrl-C stops the server.

The `metrics` line is there with `--metrics-port`, `webhooks` with `--webhook` (URLs without user
info or query, which may hold credentials; never the secret). With `--log-format json` the same facts are
one JSON object (`"event": "serving"`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from mcptasks._runtime.safe_text import json_text
from mcptasks._version import __version__
from mcptasks.cli.logsetup import json_fields
from mcptasks.cli.output import write

FALLBACK_TEXT = {
    "inline": "inline (clients without the tasks extension get the result on the call)",
    "tools": "tools (clients without the tasks extension get task_status/task_answer/task_cancel tools)",
    "reject": "reject (clients without the tasks extension get error -32021)",
}


@dataclass
class ToolLine:
    """One tool as the start-up block shows it."""

    name: str
    task_support: str | None = None
    """`optional` or `required` for a task tool; None for an ordinary tool."""
    fallback: str | None = None
    """The tool's own fallback mode when it differs from the server's."""

    def text(self) -> str:
        """`name (task optional)`, `name (no task)`, ..."""
        if self.task_support is None:
            return f"{self.name} (no task)"
        extra = f", fallback {self.fallback}" if self.fallback else ""
        return f"{self.name} (task {self.task_support}{extra})"

    def wire(self) -> dict[str, Any]:
        """The JSON form."""
        data: dict[str, Any] = {"name": self.name, "taskSupport": self.task_support or "none"}
        if self.fallback:
            data["fallback"] = self.fallback
        return data


@dataclass
class Startup:
    """What a starting server tells its operator."""

    server: str
    url: str | None
    """The Streamable HTTP endpoint; None for stdio."""
    store: str | None = None
    """The task store (password redacted); None for an MCPServer without the extension."""
    runs_tasks: bool = True
    executor: str | None = None
    """The executor whose workers run the bodies (its URL, password redacted); None: none."""
    fallback: str | None = None
    tools: list[ToolLine] = field(default_factory=list)
    log_level: str = "info"
    log_format: str = "text"
    metrics: str | None = None
    """The metrics endpoint's URL (`--metrics-port`); None: not served."""
    webhooks: list[str] = field(default_factory=list)
    """The webhook endpoints (shown without user info and query)."""

    def text(self) -> str:
        """The block as lines of text."""
        where = f"over Streamable HTTP at {self.url}" if self.url else "over stdio (messages on stdin/stdout)"
        lines = [f"mcptasks {__version__}: serving {self.server!r} {where}"]
        if self.store is not None:
            lines.append(f"  store     {self.store}")
            lines.append(
                "  tasks     "
                + (
                    f"run by the workers of {self.executor} (mcptasks worker --executor)"
                    if self.executor is not None
                    else "run in this process"
                    if self.runs_tasks
                    else "queued for `mcptasks worker` (--enqueue-only)"
                )
            )
        if self.fallback is not None:
            lines.append(f"  fallback  {FALLBACK_TEXT.get(self.fallback, self.fallback)}")
        tools = ", ".join(tool.text() for tool in self.tools) if self.tools else "(none)"
        lines.append(f"  tools     {tools}")
        lines.append(
            f"  log       {self.log_level}, {self.log_format} (one line per task transition at info)"
        )
        if self.metrics is not None:
            lines.append(f"  metrics   {self.metrics} (Prometheus text format)")
        if self.webhooks:
            lines.append(f"  webhooks  {', '.join(self.webhooks)} (task events, signed)")
        lines.append("Ctrl-C stops the server.")
        return "\n".join(lines)

    def json(self) -> str:
        """The block as one JSON log line."""
        data = json_fields("info", "mcptasks.serve", f"serving {self.server!r}")
        data.update(
            event="serving",
            server=self.server,
            transport="http" if self.url else "stdio",
            url=self.url,
            store=self.store,
            runsTasks=self.runs_tasks,
            executor=self.executor,
            fallback=self.fallback,
            tools=[tool.wire() for tool in self.tools],
            logLevel=self.log_level,
            metrics=self.metrics,
            webhooks=self.webhooks,
        )
        return json_text(data)

    def print(self, stream: TextIO) -> None:
        """Write the block (text or JSON, after `log_format`) and flush."""
        write(stream, (self.json() if self.log_format == "json" else self.text()) + "\n")


def webhook_urls(config: Any) -> list[str]:
    """The webhook endpoints of an `EngineConfig` as the block shows them."""
    from mcptasks._runtime.webhooks.targets import shown_url

    return [shown_url(url) for url in config.webhooks]
