"""Tool-pairing repair and conversation normalization (MEM-5).

Read this module beside the text of MEM-5 (spec/GR-MEM.md) and DESIGN.md §2b.
``normalize`` runs the rule's four steps in order, one function each:

1. ``_flat_rows``: each entry is coerced to a flat row; unreadable entries are dropped.
2. ``_systems_first``: system rows move to the front, both groups keep their order.
3. ``_repair``: tool pairing is repaired, in two scans: ``_Pairing`` decides which
   call each result answers and which rows go; ``_emit`` writes each turn followed
   by its results, moving late ones there and synthesizing the missing ones.
4. ``_strip_leading_tools``, then step 3 again.

The default mode runs steps 1 to 3 through ``fast.steps_1_to_3`` instead: the
same steps fused into one scan, kept for speed only (docs/decisions/0059) and proven equal to the plain steps by property tests
(tests/core/test_fast.py). Check the rule against the plain steps.

Pairing is positional (DESIGN.md §2b): a result answers a call only when it comes
after the turn that first declared the call. Everything works on flat rows; the
rows repair changes are rows this module made (fresh dicts), never the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from flowmem.core.fast import fast_entry_id, steps_1_to_3
from flowmem.core.messages import (
    ROLES,
    UNTEXTABLE_KINDS,
    Message,
    call_kind,
    coerce_content,
    given_calls,
    given_result_id,
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


def normalize(
    messages: object, *, keep_content: bool = False, systems_first: bool = True
) -> NormalizeResult:
    """Make a message list sendable to a provider and count what was dropped.

    Implements MEM-5, four steps in order: (1) coerce each entry to a flat row,
    dropping non-maps and entries without a known role; (2) move system rows to the
    front, both groups keeping their order; (3) repair tool pairing; (4) strip any
    tool row still leading the list and repair again. ``dropped`` is what the steps
    themselves counted: step 1's unreadable entries, each repair's removals and
    step 4's strips. A non-list input is an empty list. The input is never mutated;
    every row and list returned is new, while each tool call entry (a map nothing
    here changes) is passed through.

    ``keep_content=True`` gives provider-flat rows (decision 0021): step 1 keeps a
    list of parts (each part passed through, never reordered), ``extra`` and a tool
    row's ``is_error``; call entries keep their ``kind`` and ``extra``; a call of a
    kind that cannot take a text result (``computer``, ``mcp_approval``) that is
    unanswered, or answered only by a healed placeholder, is removed with that
    placeholder, each counted in ``dropped``. The default is MEM-5 as written; it
    runs steps 1 to 3 through their fast path (``fast.steps_1_to_3``).

    ``systems_first=False`` leaves step 2 out: every row keeps its place, and only
    what a provider taking system messages anywhere would reject is repaired
    (OpenAI Chat Completions and Responses). It is what the framework adapters
    hand back: a history as stored, repaired, never reordered (DESIGN §5,
    docs/decisions/0050).
    """
    entries = messages if isinstance(messages, list) else []
    if isinstance(messages, tuple):
        entries = list(messages)
    if keep_content or not systems_first:
        rows, dropped = _steps_1_to_3(entries, keep_content, systems_first)
    else:
        rows, dropped = steps_1_to_3(entries)
    rows, stripped = _strip_leading_tools(rows)  # step 4
    if stripped:
        rows, again = _repair(rows, keep_content)  # step 4: "rule (3) is applied again"
        dropped += stripped + again
    return NormalizeResult(rows, dropped)


def _steps_1_to_3(
    entries: list[Any], keep_content: bool, systems_first: bool = True
) -> tuple[list[Message], int]:
    """MEM-5 steps 1, 2 and 3 as the rule states them, one function each; rows and drops.

    Implements MEM-5 steps 1 to 3 (step 2 only when ``systems_first``).
    ``fast.steps_1_to_3`` is the same for the default mode, in one scan.
    """
    rows, unreadable, placeholders = _flat_rows(entries, keep_content)  # step 1
    if systems_first:
        rows = _systems_first(rows)  # step 2
    rows, repaired = _repair(rows, keep_content, placeholders)  # step 3
    return rows, unreadable + repaired


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
    repaired, dropped = _repair(rows, keep_content=False)
    return RepairResult(repaired, dropped + len(entries) - len(rows))


# -- step 1 ------------------------------------------------------------------


def _flat_rows(entries: list[Any], keep_content: bool) -> tuple[list[Message], int, set[int]]:
    """Coerce each entry to a flat row; return the rows, the count dropped, the placeholders.

    Implements MEM-5 step 1: "a non-list entry or one without a role is dropped"
    (a role flowmem does not know counts as none). The third value holds the
    ``id()`` of each tool row that came from a healed placeholder, which only
    ``keep_content`` repair needs (a placeholder cannot answer every call kind).
    """
    rows: list[Message] = []
    placeholders: set[int] = set()
    for entry in entries:
        row = _flat_row(entry, keep_content)
        if row is None:
            continue
        rows.append(row)
        if keep_content and row["role"] == "tool" and _is_placeholder(entry):
            placeholders.add(id(row))
    return rows, len(entries) - len(rows), placeholders


def _is_placeholder(entry: Mapping[str, Any]) -> bool:
    """Return True for a healed placeholder (``is_healed``), cheaply for a plain row."""
    return ("metadata" in entry or "healed" in entry) and is_healed(entry)


def _flat_row(entry: object, keep_content: bool) -> Message | None:
    """Return one entry as a new flat row, or None when MEM-5 step 1 drops it.

    Implements MEM-5 step 1 for one entry, as ``to_flat`` reads it: "a non-list
    entry or one without a role is dropped"; content is coerced (``_flat_content``).
    A tool row carries the id it answers and an assistant turn the calls it
    declares, as given; repair reads and settles them.
    """
    if type(entry) is not dict and not isinstance(entry, Mapping):  # the common case first
        return None
    role = entry.get("role")
    if not (isinstance(role, str) and role in _ROLE_SET):
        return None
    row: Message = {"role": role, "content": _flat_content(entry.get("content"), keep_content)}
    if role == "tool":
        row["tool_call_id"] = given_result_id(entry)
    if keep_content:
        _kept_fields(entry, row)
    if role == "assistant":
        calls = given_calls(entry)
        if calls is not None:
            row["tool_calls"] = calls
    return row


def _flat_content(content: object, keep_content: bool) -> Any:
    """Return content as a flat row carries it: text, or under ``keep_content`` a list of parts.

    Implements MEM-5 step 1: "content that is not a scalar is serialized to text
    rather than blanked, falling back to the empty string" (``coerce_content``).
    ``keep_content`` keeps a list of parts as a new list (decision 0021).
    """
    if type(content) is str:
        return content
    if keep_content and is_parts(content):
        return list(content)
    return coerce_content(content)


def _kept_fields(entry: Mapping[str, Any], row: Message) -> None:
    """Copy ``extra`` (a map) and, on a tool row, ``is_error`` (a bool) onto a flat row.

    Each is read at the top level first, else under ``metadata`` (where a stored
    row keeps them). Only ``keep_content`` normalization keeps them (decision 0021).
    """
    meta = entry.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        meta = None
    extra = entry.get("extra")
    if extra is None and meta is not None:
        extra = meta.get("extra")
    if extra is not None and isinstance(extra, Mapping):
        row["extra"] = dict(extra)
    if row["role"] == "tool":
        flag = entry.get("is_error")
        if flag is None and meta is not None:
            flag = meta.get("is_error")
        if type(flag) is bool:
            row["is_error"] = flag


# -- step 2 ------------------------------------------------------------------


def _systems_first(rows: list[Message]) -> list[Message]:
    """Move system rows to the front, the system group and the rest each in order.

    Implements MEM-5 step 2; "a system message is never dropped".
    """
    systems = [row for row in rows if row["role"] == "system"]
    if not systems:
        return rows
    return systems + [row for row in rows if row["role"] != "system"]


# -- step 3 ------------------------------------------------------------------


def _repair(
    rows: list[Message], keep_content: bool, placeholders: set[int] | None = None
) -> tuple[list[Message], int]:
    """Repair tool pairing over rows this module owns; return the rows and the count removed.

    Implements MEM-5 step 3: ``_Pairing`` settles who answers whom (the first
    declaration owns an id; orphan and duplicate results go), then ``_emit`` puts
    each result adjacent to its call, or a synthetic one where none came. The drop
    count is the one these two counted (MEM-5: "from the repair pass itself").
    """
    pairing = _Pairing(keep_content, placeholders or set())
    for index, row in enumerate(rows):
        role = row["role"]
        if role == "tool":
            pairing.take_result(index, row)
        elif role == "assistant":
            pairing.declare_calls(index, row)
        else:
            pairing.end_run()
    return _emit(rows, pairing)


class _Pairing:
    """Who answers whom, decided in one scan of the rows (MEM-5 step 3, DESIGN.md §2b).

    ``turn_ids`` maps a kept turn (its index) to the call ids it keeps, in order;
    ``answered`` holds every id that got its result; ``in_run`` the indexes of the
    results already sitting in their turn's result run (the tool rows right after
    it), and ``late`` the results that come after their turn but outside that run,
    by id; ``gone`` the turns dropped; ``dropped`` counts every removal.
    """

    def __init__(self, keep_content: bool, placeholders: set[int]) -> None:
        self.keep_content = keep_content
        self.placeholders = placeholders
        self.declared_at: dict[str, int] = {}  # call id -> index of its (first) turn
        self.turn_ids: dict[int, list[str]] = {}
        self.answered: set[str] = set()
        self.in_run: set[int] = set()
        self.late: dict[str, Message] = {}
        self.gone: set[int] = set()
        self.untextable: dict[str, Any] = {}  # call id -> its entry, kinds text cannot answer
        self.run_turn = -1  # the turn whose result run the scan is in, or -1
        self.dropped = 0

    def end_run(self) -> None:
        """A row that is not a tool row ends the current result run."""
        self.run_turn = -1

    def declare_calls(self, index: int, turn: Message) -> None:
        """Settle one assistant turn's calls; drop the turn if nothing is left.

        Implements MEM-5 step 3: "a tool call id declared a second time is dropped
        from the later turn, so the first declaration owns the pairing"; a call
        with no usable id (MEM-11, ``entry_id``) names no pairing and goes too. A
        turn left with no call and no content is dropped (DESIGN.md §2b).
        """
        self.run_turn = -1
        calls = turn.get("tool_calls")
        if calls is None and "metadata" in turn:
            calls = raw_tool_calls(turn)
        kept: list[Any] = []
        ids: list[str] = []
        if isinstance(calls, list):
            for call in calls:
                cid = fast_entry_id(call)
                if cid is None or cid in self.declared_at:
                    self.dropped += 1
                    continue
                self.declared_at[cid] = index
                kept.append(call if type(call) is dict else dict(call))
                ids.append(cid)
                if self.keep_content and call_kind(call) in UNTEXTABLE_KINDS:
                    self.untextable[cid] = kept[-1]
        if kept:
            turn["tool_calls"] = kept
            self.turn_ids[index] = ids
            self.run_turn = index
            return
        turn.pop("tool_calls", None)
        content = turn.get("content")
        if content == "" or content is None or (self.keep_content and is_empty_content(content)):
            self.gone.add(index)
            self.dropped += 1

    def take_result(self, index: int, result: Message) -> None:
        """Give a tool row to the call it answers, or drop it.

        Implements MEM-5 step 3: "an orphan or duplicate result is dropped": a
        result with no usable id, or whose id no earlier turn declared, is an
        orphan; a second result for an id is a duplicate. Under ``keep_content`` a
        healed placeholder cannot answer a call text cannot answer (decision 0021).
        The kept result carries the id as the call's own (trimmed) spelling.
        """
        raw = result.get("tool_call_id")
        rid = usable_call_id(raw)
        if rid is None and "metadata" in result:
            rid = result_id(result)
        if rid is None or rid not in self.declared_at or rid in self.answered:
            self.dropped += 1
            return
        if self.untextable and rid in self.untextable and id(result) in self.placeholders:
            self.dropped += 1
            return
        self.answered.add(rid)
        if raw != rid:
            result["tool_call_id"] = rid
        if self.declared_at[rid] == self.run_turn:
            self.in_run.add(index)
        else:
            self.late[rid] = result


def _emit(rows: list[Message], pairing: _Pairing) -> tuple[list[Message], int]:
    """Write the kept rows, each turn followed by one result per call; return them and the count.

    Implements MEM-5 step 3's adjacency: results already in their turn's run stay
    where they are; after the run, each call still unanswered there gets, in the
    order the turn declared them, its late result moved in (DESIGN.md §2b) or "a
    synthetic interrupted result adjacent to it" (``healed_flat``).
    """
    out: list[Message] = []
    open_ids: list[str] = []  # the calls of the turn whose result run is being written
    for index, row in enumerate(rows):
        if row["role"] == "tool":
            if index in pairing.in_run:
                out.append(row)
            continue
        if open_ids:
            _close_run(out, open_ids, pairing)
            open_ids = []
        if index in pairing.gone:
            continue
        ids = pairing.turn_ids.get(index)
        if ids and pairing.untextable:
            ids = _without_unanswerable(row, ids, pairing)
            if not ids and is_empty_content(row.get("content")):
                pairing.dropped += 1  # the turn had only calls no placeholder can answer
                continue
        out.append(row)
        if ids:
            open_ids = ids
    if open_ids:
        _close_run(out, open_ids, pairing)
    return out, pairing.dropped


def _close_run(out: list[Message], ids: list[str], pairing: _Pairing) -> None:
    """After a turn's result run, append the result of each of its calls not answered in it.

    Implements MEM-5 step 3: "an unanswered call gets a synthetic interrupted result
    adjacent to it"; a real result that came later is moved here instead.
    """
    for cid in ids:
        late = pairing.late.get(cid)
        if late is not None:
            out.append(late)
        elif cid not in pairing.answered:
            out.append(healed_flat(cid))


def _without_unanswerable(turn: Message, ids: list[str], pairing: _Pairing) -> list[str]:
    """Remove from a turn the calls no result answered whose kind text cannot answer.

    Decision 0021 (``keep_content`` only): a ``computer`` or ``mcp_approval`` call
    cannot take a synthetic text result, so instead of healing it, repair removes
    it from its turn (counted in ``dropped``). Returns the ids the turn keeps.
    """
    gone = [cid for cid in ids if cid in pairing.untextable and cid not in pairing.answered]
    if not gone:
        return ids
    pairing.dropped += len(gone)
    removed = [pairing.untextable[cid] for cid in gone]
    calls = [call for call in turn["tool_calls"] if not any(call is r for r in removed)]
    if calls:
        turn["tool_calls"] = calls
    else:
        del turn["tool_calls"]
    return [cid for cid in ids if cid not in gone]


# -- step 4 ------------------------------------------------------------------


def _strip_leading_tools(rows: list[Message]) -> tuple[list[Message], int]:
    """Strip the tool rows leading the list; return the rest and how many went.

    Implements MEM-5 step 4's first half ("any message still leading the list
    with role tool is stripped"); ``normalize`` then repairs again.
    """
    stripped = 0
    while stripped < len(rows) and rows[stripped]["role"] == "tool":
        stripped += 1
    return (rows[stripped:], stripped) if stripped else (rows, 0)
