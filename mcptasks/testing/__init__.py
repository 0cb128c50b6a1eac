"""Test helpers for code built on mcptasks. Importing this package requires pytest (and anyio's
pytest plugin, which ships with anyio).

`StoreContract` is the suite every `TaskStore` backend must pass; subclass it in your tests.
"""

from __future__ import annotations

from mcptasks.testing.store_contract import StoreContract

__all__ = ["StoreContract"]
