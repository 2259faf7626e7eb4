"""Tool-pairing repair and conversation normalization (MEM-5).

Pairing is positional (DESIGN.md §2b): a result answers a call only when it comes
after the turn that first declared the call. Everything works on flat rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from flowmem.core.messages import (
    ROLES,
    UNTEXTABLE_KINDS,
    Message,
    _fast_entry_id,
    call_kind,
    coerce_content,
    healed_flat,
    is_empty_content,
    is_healed,
    is_parts,
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


def _kept_fields(entry: Mapping[str, Any], row: Message) -> None:
    """Copy ``extra`` (a map) and, on a tool row, ``is_error`` (a bool) onto a flat row.

    Each is read at the top level first, else under ``metadata`` (where a stored
    row keeps them).
    """
    meta = entry.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    extra = entry.get("extra")
    if extra is None:
        extra = meta.get("extra")
    if isinstance(extra, Mapping):
        row["extra"] = dict(extra)
    if row["role"] == "tool":
        flag = entry.get("is_error")
        if flag is None:
            flag = meta.get("is_error")
        if type(flag) is bool:
            row["is_error"] = flag


def _repair_pass(
    entries: list[Any], coerce: bool, keep_content: bool = False
) -> tuple[list[Message], int]:
    """The one tool-pairing repair pass (MEM-5 step 3), in a single scan.

    With ``coerce`` (normalization), steps 1 and 2 ride along: each entry is read
    as ``to_flat`` reads it, unreadable entries are dropped and counted, and
    system rows are set aside and put first, so they never split a turn from its
    results. Without it, ``entries`` are rows this module owns (fresh dicts it may
    change) and system rows stay where they are.

    With ``keep_content`` (provider normalization, decision 0021), step 1 keeps a
    list of parts as it is (the list is new, each part passed through) and keeps
    ``extra`` and a tool row's ``is_error``; and a call whose kind cannot take a
    text result (``UNTEXTABLE_KINDS``) is never healed: a healed placeholder
    answering it is dropped, and, left unanswered, the call itself is removed from
    its turn (each counted in ``dropped``).

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
    untextable: dict[str, tuple[Message, Any]] = {}  # call id -> (its turn's row, the call)
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
                if keep_content and is_parts(content):
                    content = list(content)
                else:
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
                rid = usable_call_id(raw)
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
            if untextable and rid in untextable and is_healed(entry):
                dropped += 1  # a text placeholder cannot answer this kind: it stays unanswered
                continue
            declared_at[rid] = _ANSWERED
            if coerce:
                row: Message = {"role": role, "content": content, "tool_call_id": rid}
                if keep_content:
                    _kept_fields(entry, row)
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
            if keep_content:
                _kept_fields(entry, row)
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
                cid = _fast_entry_id(call)
                if cid is None or cid in declared_at:
                    dropped += 1  # no usable id, or declared before: the first owns it
                    continue
                declared_at[cid] = turn
                kept.append(call if type(call) is dict else dict(call))
                ids.append(cid)
                if keep_content and call_kind(call) in UNTEXTABLE_KINDS:
                    untextable[cid] = (row, kept[-1])
        if kept:
            row["tool_calls"] = kept
            run_left = len(kept)
            run_ids = ids
            emit(row)
            continue
        run_turn = -1  # a turn without calls has no result run
        if not coerce:
            row.pop("tool_calls", None)
        content = row.get("content")
        if content == "" or content is None or (keep_content and is_empty_content(content)):
            dropped += 1  # no usable call and no content left
            continue
        emit(row)
    if run_left:
        unfinished.append((len(out), run_ids))

    if unfinished:
        spliced: list[Message] = []
        emptied: list[Message] = []  # turns left with no call and no content
        done = 0
        for position, turn_ids in unfinished:
            spliced.extend(out[done:position])
            done = position
            for cid in turn_ids:
                moved = late.get(cid)
                if moved is not None:
                    spliced.append(moved)
                elif declared_at[cid] == _ANSWERED:
                    continue
                elif cid in untextable:
                    dropped += 1  # unanswerable by a placeholder: the call goes
                    if _remove_call(*untextable[cid]):
                        emptied.append(untextable[cid][0])
                else:
                    spliced.append(healed_flat(cid))
        spliced.extend(out[done:])
        out = spliced
        if emptied:
            dropped += len(emptied)
            out = [row for row in out if not any(row is gone for gone in emptied)]
    if systems:
        out = systems + out
    return out, dropped


def _remove_call(turn: Message, call: Any) -> bool:
    """Remove ``call`` from its turn; return True when the turn is left with nothing."""
    calls = [kept for kept in turn["tool_calls"] if kept is not call]
    if calls:
        turn["tool_calls"] = calls
        return False
    del turn["tool_calls"]
    return is_empty_content(turn.get("content"))


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


def normalize(messages: object, *, keep_content: bool = False) -> NormalizeResult:
    """Make a message list sendable to a provider and count what was dropped.

    Implements MEM-5, four steps in order: (1) coerce each entry to a flat row,
    dropping non-maps and entries without a known role; (2) move system rows to the
    front, both groups keeping their order; (3) repair tool pairing; (4) strip any
    tool row still leading the list and repair again. Steps 1 and 2 run inside the
    scan of the repair pass (``_repair_pass``); ``dropped`` is what that pass
    counted, plus step 4's strips and its second repair. A non-list input is an
    empty list. The input is never mutated; every row and list returned is new,
    while each tool call entry (a map nothing here changes) is passed through.

    ``keep_content=True`` gives provider-flat rows (decision 0021): step 1 keeps a
    list of parts (each part passed through, never reordered), ``extra`` and a tool
    row's ``is_error``; call entries keep their ``kind`` and ``extra``; a call of a
    kind that cannot take a text result (``computer``, ``mcp_approval``) that is
    unanswered, or answered only by a healed placeholder, is removed with that
    placeholder, each counted in ``dropped``. The default is MEM-5 as written.
    """
    entries = messages if isinstance(messages, list) else []
    if isinstance(messages, tuple):
        entries = list(messages)
    rows, dropped = _repair_pass(entries, coerce=True, keep_content=keep_content)
    stripped = 0
    while stripped < len(rows) and rows[stripped]["role"] == "tool":
        stripped += 1
    if stripped:
        rows, again = _repair_pass(rows[stripped:], coerce=False, keep_content=keep_content)
        dropped += stripped + again
    return NormalizeResult(rows, dropped)
