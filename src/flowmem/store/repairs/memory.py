"""``MemoryRepairs``: the repair log of ``MemoryStore``'s buffers, beside them, under its lock.

The store's append asks ``entries`` and ``growth`` before it stores the buffer (the entries' bytes are
checked against the owner's quota with the rows'), and ``add`` once it did, in the
same locked step: nothing can fail between them. ``drop`` (a buffer deleted) returns
the bytes to uncount.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from flowmem.core import Repair, result_id
from flowmem.store.base import Address
from flowmem.store.engine import MemoryEngine
from flowmem.store.repairs import (
    KEPT,
    PAGE,
    WRITING_RULES,
    RepairPage,
    check_paging,
    entry_texts,
    parse_entry,
    placed,
)
from flowmem.store.rows import check_address, utf8_size


class MemoryRepairs:
    """The logs of a ``MemoryStore``'s buffers: per address, (seq, entry text), oldest first."""

    def __init__(self, store: MemoryEngine, kept: int = KEPT) -> None:
        self.store = store
        self.kept = kept
        self._logs: dict[Address, list[tuple[int, str]]] = {}
        self._next: dict[Address, int] = {}

    def entries(self, repairs: Sequence[Repair]) -> list[str]:
        """The entry texts of an append's repairs (none for an append that repaired nothing)."""
        return entry_texts(repairs, time.time()) if repairs else []

    def growth(self, address: Address, texts: Sequence[str]) -> int:
        """The bytes the log of ``address`` grows by when ``texts`` are added and the oldest trimmed."""
        log = self._logs.get(address, [])
        overflow = max(len(log) + len(texts) - self.kept, 0)
        gone = log[:overflow]
        dropped_new = texts[: max(overflow - len(log), 0)]
        return sum(map(utf8_size, texts)) - sum(utf8_size(t) for _, t in gone) - sum(
            map(utf8_size, dropped_new)
        )

    def add(self, address: Address, texts: Sequence[str]) -> None:
        """Add ``texts`` to the log of ``address`` and keep its newest ``kept`` (the store lock held)."""
        seq = self._next.get(address, 1)
        log = self._logs.setdefault(address, [])
        for text in texts:
            log.append((seq, text))
            seq += 1
        self._next[address] = seq
        del log[: max(len(log) - self.kept, 0)]

    def drop(self, address: Address) -> int:
        """Forget the log of a deleted buffer (the store lock held); return its bytes."""
        self._next.pop(address, None)
        return sum(utf8_size(text) for _, text in self._logs.pop(address, []))

    def page(self, address: Address, *, before: int | None = None, limit: int = PAGE) -> RepairPage:
        """The newest ``limit`` entries numbered below ``before``, newest first (one snapshot)."""
        check_address(address)
        check_paging(before, limit)
        with self.store.locked() as tables:
            log = [item for item in self._logs.get(address, []) if before is None or item[0] < before]
            entries = [parse_entry(seq, text) for seq, text in log[::-1][:limit]]
            if any(entry.rule in WRITING_RULES for entry in entries):
                answers: dict[str, int] = {}
                for index, row in enumerate(tables.buffers.get(address, [])):
                    rid = result_id(row)
                    if rid is not None:
                        answers.setdefault(rid, index)
                entries = [placed(entry, answers.get) for entry in entries]
        return RepairPage(entries, len(log) > limit)
