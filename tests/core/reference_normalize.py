"""The straightforward MEM-5 repair/normalize, kept as an oracle for the optimized core.

This is the first implementation of ``flowmem.core.normalize`` (three plain passes).
The core was later rewritten for speed (bench/core.py); ``test_normalize_reference``
checks on generated histories that both give the same rows and the same drop count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from flowmem.core.messages import (
    ROLES,
    Message,
    entry_id,
    healed_flat,
    raw_tool_calls,
    result_id,
    to_flat,
)


class RepairResult(NamedTuple):
    """Repaired flat rows and how many entries (messages or calls) repair removed."""

    messages: list[Message]
    dropped: int


class NormalizeResult(NamedTuple):
    """Normalized flat rows and how many entries normalization removed in all."""

    messages: list[Message]
    dropped: int


def _kept_calls(turn: Message, declared: set[str]) -> tuple[list[Any], list[str], int]:
    """Return the calls a turn keeps, their ids, and how many were removed.

    A call without a usable id names no pairing and is removed; an id declared
    earlier (in an earlier turn or earlier in this one) is removed from this turn,
    so the first declaration owns the pairing.
    """
    kept: list[Any] = []
    ids: list[str] = []
    removed = 0
    for call in raw_tool_calls(turn):
        cid = entry_id(call)
        if cid is None or cid in declared:
            removed += 1
            continue
        declared.add(cid)
        kept.append(call)
        ids.append(cid)
    return kept, ids, removed


def repair_tool_pairing(messages: Iterable[Mapping[str, Any]]) -> RepairResult:
    """Repair tool pairing so every call has exactly one adjacent result.

    Implements MEM-5 step 3 (the procedure a reasoner applies mid-loop): a call id
    declared a second time is removed from the later turn; an assistant turn left
    with no usable call and no content is dropped; an orphan result (before any
    declaration of its id, or with no usable id) and a duplicate result are
    dropped; a real result outside its call's result run is moved into it; an
    unanswered call gets a synthetic interrupted result adjacent to it. Input rows
    are flat; they are not mutated. An entry that is not a map with a known role is
    dropped. ``dropped`` counts removed messages and calls.
    """
    entries = list(messages)
    rows = [dict(m) for m in entries if isinstance(m, Mapping) and m.get("role") in ROLES]
    dropped = len(entries) - len(rows)
    declared: set[str] = set()
    turn_ids: dict[int, list[str]] = {}
    keep: list[bool] = [True] * len(rows)

    # Pass 1: settle each assistant turn's calls (first declaration wins).
    for index, row in enumerate(rows):
        if row.get("role") != "assistant":
            continue
        kept, ids, removed = _kept_calls(row, declared)
        dropped += removed
        if kept:
            row["tool_calls"] = kept
            turn_ids[index] = ids
            continue
        row.pop("tool_calls", None)
        if row.get("content") in ("", None):
            keep[index] = False
            dropped += 1

    # Pass 2: give each declared id its first result that comes after the turn.
    declared_at: dict[str, int] = {cid: i for i, ids in turn_ids.items() for cid in ids}
    assigned: dict[str, int] = {}
    for index, row in enumerate(rows):
        if row.get("role") != "tool":
            continue
        keep[index] = False
        rid = result_id(row)
        if rid is None or declared_at.get(rid, index) >= index or rid in assigned:
            dropped += 1
            continue
        assigned[rid] = index

    # Pass 3: emit each turn followed by its result run.
    out: list[Message] = []
    for index, row in enumerate(rows):
        if not keep[index]:
            continue
        out.append(row)
        ids = turn_ids.get(index, [])
        if not ids:
            continue
        run_end = index + 1
        while run_end < len(rows) and rows[run_end].get("role") == "tool":
            run_end += 1
        in_run = sorted(
            (assigned[cid], cid) for cid in ids if index < assigned.get(cid, -1) < run_end
        )
        placed = {cid for _, cid in in_run}
        for position, cid in in_run:
            out.append(_answer(rows[position], cid))
        for cid in ids:
            if cid in placed:
                continue
            late = assigned.get(cid)
            out.append(healed_flat(cid) if late is None else _answer(rows[late], cid))
    return RepairResult(out, dropped)


def _answer(row: Message, call_id: str) -> Message:
    """Return a result row answering ``call_id`` under its canonical id."""
    answered = dict(row)
    answered["tool_call_id"] = call_id
    return answered


def normalize(messages: object) -> NormalizeResult:
    """Make a message list sendable to a provider and count what was dropped.

    Implements MEM-5, four steps in order: (1) coerce each entry to a flat row,
    dropping non-maps and entries without a known role; (2) move system rows to the
    front, both groups keeping their order; (3) repair tool pairing; (4) strip any
    tool row still leading the list and repair again. ``dropped`` sums the removals
    of step 1, both repair passes and step 4. A non-list input is an empty list.
    """
    entries = list(messages) if isinstance(messages, (list, tuple)) else []
    flat = [row for entry in entries if (row := to_flat(entry)) is not None]
    dropped = len(entries) - len(flat)
    systems = [row for row in flat if row["role"] == "system"]
    others = [row for row in flat if row["role"] != "system"]
    repaired = repair_tool_pairing(systems + others)
    rows, dropped = repaired.messages, dropped + repaired.dropped
    stripped = 0
    while rows and rows[0]["role"] == "tool":
        rows = rows[1:]
        stripped += 1
    if stripped:
        again = repair_tool_pairing(rows)
        rows, dropped = again.messages, dropped + stripped + again.dropped
    return NormalizeResult(rows, dropped)
