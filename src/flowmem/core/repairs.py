"""What the buffer rules changed besides adding rows: the repair log's entries, made pure (issue 37 §2).

A ``Repair`` says by which rule (``rule``), of which kind (``kind``, for a generic
display: ``KINDS``), which call ids and how many rows; the stores add the time and
write it in the same transaction as the change (``flowmem.store.repairs``). An append
notes its repairs in a ``Tally`` while the rules act; ``removed_index`` turns the
indexes of rows removed one by one into the indexes they had before the first removal
(the positions of a window eviction's entry).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

WINDOW = "window"
"""The rule of a window eviction (DESIGN.md §2: ``max_messages``; no MEM rule)."""

COMPACTION = "compaction"
"""The rule of a compaction (issue 28 §2: rows archived, a summary in their place)."""

KINDS: dict[str, str] = {
    "MEM-3": "heal",
    "MEM-10": "replace",
    "MEM-1": "duplicate",
    "MEM-2": "duplicate",
    WINDOW: "evict",
    COMPACTION: "compact",
    "MEM-5": "normalize",
}
"""The kind of each rule's entry; a refusal's rule is its error code, of kind ``refuse``."""


def kind_of(rule: str) -> str:
    """The kind of an entry of ``rule`` (an entry stored before kinds existed has none: derived)."""
    return KINDS.get(rule, "refuse")


@dataclass(frozen=True)
class Repair:
    """One kind of change the rules made in one write besides adding rows (a repair log entry).

    ``rule``: ``MEM-3`` (placeholders inserted), ``MEM-10`` (placeholders replaced by
    their real result), ``MEM-1`` (results refused as duplicates), ``MEM-2`` (turns
    refused as duplicates), ``window`` (rows a window evicted), ``compaction`` (rows
    archived), ``MEM-5`` (entries a stored read's normalization dropped) or an error
    code (a refused write that named the buffer); ``call_ids``: the ids involved, in
    order; ``count``: how many rows (inserted, replaced, refused, removed or dropped).
    ``positions``: for rows the change removed (an eviction, a compaction), the indexes
    those rows had in the buffer just before it, since they have none after; empty for
    the others (a read finds the rows a heal or a replacement wrote). ``archived``: a
    compaction's archive numbers, first and last (``load(..., include_archived=True)``).
    """

    rule: str
    call_ids: tuple[str, ...]
    count: int
    positions: tuple[int, ...] = ()
    archived: tuple[int, int] | None = None
    kind: str = field(default="")

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", kind_of(self.rule))


def removed_index(removed: list[int], index: int) -> int:
    """The index before any removal of the row now at ``index``, and note it removed.

    ``removed``: the earlier indexes noted, in the same numbering (kept sorted here).
    """
    for earlier in removed:
        if earlier <= index:
            index += 1
        else:
            break
    removed.insert(sum(1 for earlier in removed if earlier < index), index)
    return index


@dataclass
class Tally:
    """What one ``apply_append`` did, counted while it does it (with the call ids, for the log)."""

    appended: int = 0
    healed: int = 0
    replaced: int = 0
    deduplicated: int = 0
    notes: dict[str, list[str]] | None = None  # rule -> call ids, made on the first repair
    refused_turns: int = 0  # MEM-2 rows (a turn may name several ids)
    evicted: Repair | None = None  # the window's eviction, when it removed rows

    def note(self, rule: str, ids: Sequence[str]) -> None:
        """Remember the call ids a rule touched."""
        if self.notes is None:
            self.notes = {}
        self.notes.setdefault(rule, []).extend(ids)

    def repairs(self) -> tuple[Repair, ...]:
        """The repairs noted, one per rule, in the log's order (MEM-3, MEM-10, MEM-1, MEM-2, window)."""
        found: list[Repair] = []
        if self.notes is not None:
            counts = {"MEM-2": self.refused_turns}
            found = [
                Repair(rule, tuple(self.notes[rule]), counts.get(rule, len(self.notes[rule])))
                for rule in ("MEM-3", "MEM-10", "MEM-1", "MEM-2")
                if rule in self.notes
            ]
        if self.evicted is not None:
            found.append(self.evicted)
        return tuple(found)
