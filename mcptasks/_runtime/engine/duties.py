"""Background duties of the engine: run one now and then, and never let its failure stop the engine."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

logger = logging.getLogger("mcptasks")


async def every(interval: float, duty: Callable[[], Awaitable[object]]) -> None:
    """Run `duty` every `interval` seconds (after the first wait), guarded."""
    while True:
        await anyio.sleep(interval)
        await guarded(duty)


async def guarded(duty: Callable[[], Awaitable[object]]) -> None:
    """Run a background duty; a failure (say, the store is briefly unreachable) is logged and
    the duty runs again next time instead of taking the engine down."""
    try:
        await duty()
    except Exception:
        name = getattr(duty, "__name__", None) or getattr(getattr(duty, "func", None), "__name__", repr(duty))
        logger.warning("mcptasks background duty %s failed; will retry", name, exc_info=True)
