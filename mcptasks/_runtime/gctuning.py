"""Garbage-collector settings for a long-running server process.

Every task allocates a few dozen container objects (records, dicts, frames, anyio tasks), so with
CPython's default first threshold (700 allocations) a burst of creates runs the collector every
dozen tasks, and each older-generation pass walks every live record and body. `tune_gc` moves
what start-up allocated (modules, tools, pydantic models) out of the collector's sight with
`gc.freeze()` and raises the first threshold, which measured about 1.5x the create+complete rate
per CPU-second on a burst of 20,000 zero-work tasks (`benchmarks/engine.py --bench gc`).
"""

from __future__ import annotations

import gc

SERVER_GC_THRESHOLD = 20_000
"""Allocations between young-generation collections in a tuned server (CPython's default: 700)."""


def tune_gc(threshold: int = SERVER_GC_THRESHOLD) -> None:
    """Freeze what start-up allocated and raise the young-generation threshold.

    Call it once, after imports and tool registration and before serving. Cyclic garbage is still
    collected, in fewer and larger passes; the older generations keep their thresholds.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
