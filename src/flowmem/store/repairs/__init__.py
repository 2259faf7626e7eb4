"""A buffer's repair log: what the append rules changed besides adding rows, kept (issue 37 §2).

Each entry says when (``at``, seconds since the epoch), by which rule (``MEM-3``:
placeholders inserted for unanswered calls; ``MEM-10``: placeholders replaced by
their real result; ``MEM-1``: results refused as duplicates; ``MEM-2``: turns
refused as duplicates), the call ids involved and how many rows (``count``). A read
adds the indexes of the rows an entry wrote (a placeholder, a replacement: the rows
answering its call ids) as the buffer holds them when read, so they stay right after
a window eviction or a compaction; a row that left the buffer has none, and a
refused duplicate wrote none.

The log is written in the append's own transaction (a repair that did not commit is
not in it, a committed one always is), only when the append repaired something: the
back-ends call ``record`` from their append path with the core's
``AppendOutcome.repairs``. It keeps a buffer's newest ``KEPT`` entries (older ones are
deleted in the same write), its bytes count against the owner's quota (the
``bytes`` quota, as the buffer's), and it goes with its buffer: ``clear``, a session's
deletion and a user's erasure delete it in their transaction (each back-end's
``_drop_buffer``).

``SupportsRepairs`` is a store capability, as ``store.repairs``: ``MemoryRepairs``
(``memory.py``) and ``SqlRepairs`` (``sql.py``, the table and statements in
``sqlite.py`` and ``postgres.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from flowmem.core import Repair
from flowmem.errors import InvalidInputError
from flowmem.store.base import Address
from flowmem.store.rows import check_last, check_page, stored_json

KEPT = 1000
"""Entries a buffer's log keeps: the newest (docs/memory.md, docs/security.md)."""

PAGE = 50
"""Entries a page of the log holds unless asked for fewer or more (at most ``PAGE_MAX``)."""

PAGE_MAX = 1000

WRITING_RULES = ("MEM-3", "MEM-10")  # the rules that write a row the entry points at


@dataclass(frozen=True)
class RepairEntry:
    """One entry of a buffer's repair log; ``seq`` numbers a buffer's entries from 1, never reused."""

    seq: int
    at: float
    rule: str
    call_ids: list[str]
    count: int
    positions: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The entry as the API answers it."""
        return {
            "seq": self.seq,
            "at": self.at,
            "rule": self.rule,
            "call_ids": self.call_ids,
            "count": self.count,
            "positions": self.positions,
        }


@dataclass(frozen=True)
class RepairPage:
    """A page of a buffer's log, newest first; ``more``: older entries remain (ask ``before`` the last seq)."""

    entries: list[RepairEntry]
    more: bool = False


def entry_texts(repairs: Iterable[Repair], at: float) -> list[str]:
    """The log's entries for an append's repairs, as stored JSON texts, in the rules' order."""
    return [
        json.dumps(
            {"at": at, "rule": r.rule, "call_ids": list(r.call_ids), "count": r.count},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for r in repairs
    ]


def placed(entry: RepairEntry, index_of: Callable[[str], int | None]) -> RepairEntry:
    """``entry`` with the indexes of the rows it wrote, as the buffer holds them now.

    A MEM-3 or MEM-10 entry wrote the rows answering its call ids (a placeholder, a
    replacement): ``index_of`` finds the row answering a call id (None: it has left
    the buffer, evicted or compacted). A refused duplicate wrote no row.
    """
    if entry.rule not in WRITING_RULES:
        return entry
    found = (index_of(cid) for cid in entry.call_ids)
    return replace(entry, positions=[index for index in found if index is not None])


def check_paging(before: int | None, limit: int) -> None:
    """Refuse (InvalidInputError) a negative cursor, a negative limit or one over ``PAGE_MAX``."""
    check_last(before)
    check_page(limit)
    if limit > PAGE_MAX:
        raise InvalidInputError(f"limit must be at most {PAGE_MAX}, got {limit}")


def parse_entry(seq: int, text: str) -> RepairEntry:
    """An entry from its stored JSON text."""
    data = stored_json(text)
    return RepairEntry(
        seq,
        float(data["at"]),
        str(data["rule"]),
        [str(cid) for cid in data["call_ids"]],
        int(data["count"]),
        [int(pos) for pos in data.get("positions", [])],
    )


@runtime_checkable
class SupportsRepairs(Protocol):
    """Reads of the buffers' repair logs (see the module docstring)."""

    def page(self, address: Address, *, before: int | None = None, limit: int = PAGE) -> RepairPage:
        """The newest ``limit`` entries numbered below ``before`` (all when None), newest first."""
        ...
