"""Tool-pairing repair and conversation normalization (MEM-5).

Pairing is positional (DESIGN.md §2b): a result answers a call only when it comes
after the turn that first declared the call. Everything works on flat rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from flowmem.core.messages import (
    ROLES,
    Message,
    coerce_content,
    entry_id,
    healed_flat,
    raw_tool_calls,
    result_id,
    usable_call_id,
)


class RepairResult(NamedTuple):
    """Repaired flat rows and how many entries (messages or calls) repair removed."""

    messages: list[Message]
    dropped: int


class NormalizeResult(NamedTuple):
    """Normalized flat rows and how many entries normalization removed in all."""

    messages: list[Message]
    dropped: int


_ROLE_SET = frozenset(ROLES)
_ANSWERED = -2  # marks a declared call id whose result has been taken


def _is_role(role: object) -> bool:
    """Return True for a known role given as a ``str`` subclass (the rare case)."""
    return isinstance(role, str) and role in _ROLE_SET


def _repair_pass(entries: list[Any], coerce: bool) -> tuple[list[Message], int]:
    """The one tool-pairing repair pass (MEM-5 step 3), in a single scan.

    With ``coerce`` (normalization), steps 1 and 2 ride along: each entry is read
    as ``to_flat`` reads it, unreadable entries are dropped and counted, and
    system rows are set aside and put first, so they never split a turn from its
    results. Without it, ``entries`` are rows this module owns (fresh dicts it may
    change) and system rows stay where they are.

    The scan settles each assistant turn's calls (the first declaration of an id
    owns it; unusable and repeated ids are removed), gives each declared id its
    first result that comes after the declaring turn, and emits the kept rows with
    the results already sitting in their turn's result run. A turn whose run ends
    with calls still unanswered is noted; afterwards its missing results are
    spliced in after its run, in declaration order: each a late result moved
    there, or a synthetic one.
    """
    dropped = 0
    systems: list[Message] = []
    declared_at: dict[str, int] = {}  # call id -> index of its turn, or _ANSWERED
    late: dict[str, Message] = {}  # answered outside the run of its turn: to be moved
    out: list[Message] = []
    emit = out.append
    unfinished: list[tuple[int, list[str]]] = []  # (position in out after the run, its ids)
    run_ids: list[str] = []  # the kept call ids of ``run_turn``, in declaration order
    run_turn = -1  # the assistant turn whose result run the scan is in, or -1
    run_left = 0  # its calls not yet answered inside the run
    for entry in entries:
        if coerce:
            # step 1: read the entry as ``to_flat`` does
            if type(entry) is not dict and not isinstance(entry, Mapping):
                dropped += 1
                continue
            role = entry.get("role")
            if role not in _ROLE_SET if type(role) is str else not _is_role(role):
                dropped += 1
                continue
            content = entry.get("content")
            if type(content) is not str:
                content = coerce_content(content)
        else:
            role = entry["role"]

        if role == "tool":
            raw = entry.get("tool_call_id")
            if coerce:
                if raw is None:
                    meta = entry.get("metadata")
                    if isinstance(meta, Mapping):
                        raw = meta.get("tool_call_id")
                # a blank or "0" id is never declared, so it needs no test of its own
                rid = raw.strip() if type(raw) is str else usable_call_id(raw)
            else:
                rid = usable_call_id(raw)
                if rid is None and "metadata" in entry:
                    rid = result_id(entry)
            if rid is None:
                dropped += 1  # no usable id: it answers nothing
                continue
            turn = declared_at.get(rid)
            if turn is None or turn == _ANSWERED:
                dropped += 1  # an orphan (no earlier declaration, or a blank id) or a duplicate
                continue
            declared_at[rid] = _ANSWERED
            if coerce:
                row: Message = {"role": role, "content": content, "tool_call_id": rid}
            else:
                row = entry
                if raw != rid:
                    row["tool_call_id"] = rid
            if turn == run_turn:
                emit(row)
                run_left -= 1
            else:
                late[rid] = row
            continue

        if coerce:
            row = {"role": role, "content": content}
            if role == "system":  # step 2: systems go first
                systems.append(row)
                continue
        else:
            row = entry
        if run_left:
            unfinished.append((len(out), run_ids))
            run_left = 0
        if role != "assistant":
            run_turn = -1
            emit(row)
            continue
        run_turn = turn = len(out)  # a kept turn is known by its position in ``out``
        calls = entry.get("tool_calls")
        if calls is None and "metadata" in entry:
            calls = raw_tool_calls(entry)
        kept: list[Any] = []
        ids: list[str] = []
        if isinstance(calls, list):
            for call in calls:
                # ``entry_id`` (MEM-11), with the plain dict case first
                if type(call) is dict:
                    cid = None
                    raw = call.get("tool_call_id")
                    if type(raw) is str:
                        cid = raw.strip()
                        if not cid or cid == "0":
                            cid = None
                    elif raw is not None:
                        cid = usable_call_id(raw)
                    if cid is None:
                        raw = call.get("id")
                        if type(raw) is str:
                            cid = raw.strip()
                            if not cid or cid == "0":
                                cid = None
                        elif raw is not None:
                            cid = usable_call_id(raw)
                else:
                    cid = entry_id(call)
                if cid is None or cid in declared_at:
                    dropped += 1  # no usable id, or declared before: the first owns it
                    continue
                declared_at[cid] = turn
                kept.append(call if type(call) is dict else dict(call))
                ids.append(cid)
        if kept:
            row["tool_calls"] = kept
            run_left = len(kept)
            run_ids = ids
            emit(row)
            continue
        run_turn = -1  # a turn without calls has no result run
        if not coerce:
            row.pop("tool_calls", None)
        if row.get("content") in ("", None):
            dropped += 1  # no usable call and no content left
            continue
        emit(row)
    if run_left:
        unfinished.append((len(out), run_ids))

    if unfinished:
        spliced: list[Message] = []
        done = 0
        for position, turn_ids in unfinished:
            spliced.extend(out[done:position])
            done = position
            for cid in turn_ids:
                moved = late.get(cid)
                if moved is not None:
                    spliced.append(moved)
                elif declared_at[cid] != _ANSWERED:
                    spliced.append(healed_flat(cid))
        spliced.extend(out[done:])
        out = spliced
    if systems:
        out = systems + out
    return out, dropped


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
    repaired, dropped = _repair_pass(rows, coerce=False)
    return RepairResult(repaired, dropped + len(entries) - len(rows))


def normalize(messages: object) -> NormalizeResult:
    """Make a message list sendable to a provider and count what was dropped.

    Implements MEM-5, four steps in order: (1) coerce each entry to a flat row,
    dropping non-maps and entries without a known role; (2) move system rows to the
    front, both groups keeping their order; (3) repair tool pairing; (4) strip any
    tool row still leading the list and repair again. Steps 1 and 2 run inside the
    scan of the repair pass (``_repair_pass``); ``dropped`` is what that pass
    counted, plus step 4's strips and its second repair. A non-list input is an
    empty list. The input is never mutated; every row and list returned is new,
    while each tool call entry (a map nothing here changes) is passed through.
    """
    entries = messages if isinstance(messages, list) else []
    if isinstance(messages, tuple):
        entries = list(messages)
    rows, dropped = _repair_pass(entries, coerce=True)
    stripped = 0
    while stripped < len(rows) and rows[stripped]["role"] == "tool":
        stripped += 1
    if stripped:
        rows, again = _repair_pass(rows[stripped:], coerce=False)
        dropped += stripped + again
    return NormalizeResult(rows, dropped)
