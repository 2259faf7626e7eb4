"""A buffer's repair log: what the memory changed in a buffer besides adding rows, kept (issue 37 §2).

An entry, as ``GET …/repairs`` answers it (``RepairEntry.to_dict``)::

    {"seq": 7, "at": 1765000000.0, "rule": "MEM-3", "kind": "heal",
     "call_ids": ["c1"], "count": 1, "positions": [4], "archived": null}

- ``seq``: the entry's number in its buffer's log, from 1, never reused.
- ``at``: when, in seconds since the epoch (the server's clock).
- ``rule`` and ``kind`` (``flowmem.core.KINDS``; a display needs only ``kind``):
  ``MEM-3`` / ``heal``: placeholders inserted for unanswered calls; ``MEM-10`` /
  ``replace``: placeholders replaced by their real result; ``MEM-1`` / ``duplicate``:
  results refused as duplicates; ``MEM-2`` / ``duplicate``: assistant turns refused as
  duplicates; ``window`` / ``evict``: rows an append's window (``max_messages``)
  evicted; ``compaction`` / ``compact``: rows a compaction archived, a summary (or a
  compacted history) in their place; ``MEM-5`` / ``normalize``: entries the
  normalization of a stored read dropped; an error code (``buffer_full``) /
  ``refuse``: a write refused whole, naming the buffer. An entry stored before kinds
  existed has none: it is derived from its rule when read.
- ``call_ids``: the call ids involved, in order (evicted: those the removed rows
  declared or answered; a compaction, a drop, a refusal: none).
- ``count``: how many rows were inserted, replaced, refused, removed or dropped.
- ``positions``: row indexes. A heal's or a replacement's are the indexes, in the
  buffer as it is when read, of the rows it wrote (the rows answering its call ids:
  a heal's the first, a replacement's the newest — a LangGraph line keeps the
  placeholder before the late result, decision 0123; none once they left the buffer). An eviction's and a compaction's are the indexes
  the removed rows had in the buffer just before they were removed (they have none
  after: the rows now at those indexes are others). A refused duplicate, a drop and a
  refusal have none.
- ``archived``: a compaction's archive numbers ``[first, last]`` (the rows read with
  ``archived=true``), else null.

The log is written in the same transaction as the change it records (a repair that
did not commit is not in it, a committed one always is), and only for a change: the
back-ends call ``record`` from their append path with the core's
``AppendOutcome.logged`` (an append that changed no row logs nothing) and from their
compaction's transaction. A drop on a read and a refusal change no row: they are
``note``-d in a small transaction of their own, serialized with the buffer's writes,
only on a buffer that exists and only when the newest entry does not already say the
same (so polling a broken buffer does not grow its log; decision 0121). On SQLite and
PostgreSQL a buffer's newest entries are held in its header row, which the write updates
anyway, and move to the log's table in batches (decision 0148; reads merge both). It keeps a
buffer's newest ``KEPT`` entries (older ones are deleted in the same write), its bytes
count against the owner's quota (the ``bytes`` quota, as the buffer's), and it goes
with its buffer: ``clear``, a session's deletion and a user's erasure delete it in
their transaction (each back-end's ``_drop_buffer``).

``SupportsRepairs`` is a store capability, as ``store.repairs``: ``SqlRepairs``
(``sql.py``, the table and statements in ``sqlite.py`` and ``postgres.py``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from json.encoder import encode_basestring as _string
from typing import Any, Protocol, runtime_checkable

from flowmem.core import Repair, kind_of
from flowmem.errors import InvalidInputError
from flowmem.store.base import Address
from flowmem.store.rows import check_last, check_page, stored_json

KEPT = 1000
"""Entries a buffer's log keeps: the newest (docs/memory.md, docs/security.md)."""

PAGE = 50
"""Entries a page of the log holds unless asked for fewer or more (at most ``PAGE_MAX``)."""

PAGE_MAX = 1000

WRITING_RULES = ("MEM-3", "MEM-10")  # the rules that write a row the entry points at
REPLACING = "MEM-10"  # its row is the newest answering its call (a LangGraph line keeps the placeholder)


@dataclass(frozen=True)
class RepairEntry:
    """One entry of a buffer's repair log (the module docstring); ``seq`` numbers a buffer's entries from 1."""

    seq: int
    at: float
    rule: str
    call_ids: list[str]
    count: int
    positions: list[int] = field(default_factory=list)
    kind: str = ""
    archived: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", kind_of(self.rule))

    def same_as(self, repair: Repair) -> bool:
        """Whether this entry says what ``repair`` says (its time and number aside)."""
        return (self.rule, self.kind, self.call_ids, self.count) == (
            repair.rule,
            repair.kind,
            list(repair.call_ids),
            repair.count,
        )

    def to_dict(self) -> dict[str, object]:
        """The entry as the API answers it."""
        return {
            "seq": self.seq,
            "at": self.at,
            "rule": self.rule,
            "kind": self.kind,
            "call_ids": self.call_ids,
            "count": self.count,
            "positions": self.positions,
            "archived": None if self.archived is None else list(self.archived),
        }


@dataclass(frozen=True)
class RepairPage:
    """A page of a buffer's log, newest first; ``more``: older entries remain (ask ``before`` the last seq)."""

    entries: list[RepairEntry]
    more: bool = False


def entry_text(repair: Repair, at: float) -> str:
    """A repair's entry as stored JSON text (positions and archive numbers only when it has them).

    Written out, the same text ``json.dumps(…, ensure_ascii=False, separators=(",", ":"))``
    gives for the entry's dict (tests/store/test_repair_log_text.py checks it): the dict and
    its encoder cost more than the log's insert on SQLite (decision 0124). The rule's and
    kind's part is spelled once per pair (``_head``), the rest in one f-string (decision 0144).
    """
    text = (
        f'{{"at":{_number(at)}{_head(repair.rule, repair.kind)}'
        f'{",".join(map(_string, repair.call_ids))}],"count":{int(repair.count)}'
    )
    if repair.positions:
        text += f',"positions":[{",".join(map(str, map(int, repair.positions)))}]'
    if repair.archived is not None:
        text += f',"archived":[{",".join(map(str, map(int, repair.archived)))}]'
    return text + "}"


_HEADS: dict[tuple[str, str], str] = {}  # an entry's text between its time and its call ids, by (rule, kind)
_HEADS_KEPT = 256  # rules are the MEM ids, "window", "compaction" and refusal codes: a few dozen pairs


def _head(rule: str, kind: str) -> str:
    """``,"rule":…,"kind":…,"call_ids":[`` for a rule and kind, spelled once per pair."""
    found = _HEADS.get((rule, kind))
    if found is None:
        found = f',"rule":{_string(rule)},"kind":{_string(kind)},"call_ids":['
        if len(_HEADS) < _HEADS_KEPT:
            _HEADS[(rule, kind)] = found
    return found


def _number(at: float) -> str:
    """A time as JSON gives it (``repr``; json's own spelling for a non-finite one)."""
    return repr(float(at)) if math.isfinite(at) else json.dumps(at)


def entry_texts(repairs: Iterable[Repair], at: float) -> list[str]:
    """The log's entries for one write's repairs, as stored JSON texts, in the rules' order."""
    return [entry_text(r, at) for r in repairs]


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
    """An entry from its stored JSON text (one stored before kinds existed: its kind derived)."""
    return entry_of(seq, stored_json(text))


def held_entries(held: str, newest_kept: int) -> list[RepairEntry]:
    """The entries a header holds (``log_held``: texts newest first, each after a comma), oldest first.

    They are numbered after ``newest_kept``, the newest entry's number in the table
    (0 for none): the header holds the log's newest entries (decision 0148).
    """
    if not held:
        return []
    found = stored_json(f"[{held[1:]}]")
    return [entry_of(newest_kept + n, data) for n, data in enumerate(reversed(found), start=1)]


def entry_of(seq: int, data: dict[str, Any]) -> RepairEntry:
    """An entry from its stored JSON, parsed (``parse_entry``)."""
    archived = data.get("archived")
    return RepairEntry(
        seq,
        float(data["at"]),
        str(data["rule"]),
        [str(cid) for cid in data["call_ids"]],
        int(data["count"]),
        [int(pos) for pos in data.get("positions", [])],
        str(data.get("kind") or ""),
        None if not archived else (int(archived[0]), int(archived[1])),
    )


@runtime_checkable
class SupportsRepairs(Protocol):
    """Reads of the buffers' repair logs (see the module docstring)."""

    def page(self, address: Address, *, before: int | None = None, limit: int = PAGE) -> RepairPage:
        """The newest ``limit`` entries numbered below ``before`` (all when None), newest first."""
        ...

    def note(self, address: Address, repair: Repair) -> bool:
        """Log a change that wrote no row (a drop on a read, a refusal) in a transaction of its own.

        Nothing for a buffer that does not exist, or when its newest entry says the
        same already; nothing either when the owner's quota would refuse the entry
        (a read or a refusal never fails for its note). True when it logged.
        """
        ...
