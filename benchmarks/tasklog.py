"""What one task-transition log line costs, next to a plain `logger.info` call.

    python benchmarks/tasklog.py [--n 20000]

Measures `mcptasks._runtime.tasklog.log_task` (what the engine calls at each transition) with the
`mcptasks.tasks` logger off (the library default: no logging configured) and on, formatted as
`mcptasks serve` does (text and `--log-format json`), written to /dev/null; and, side by side, a
plain `logger.info("task %s created", id)` through the same handler. Best of five runs each.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable

from mcptasks._runtime.tasklog import log_task
from mcptasks.cli.logsetup import LogFormat, configure_logging
from mcptasks.stores.base import TaskRecord


def per_call_us(call: Callable[[], None], n: int) -> float:
    """Best of five: microseconds per call."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            call()
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20000, help="calls per run")
    args = parser.parse_args()
    record = TaskRecord(
        task_id="t" * 43, owner="o", tool="build", status="failed", error={"code": -32603, "message": "x"}
    )
    plain = logging.getLogger("mcptasks.bench")
    with open(os.devnull, "w") as sink:
        configure_logging("warning", "text", stream=sink)
        off = per_call_us(lambda: log_task("failed", record), args.n)
        print(f"logger off (library default)   {off:8.2f} us per transition")
        formats: tuple[LogFormat, ...] = ("text", "json")
        for log_format in formats:
            configure_logging("info", log_format, stream=sink)
            ours = per_call_us(lambda: log_task("failed", record), args.n)
            base = per_call_us(lambda: plain.info("task %s created", record.task_id), args.n)
            print(
                f"info, {log_format:<4}  log_task {ours:8.2f} us   plain logger.info {base:8.2f} us   "
                f"ratio {ours / base:.2f}"
            )


if __name__ == "__main__":
    main()
