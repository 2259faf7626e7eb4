"""What PostgreSQL's pipelined append asks ahead, and the editor its answer seeds.

``asked_of``: the call ids the incoming rows name (the facts query fetches them in the
lock's round trip); ``seeded_editor``: the append's ``SqlBufferEditor`` knowing those
facts; ``known_of``: what ``buffer_known`` read, kept for the next one-round-trip
append (decision 0039).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowmem.core import Answer, Message, call_ids, result_id
from flowmem.store.base import Address
from flowmem.store.editor import CARRIED_ROW, SqlBufferEditor, SqlRunner
from flowmem.store.known import MAX_KNOWN_OPEN, Known
from flowmem.store.postgres.after import open_of
from flowmem.store.postgres.pipeline import WRITES, splits


def known_of(found: list[tuple[Any, ...]]) -> Known | None:
    """What ``buffer_known`` read (None: no buffer there, or more open calls than are kept)."""
    if not found:
        return None
    bid, version, count, last_major, size, listed, rows, tail_bytes, tokens, room = found[0]
    open_ids = open_of(str(listed))
    if len(open_ids) > MAX_KNOWN_OPEN:
        return None
    head = (int(bid), int(version), int(count), int(last_major), int(size))
    tail = (int(rows), int(tail_bytes), int(tokens), None if room is None else int(room))
    return Known(*head, open_ids, str(listed), *tail)


class _Listed:
    """The append's runner for its editor: the header's list of open calls as the facts read it.

    The facts are read after the lock, in the append's transaction, and the editor asks
    for the list once (before any write of its own to it): no round trip for it.
    """

    def __init__(self, db: SqlRunner, listed: str) -> None:
        self.db = db
        self.listed = listed

    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """The list as read with the facts; any other statement run."""
        if name == "open_list":
            return (self.listed,)
        return self.db.one(name, params)

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a statement and return every row."""
        return self.db.all(name, params)

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Run (queue) a write."""
        self.db.run(name, params)


def asked_of(rows: list[Message]) -> tuple[list[str], bool]:
    """The call ids the incoming rows name, and whether one is a user turn (it heals).

    What the append's one facts query fetches ahead; a question it did not foresee
    is asked by the editor as before, so this guesses cost, never results.
    """
    ids: dict[str, None] = {}
    want_open = False
    for row in rows:
        for cid in call_ids(row):
            ids[cid] = None
        rid = result_id(row)
        if rid is not None:
            ids[rid] = None
        want_open = want_open or row.get("role") == "user"
    return list(ids), want_open


def seeded_editor(
    db: SqlRunner,
    address: Address,
    facts: tuple[Any, ...] | None,
    ids: list[str],
    want_open: bool = False,
) -> SqlBufferEditor:
    """The append's editor, seeded with the row of ``append_facts`` (None: no buffer yet).

    ``want_open``: the facts hold the open calls (NULL there is none open).
    """
    if facts is None:
        editor = SqlBufferEditor(db, address, None)
        editor.skips = True  # a plain append may leave the header unwritten (decision 0195)
        editor.know(dict.fromkeys(ids, False), dict.fromkeys(ids), [], evicted=dict.fromkeys(ids, False))
        return editor
    # the header's five columns, and an answer's row carries its declaration (migration 34);
    # the tail's rows and tokens and the room (decision 0195: the facts' last three columns)
    head = (*facts[:5], CARRIED_ROW, *facts[7:10])
    editor = SqlBufferEditor(_Listed(db, str(facts[4])), address, head)
    editor.skips = True
    declared = dict.fromkeys(ids, False)
    answers: dict[str, Answer | None] = dict.fromkeys(ids)
    evicted = dict.fromkeys(ids, False)
    # a declaration is a row's or, since migration 34 (decision 0190), the header's list's
    # (an open call's only entry): the facts read the rows, the list is read here
    listed = open_of(str(facts[4])) if facts[5] and facts[4] != "[]" else frozenset()
    for cid, is_declared, pos, healed, was_evicted in facts[5] or ():
        declared[cid] = bool(is_declared) or cid in listed
        evicted[cid] = bool(was_evicted)
        if pos is not None:
            answers[cid] = Answer(int(pos), bool(healed))
    open_calls = None
    following: dict[int, int | None] = {}
    if want_open:  # grouped by declaring turn: (its ids, its position, run end, next row)
        found = facts[6] or ()
        open_calls = [(str(cid), int(pos), int(end)) for ids, pos, end, _ in found for cid in ids]
        following = {int(end): None if n is None else int(n) for _, _, end, n in found}
    editor.know(declared, answers, open_calls, following, evicted)
    return editor


def known_statements(
    check: str, checked: Sequence[Any], writes: Sequence[tuple[str, Sequence[Any]]]
) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements of an append on known facts after its lock: the check folded into the writes.

    Decision 0165: the writes' ``?`` variants grouped as ``Pipeline.run`` would send
    them (``_grouped``); the first statement is ``known_check…`` (the check, a
    CTE), its group and ``known_verdict`` (its rows: the verdict and the guard's);
    each later one ``known_again`` (the verdict the check set) and its group.
    ``check``: ``known_check`` or one of its variants; ``checked``: its parameters.
    """
    groups = _grouped(writes)
    first, *later = groups
    params: list[Any] = [*checked]
    for _, given in first:
        params.extend(given)
    names = "+".join([check, *(f"{name}?" for name, _ in first), "known_verdict"])
    statements = [(names, tuple(params))]
    for group in later:
        names = "+".join(["known_again", *(f"{name}?" for name, _ in group)])
        statements.append((names, tuple(value for _, given in group for value in given)))
    return statements


def _grouped(writes: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[str, Sequence[Any]]]]:
    """The writes in the statements ``Pipeline.run`` would send them in (``WRITES``' rule).

    A write starts a statement of its own when it touches a table an earlier one of the
    statement writes, or writes one an earlier one reads.
    """
    groups: list[list[tuple[str, Sequence[Any]]]] = [[]]
    reads: frozenset[str] = frozenset()
    wrote: frozenset[str] = frozenset()
    for name, params in writes:
        touched = WRITES[f"{name}?"]
        if splits(touched, reads, wrote):
            groups.append([])
            reads, wrote = frozenset(), frozenset()
        groups[-1].append((name, params))
        reads |= touched[0]
        wrote |= touched[1]
    return groups


__all__ = ["asked_of", "known_of", "known_statements", "seeded_editor"]
