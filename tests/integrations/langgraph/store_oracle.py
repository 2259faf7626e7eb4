"""Helpers of the ``FlowmemStore`` tests: LangGraph's ``InMemoryStore`` as the oracle, a clock, a spy.

``InMemoryStore`` answers a search in insertion order (namespaces in the order they
were first written, then keys) and lists a namespace once anything touched it (a
``get`` too, an emptied one too). ``FlowmemStore`` answers in ``(namespace, key)``
order and lists the namespaces that hold a live item (docs/langgraph-store.md).
``normalized(model)`` is a new ``InMemoryStore`` holding the same live items written in
``(namespace, key)`` order: asked the same question, it answers what ``FlowmemStore``
must answer, order included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import BaseStore, Item, PutOp
from langgraph.store.memory import InMemoryStore

from flowmem.store import MemoryStore

EVERYTHING = 10**9  # a search limit above any test's item count


def triple(item: Item | None) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    """An item as ``(namespace, key, value)``: what both stores must agree on."""
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def triples(items: Iterable[Item]) -> list[tuple[tuple[str, ...], str, dict[str, Any]] | None]:
    """Each item as ``(namespace, key, value)``, in order."""
    return [triple(item) for item in items]


def live_items(store: BaseStore) -> list[Item]:
    """Every item of a store (InMemoryStore: of every namespace) in ``(namespace, key)`` order."""
    items = store.search((), limit=EVERYTHING)
    return sorted(items, key=lambda item: (tuple(item.namespace), item.key))


def normalized(model: InMemoryStore, keep: Any = None) -> InMemoryStore:
    """A new ``InMemoryStore`` with ``model``'s live items (those ``keep`` accepts) in order."""
    fresh = InMemoryStore()
    ops = [
        PutOp(tuple(item.namespace), item.key, item.value)
        for item in live_items(model)
        if keep is None or keep(tuple(item.namespace))
    ]
    for op in ops:  # one batch would apply them in this order too; one by one says so plainly
        fresh.batch([op])
    return fresh


def fill(
    stores: Sequence[BaseStore], items: Iterable[tuple[tuple[str, ...], str, dict[str, Any]]]
) -> None:
    """Put the same items, in ``(namespace, key)`` order, into each store."""
    ordered = sorted(items, key=lambda item: (item[0], item[1]))
    for store in stores:
        for namespace, key, value in ordered:
            store.put(namespace, key, value)


class Clock:
    """A clock the test moves by hand (epoch seconds), for a ``MemoryService``'s ``clock``."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds


class SpyStore(MemoryStore):
    """A ``MemoryStore`` that records the name of every attribute read on it (``touched``).

    MEM-7: a refused scope reaches no storage backend, so after a refusal ``touched``
    stays empty (reset it after building the service and the adapter).
    """

    def __init__(self) -> None:
        object.__setattr__(self, "touched", [])
        super().__init__()
        self.touched.clear()

    def __getattribute__(self, name: str) -> Any:
        if name != "touched" and not name.startswith("__"):
            object.__getattribute__(self, "touched").append(name)
        return object.__getattribute__(self, name)
