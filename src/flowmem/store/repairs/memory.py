"""``MemoryRepairs``: the repair log of ``MemoryStore``'s buffers, beside them, under its lock.

The store's append asks ``entries`` and ``growth`` before it stores the buffer (the entries' bytes are
checked against the owner's quota with the rows'), and ``add`` once it did, in the
same locked step: nothing can fail between them. A compaction does the same through
``staged`` (``MemoryEngine.stage_repairs``). ``note`` logs a change that wrote no row
in a locked step of its own. ``drop`` (a buffer deleted) returns the bytes to uncount.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from flowmem.core import Repair, result_id
from flowmem.errors import QuotaExceededError
from flowmem.store.base import Address
from flowmem.store.engine import MemoryEngine, MemoryTables
from flowmem.store.repairs import (
    KEPT,
    PAGE,
    REPLACING,
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
        """The entry texts of a write's repairs (none for a write that repaired nothing)."""
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

    def staged(
        self,
        tables: MemoryTables,
        address: Address,
        owner: str | None,
        repairs: Sequence[Repair],
        growth: int,
    ) -> Callable[[], None]:
        """Check the entries of ``repairs`` (and ``growth`` bytes more) against ``owner``'s quota.

        The quota's error, nothing changed, past it; else the step that counts and adds
        them, to run once the change they record is stored (the store lock held throughout).
        """
        texts = self.entries(repairs)
        if not texts:
            return lambda: None
        grown = self.growth(address, texts)
        self.store.charge(tables, owner, growth + grown, 0, 0, count=False)

        def log() -> None:
            self.store.charge(tables, owner, grown, 0, 0, check=False)  # checked above
            self.add(address, texts)

        return log

    def note(self, address: Address, repair: Repair) -> bool:
        """Log a change that wrote no row, unless the buffer is absent or its newest entry says it (one locked step)."""
        check_address(address)
        with self.store.locked_at(address) as tables:
            if address not in tables.buffers:
                return False
            log = self._logs.get(address)
            if log and parse_entry(*log[-1]).same_as(repair):
                return False
            try:
                self.store.stage_repairs(tables, address, [repair])()
            except QuotaExceededError:
                return False
            return True

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
                newest: dict[str, int] = {}  # a replacement's row (``REPLACING``)
                for index, row in enumerate(tables.buffers.get(address, [])):
                    rid = result_id(row)
                    if rid is not None:
                        answers.setdefault(rid, index)
                        newest[rid] = index
                entries = [
                    placed(entry, (newest if entry.rule == REPLACING else answers).get)
                    for entry in entries
                ]
        return RepairPage(entries, len(log) > limit)
