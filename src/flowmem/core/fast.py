"""The core's speed twins: each does exactly what a plain rule does, faster, and names its oracle.

Nothing here is a rule of its own. Each function is the fused or inlined form of a
plain function elsewhere in the core, kept because a benchmark needs it
(docs/decisions/0059), and a property test proves the two equal on every input:

- ``fast_entry_id``: ``messages.entry_id`` (MEM-11), for the hot loops of MEM-5;
- ``steps_1_to_3``: ``normalize``'s steps 1 to 3 (MEM-5) in one scan, for its default mode;
- ``fast_row_facts``: ``window.row_facts`` (issue 28), for a token window's scan.

Check a rule against the plain version; change both, and the oracle tests tell.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from flowmem.core.messages import (
    ROLES,
    Message,
    coerce_content,
    entry_id,
    given_calls,
    given_result_id,
    healed_flat,
    usable_call_id,
)
from flowmem.core.window import RowFacts, row_facts

_ROLE_SET = frozenset(ROLES)


def fast_entry_id(call: object) -> str | None:
    """``entry_id`` with a plain dict holding string ids read inline, for the MEM-5 hot loops.

    Implements MEM-11 exactly as ``entry_id`` does. Oracle:
    ``tests/core/test_messages.py::test_mem_11_the_fast_reader_equals_entry_id_on_every_input`` (a
    hypothesis property over every input). Kept for speed only: normalize and
    ``check_sendable`` read one id per tool call entry (docs/decisions/0059).
    """
    if type(call) is dict:
        raw = call.get("tool_call_id")
        if type(raw) is str:
            text = raw.strip()
            if text and text != "0":
                return text
        elif raw is not None:
            found = usable_call_id(raw)
            if found is not None:
                return found
        raw = call.get("id")
        if type(raw) is str:
            text = raw.strip()
            return text if text and text != "0" else None
        return None if raw is None else usable_call_id(raw)
    return entry_id(call)


def fast_row_facts(row: object, tokens: int) -> RowFacts:
    """``window.row_facts`` with a stored row's ids read inline, for a token window's scan.

    Implements MEM-11 exactly as ``call_ids`` and ``result_id`` do (a stored row keeps
    its ids under ``metadata``; anything else takes the plain path). Oracle:
    ``tests/core/test_window.py::test_the_fast_row_facts_equal_row_facts_on_every_row``
    (a hypothesis property). Kept for speed only: a window reads each kept row's facts
    (docs/decisions/0081).
    """
    if type(row) is not dict:
        return row_facts(row, tokens)  # type: ignore[arg-type]
    role = row.get("role")
    if role == "user" or role == "system":
        return _facts((role, tokens, (), None))
    meta = row.get("metadata")
    if type(meta) is not dict:
        return row_facts(row, tokens)
    if role == "tool" and row.get("tool_call_id") is None:
        raw = meta.get("tool_call_id")
        if type(raw) is str:
            text = raw.strip()
            return _facts((role, tokens, (), text if text and text != "0" else None))
    elif role == "assistant" and row.get("tool_calls") is None:
        calls = meta.get("tool_calls")
        if calls is None:
            return _facts((role, tokens, (), None))  # a turn without calls: the common closing answer
        if type(calls) is list:
            seen: dict[str, None] = {}
            for call in calls:
                cid = fast_entry_id(call)
                if cid is not None:
                    seen.setdefault(cid, None)
            return _facts((role, tokens, tuple(seen), None))
    return row_facts(row, tokens)


# a RowFacts built in C (no call of its Python __new__): a window reads hundreds a call
_facts: Callable[[tuple[str, int, tuple[str, ...], str | None]], RowFacts] = functools.partial(
    tuple.__new__, RowFacts
)


_ANSWERED = -2  # in ``steps_1_to_3``: a declared call id whose result has been taken


def steps_1_to_3(entries: list[Any]) -> tuple[list[Message], int]:
    """MEM-5 steps 1, 2 and 3 for ``normalize``'s default mode, fused into one scan.

    Implements MEM-5 steps 1 to 3 exactly as ``normalize._steps_1_to_3(entries,
    keep_content=False)`` does. Oracle: tests/core/test_fast.py (hypothesis
    properties: the same rows and drop count). Kept for speed only: the plain steps
    cost the normalization parity with deepagents that issue 15 §5 requires
    (docs/decisions/0059 has the measurement).

    Where the plain steps make three passes (flat rows, systems first, pairing)
    and a fourth to emit, this scan reads each entry once: step 1 as
    ``_flat_row`` reads it; step 2 by setting system rows aside
    (they are put first at the end, so they never split a turn from its results);
    step 3 as ``_Pairing`` decides (``_declare_calls`` for a turn's calls), emitting
    a result at once when it sits in its turn's result run and keeping a late one
    aside. A turn whose run ends with calls unanswered is noted; ``splice_missing``
    then adds its late or synthetic results after its run, as ``_close_run`` does.
    """
    dropped = 0
    systems: list[Message] = []
    out: list[Message] = []
    declared_at: dict[str, int] = {}  # call id -> position of its turn in ``out``, or _ANSWERED
    late: dict[str, Message] = {}  # results outside their turn's run, by call id
    unfinished: list[tuple[int, list[str]]] = []  # (position in ``out`` after a run, its ids)
    run_ids: list[str] = []  # the kept call ids of ``run_turn``, in declaration order
    run_turn = -1  # the position in ``out`` of the turn whose result run the scan is in
    run_left = 0  # calls of ``run_turn`` not yet answered inside its run
    for entry in entries:
        # step 1: read the entry (``_flat_row``)
        if type(entry) is not dict and not isinstance(entry, Mapping):
            dropped += 1
            continue
        role = entry.get("role")
        if not isinstance(role, str) or role not in _ROLE_SET:
            dropped += 1
            continue
        content = entry.get("content")
        if type(content) is not str:
            content = coerce_content(content)
        if role == "tool":  # step 3: ``_Pairing.take_result``
            rid = entry.get("tool_call_id")  # MEM-11's usable id, the common string read inline:
            rid = rid.strip() if type(rid) is str else usable_call_id(given_result_id(entry))
            turn = declared_at.get(rid)  # type: ignore[arg-type]  # "", "0", None: never declared
            if turn is None or turn == _ANSWERED:
                dropped += 1  # an orphan (no usable id, no earlier declaration) or a duplicate
                continue
            declared_at[rid] = _ANSWERED  # type: ignore[index]  # a declared id: a str
            row: Message = {"role": role, "content": content, "tool_call_id": rid}
            if turn == run_turn:
                out.append(row)
                run_left -= 1
            else:
                late[rid] = row  # type: ignore[index]
            continue
        row = {"role": role, "content": content}
        if role == "system":  # step 2
            systems.append(row)
            continue
        if run_left:  # any other row ends the result run
            unfinished.append((len(out), run_ids))
            run_left = 0
        run_turn = -1
        if role == "assistant":  # step 3: ``_Pairing.declare_calls``
            kept, ids, refused = _declare_calls(given_calls(entry), declared_at, len(out))
            dropped += refused
            if kept:
                row["tool_calls"] = kept
                run_turn, run_ids, run_left = len(out), ids, len(kept)
            elif content == "":
                dropped += 1  # no usable call and no content left
                continue
        out.append(row)
    if run_left:
        unfinished.append((len(out), run_ids))
    return _assembled(systems, out, unfinished, late, declared_at), dropped


def _assembled(
    systems: list[Message],
    out: list[Message],
    unfinished: list[tuple[int, list[str]]],
    late: dict[str, Message],
    declared_at: dict[str, int],
) -> list[Message]:
    """The scan's rows: system rows first (step 2), each unfinished run closed (step 3)."""
    if unfinished:
        out = splice_missing(out, unfinished, late, declared_at)
    return systems + out if systems else out


def _declare_calls(
    calls: object, declared_at: dict[str, int], position: int
) -> tuple[list[Any], list[str], int]:
    """MEM-5 step 3 for a turn at ``position``: its kept calls, their ids, how many it drops.

    A call without a usable id, or with one declared before (the first owns it), is
    dropped; each kept id is noted in ``declared_at`` at the turn's position.
    """
    kept: list[Any] = []
    ids: list[str] = []
    if not isinstance(calls, list):
        return kept, ids, 0
    refused = 0
    for call in calls:
        cid = fast_entry_id(call)
        if cid is None or cid in declared_at:
            refused += 1
            continue
        declared_at[cid] = position
        kept.append(call if type(call) is dict else dict(call))
        ids.append(cid)
    return kept, ids, refused


def splice_missing(
    out: list[Message],
    unfinished: list[tuple[int, list[str]]],
    late: dict[str, Message],
    declared_at: dict[str, int],
) -> list[Message]:
    """Insert after each unfinished result run its calls' late or synthetic results.

    Implements MEM-5 step 3's adjacency for ``steps_1_to_3``, as
    ``_close_run`` does: in the order the turn declared them, each call not
    answered in its run gets its late result moved there, or "a synthetic
    interrupted result adjacent to it".
    """
    spliced: list[Message] = []
    done = 0
    for position, ids in unfinished:
        spliced.extend(out[done:position])
        done = position
        for cid in ids:
            moved = late.get(cid)
            if moved is not None:
                spliced.append(moved)
            elif declared_at[cid] != _ANSWERED:  # not answered in its run either
                spliced.append(healed_flat(cid))
    spliced.extend(out[done:])
    return spliced
