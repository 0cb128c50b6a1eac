"""`combined_replace`: a store's one-round-trip replace + publish is used only where it is safe."""

from __future__ import annotations

from typing import Any

from mcptasks.stores import MemoryTaskStore
from mcptasks.stores.base import TaskRecord, combined_replace


class Combined(MemoryTaskStore):
    """A store offering `replace_and_publish` next to its `replace`."""

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        return await super().replace(record, expected_version=expected_version)

    async def replace_and_publish(self, record: TaskRecord, *, expected_version: int, message: str) -> bool:
        written = await self.replace(record, expected_version=expected_version)
        if written:
            await self.publish(message)
        return written


class ChangesReplace(Combined):
    """A subclass that changes `replace` alone: the inherited combination would go around it."""

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        return False


class Forwarding:
    """A wrapper that forwards what it does not define (its own `replace` would be bypassed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def replace(self, record: TaskRecord, *, expected_version: int) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_store_defining_both_is_combined() -> None:
    store = Combined()
    assert combined_replace(store) == store.replace_and_publish


def test_a_store_without_it_is_not() -> None:
    assert combined_replace(MemoryTaskStore()) is None


def test_a_subclass_changing_replace_keeps_its_replace() -> None:
    assert combined_replace(ChangesReplace()) is None


def test_a_forwarding_wrapper_keeps_its_replace() -> None:
    assert combined_replace(Forwarding(Combined())) is None
