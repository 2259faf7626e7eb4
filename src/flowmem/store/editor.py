"""``BufferEditor`` over SQL tables: one row per message plus a tool-call index.

The append rules stay in ``flowmem.core.apply_append``; this editor only answers
its questions with indexed queries and applies its writes, inside a transaction
the backend has opened. The SQL text lives in each backend module; the editor
names statements and the backend's ``SqlRunner`` runs them.

Positions encode ``(major << 20) | minor``: an appended row gets the next major
with minor 0; rows inserted after a row take the minors that follow it, so
healed placeholders land right after their turn without renumbering the buffer.

Tables (per backend): ``buffers`` (header: id, address, count, last major, and
``bytes``: the UTF-8 size of every row's JSON body, kept by this editor so a
buffer limit costs nothing to check),
``buffer_rows`` (buffer_id, pos, role, body JSON), ``buffer_calls`` (every
declaration: call id, declaring pos, order in the turn, answered flag),
``buffer_answers`` (every tool row with a usable id: call id, pos, healed) and
``buffer_evicted`` (the call ids of turns the window evicted, numbered in the order
they were remembered: the latest ``EVICTED_CALLS_KEPT`` are kept).

Where a buffer's header has a fifth column (SQLite since its migration 23, decision
0137; PostgreSQL since its 26, decision 0153, which takes a row's call ids without
storing them), the backend *lists* its unanswered calls there instead of flagging and
indexing them: the header's ``unanswered`` is a JSON list of ``[call id, declaring
position, order]``, which this editor keeps in memory across its writes and writes
once per flush, with the header; each row's call ids go with the row (``row_insert``'s
and ``row_update``'s last parameter) and no answered flag is written. An append then
writes its row, its header and, for a call or a result, the one entry that finds it
by id (MEM-1): no index by position, no partial index of the open calls.

Where the header has a sixth column (SQLite since its migration 28, decision 0180), the
list is an open call's only entry: a declaration is written to ``buffer_calls`` only
when its call is answered already, and the answer of a listed call *carries* the
declaration it answers (``buffer_answers.declared_pos`` and ``ord``): one entry for
both. Every declaration is then in exactly one place: the list (its call unanswered),
an entry of its own, or an answer's entry. A removal gives back what it carried: to the
list when the call has no answer left, else to an entry of its own.

The sixth column's value says how an answer carries its declaration (``CARRIED_ENTRY``,
``CARRIED_ROW``): SQLite's answers are entries of another table than the declarations,
so a removed row's carried declarations are cleared (``answer_uncarry``) and moved
(``shift_carried``, ``unflip_carried``) by statements of their own; PostgreSQL's are
its tool rows themselves (since its migration 35, decision 0194): an answer is found by a
key on the rows' call ids, and the declaration it carries is in its row's own columns, both
written with the row (``row_insert``'s and ``row_update``'s last three parameters: no
statement of its own), read back before the row goes or is replaced (``answer_carried``) and moved by
``shift_carried`` (no flip); ``calls_delete`` clears it with a row's declarations.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from flowmem.core import (
    EVICTED_CALLS_KEPT,
    Answer,
    Dangling,
    Message,
    PositionedRow,
    call_ids,
    is_healed,
    result_id,
)
from flowmem.core.tokens import estimate_tokens
from flowmem.errors import StoreError
from flowmem.store.base import Address
from flowmem.store.headers import TAIL_ROWS
from flowmem.store.rows import DumpedRow, dump_json, stored_json, utf8_size

MINOR_BITS = 20
# ``json.dumps(..., separators=(",", ":"))``'s text, its encoder made once: ``dumps`` makes
# one per call when given an argument (about 3 us of each of the listing writes' calls)
_compact = json.JSONEncoder(separators=(",", ":")).encode


# how an answer carries its declaration (the header's sixth column, decision 0190): in its
# own entry's columns, a table apart from the declarations (SQLite, decision 0180), or as one
# row holding both, which the declarations' own statements find (PostgreSQL's buffer_call_ids)
CARRIED_ENTRY, CARRIED_ROW = 1, 2

# an insert in the middle of a turn moves these (``insert_after``), by whether answers carry
# their declarations (decision 0180): then the carried ones move too
_SHIFTS = {
    False: ("shift_rows", "shift_calls", "shift_answers"),
    True: ("shift_rows", "shift_calls", "shift_carried", "shift_answers"),
}
_UNFLIPS = {
    False: ("unflip_calls", "unflip_answers", "unflip_rows"),
    True: ("unflip_calls", "unflip_carried", "unflip_answers", "unflip_rows"),
}
# ... where an answer is its row (``CARRIED_ROW``): the rows move their answers, the carried
# declarations move on in one step
_ROW_SHIFTS = ("shift_rows", "shift_calls", "shift_carried")
_ROW_UNFLIPS = ("unflip_calls", "unflip_rows")


def header_skipped(tail_rows: int, size: int, room: int | None) -> bool:
    """Whether an append that only added rows at the end may leave the header unwritten (decision 0195).

    ``tail_rows``: the rows past the header's last write, this append's included; ``size``:
    the buffer's bytes after it; ``room``: what an owned buffer may grow to unwritten (its
    reservation less its log's bytes; -1 under a bytes quota), None for a buffer owned by
    nobody. The header is written once the tail reaches ``TAIL_ROWS`` (readers sum at most
    ``TAIL_ROWS - 1`` rows) or the bytes pass the room (the reservation's trigger runs on it).
    """
    return tail_rows < TAIL_ROWS and (room is None or size <= room)


class SqlRunner(Protocol):
    """Runs a named statement of a backend inside its open transaction."""

    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run a statement and return its first row (or None)."""
        ...

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a statement and return every row."""
        ...

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Run a statement for its effect."""
        ...


def dump_row(row: Message) -> str:
    """Serialize a stored row to JSON text; NotSerializableError when it cannot be.

    A ``DumpedRow`` (the service's prepared rows, decision 0161) already holds it.
    """
    if type(row) is DumpedRow:
        return row.text
    return dump_json(row, "message")


def load_row(body: str) -> Message:
    """Parse a stored row."""
    row: Message = stored_json(body)
    return row


def load_rows(bodies: list[tuple[str]]) -> list[Message]:
    """Parse many stored rows at once (one JSON array: about 3x faster than row by row)."""
    if not bodies:
        return []
    rows: list[Message] = stored_json("[" + ",".join(body for (body,) in bodies) + "]")
    return rows


_ASK = object()  # ``head`` not given: the editor reads the header itself


class SqlBufferEditor:
    """``flowmem.core.BufferEditor`` for one buffer, over indexed SQL, in one transaction.

    Every method touches only the rows it names (by primary key or a partial
    index); nothing reads the whole buffer. Call ``flush`` before committing.

    A backend that fetched the header and some answers ahead (one query instead of
    one per question: ``head`` and ``know``) hands them over; the editor answers
    from them while they are exact and asks the database otherwise. They are
    facts about the stored buffer, not rules: the rules stay in ``apply_append``.
    """

    skips = False
    """Whether ``flush`` may leave the header unwritten (``header_skipped``): PostgreSQL's appends set it."""

    def __init__(self, db: SqlRunner, address: Address, head: Any = _ASK) -> None:
        self._db = db
        self._address = address
        fresh = head is _ASK  # read here: a listed header's calls are as this transaction has them
        if head is _ASK:
            head = db.one("header_get", tuple(address))
        # known answers, kept exact across this editor's own writes (else dropped)
        self._declared: dict[str, bool] = {}
        self._answers: dict[str, Answer | None] = {}
        self._evicted: dict[str, bool] = {}
        self._open: list[tuple[str, int, int]] | None = None  # (call id, declared, run end)
        self._next: dict[int, int | None] = {}  # position -> the next row's (until a write)
        self._id: int | None = None
        self._count = 0
        self._last = 0
        self._bytes = 0
        if head is not None:
            self._id, self._count, self._last = int(head[0]), int(head[1]), int(head[2])
            self._bytes = int(head[3])
        self.bytes_before = self._bytes
        self._tokens = 0  # the default counter's tokens added since the last flush
        self._dirty = False
        # a header that lists its open calls (five columns): their text as read (None: read
        # it when needed, as a caller's header may predate its own writes), and the list
        self._listing = head is not None and len(head) > 4
        self._listed_text: str | None = str(head[4]) if self._listing and fresh else None
        self._listed: dict[str, list[tuple[int, int]]] | None = None  # call id -> (pos, order)
        self._listed_changed = False
        self._carry = head is not None and len(head) > 5  # an answer carries its declaration
        self._entries = self._carry and head[5] != CARRIED_ROW  # ... in an entry of another table
        self._on_row = self._carry and head[5] == CARRIED_ROW  # ... in the answer's own row
        # a header read with its tail (PostgreSQL, decision 0195): the rows appended since its
        # last write and their tokens (a header write adds them), and the room it may grow in
        self._tail_rows = self._tail_tokens = 0
        self._room: int | None = -1  # never skipped unless the header says
        if head is not None and len(head) > 8:
            self._take_tail(head)
        self._appended = 0  # rows appended at the end since the last flush
        self._edited = False  # any other change of the rows since then (the header is written)
        self.header_written = False  # whether the last flush wrote the header

    def know(
        self,
        declared: dict[str, bool],
        answers: dict[str, Answer | None],
        open_calls: list[tuple[str, int, int]] | None,
        following: dict[int, int | None] | None = None,
        evicted: dict[str, bool] | None = None,
    ) -> None:
        """Seed answers fetched ahead in this transaction: per call id, and the open calls.

        ``open_calls``: every unanswered declaration as (call id, declaring position,
        end of its turn's result run), in position and declaration order; None when
        not fetched. ``following``: the position of the row after a position (None:
        none), for the run ends, until the editor's first write. ``evicted``: per
        call id, whether it is among the remembered ids of evicted turns.
        """
        self._declared.update(declared)
        self._answers.update(answers)
        self._evicted.update(evicted or {})
        if open_calls is not None:
            self._open = open_calls
        self._next.update(following or {})

    @property
    def address(self) -> Address:
        """Return the buffer's address."""
        return self._address

    @property
    def buffer_id(self) -> int:
        """Return the buffer's id (its header created when it has none yet)."""
        return self._ensure()

    # --- questions -----------------------------------------------------------------
    def count(self) -> int:
        """Return the number of rows (kept in the header)."""
        return self._count

    @property
    def bytes(self) -> int:
        """Return the UTF-8 size of the rows' JSON bodies (kept in the header)."""
        return self._bytes

    def is_declared(self, call_id: str) -> bool:
        """Return True when some assistant row declares ``call_id`` (the header's list, then the calls index)."""
        if self._carry and self._id is not None and call_id in self._open_listed():
            return True
        return self._knows(self._declared, "is_declared", call_id)

    def _knows(self, seen: dict[str, bool], statement: str, call_id: str) -> bool:
        """Whether ``statement`` finds a row for ``call_id``: what this editor has ``seen``, else the query."""
        if self._id is None:
            return False
        known = seen.get(call_id)
        if known is not None:
            return known
        return self._db.one(statement, (self._id, call_id)) is not None

    def answer_of(self, call_id: str) -> Answer | None:
        """Return the first row answering ``call_id`` anywhere in the buffer (answers index)."""
        if self._id is None:
            return None
        if call_id in self._answers:
            return self._answers[call_id]
        found = self._db.one("answer_of", (self._id, call_id))
        return None if found is None else Answer(int(found[0]), bool(found[1]))

    def dangling(self) -> list[Dangling]:
        """Return unanswered declared calls in buffer order, each after its turn's result run.

        The first declaration of an id owns it; the run end is one indexed query
        (the last row before the first non-tool row after the declaring turn).
        """
        if self._id is None:
            return []
        seen: set[str] = set()
        ends: dict[int, int] = {}
        found: list[Dangling] = []
        if self._open is not None:
            for call_id, _, run_end in self._open:
                if call_id not in seen:
                    seen.add(call_id)
                    found.append(Dangling(call_id, run_end))
            return found
        declared_open = self._listed_calls() if self._listing else self._db.all("open_calls", (self._id,))
        for call_id, declared in declared_open:
            if call_id in seen:
                continue
            seen.add(call_id)
            declared = int(declared)
            if declared not in ends:
                end = self._db.one("run_end", (self._id, declared, self._id, declared))
                ends[declared] = declared if end is None or end[0] is None else int(end[0])
            found.append(Dangling(call_id, ends[declared]))
        return found

    def oldest(self) -> PositionedRow | None:
        """Return the first row with its position."""
        return self._end("oldest")

    def index_of(self, position: int) -> int:
        """Return the index of the row at ``position``: the rows before it (one indexed count)."""
        if self._id is None:
            return 0
        found = self._db.one("rows_before", (self._id, position))
        return 0 if found is None else int(found[0])

    def was_evicted(self, call_id: str) -> bool:
        """Return True when ``call_id`` is among the remembered ids of evicted turns."""
        return self._knows(self._evicted, "was_evicted", call_id)

    def newest(self) -> PositionedRow | None:
        """Return the last row with its position (for ``pop_last``)."""
        return self._end("newest")

    # --- writes ----------------------------------------------------------------------
    def append_row(self, row: Message) -> None:
        """Add ``row`` at the end: the next major position, minor 0."""
        bid = self._ensure()
        self._last += 1
        self._write(bid, self._last << MINOR_BITS, row)
        self._count += 1
        self._appended += 1
        self._dirty = True

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert ``rows`` in order directly after ``position``.

        After the last row of a major (always the case for healing, which inserts
        after the end of a result run) the rows take the following minors; in the
        middle of a major the later rows of that major are shifted to make room.
        """
        if not rows:
            return
        bid = self._ensure()
        need = len(rows)
        major_end = ((position >> MINOR_BITS) + 1) << MINOR_BITS
        if position in self._next:
            following = self._next[position]
        else:
            nxt = self._db.one("next_pos", (bid, position))
            following = None if nxt is None or nxt[0] is None else int(nxt[0])
        self._next.clear()  # rows are written below
        if following is not None and following < major_end and following - position <= need:
            top = self._db.one("max_before", (bid, position, major_end))
            highest = int(top[0]) if top is not None and top[0] is not None else position
            if highest + need >= major_end:
                raise StoreError("too many rows inserted after one turn")
            for name in _ROW_SHIFTS if self._on_row else _SHIFTS[self._entries]:
                self._db.run(name, (need, bid, position, major_end))
            # the declarations first: a listing backend finds them by the rows' call ids
            for name in _ROW_UNFLIPS if self._on_row else _UNFLIPS[self._entries]:
                self._db.run(name, (bid,))
            self._answers.clear()  # positions moved
            self._open = None
            if self._listing:
                self._shift_listed(position, major_end, need)
        elif position + need >= major_end:
            raise StoreError("too many rows inserted after one turn")
        for offset, row in enumerate(rows, start=1):
            self._write(bid, position + offset, row)
        self._count += need
        self._dirty = self._edited = True

    def replace(self, position: int, row: Message) -> None:
        """Replace the row at ``position`` in place, re-indexing its tool data."""
        bid = self._ensure()
        body = dump_row(row)
        old, old_body = self._row_at(bid, position)
        self._unindex(bid, position, old)
        self._next.clear()
        tokens = estimate_tokens(row)
        ids = call_ids(row)
        self._db.run("row_update", (row["role"], body, tokens, bid, position, *self._row_tail(row, ids)))
        self._index(bid, position, row, ids)
        self._bytes += utf8_size(body) - utf8_size(old_body)
        self._tokens += tokens - estimate_tokens(old)
        self._dirty = self._edited = True

    def delete(self, position: int) -> None:
        """Remove the row at ``position`` and its index entries."""
        bid = self._ensure()
        old, old_body = self._row_at(bid, position)
        self._unindex(bid, position, old)
        self._next.clear()
        self._db.run("row_delete", (bid, position))
        self._bytes -= utf8_size(old_body)
        self._tokens -= estimate_tokens(old)
        self._count -= 1
        self._dirty = self._edited = True

    def remember_evicted(self, call_ids: Sequence[str]) -> None:
        """Remember an evicted turn's call ids as the newest; forget the oldest past the bound."""
        bid = self._ensure()
        for cid in call_ids:
            self._db.run("evicted_insert", (bid, cid, bid))
        self._db.run("evicted_trim", (bid, bid, EVICTED_CALLS_KEPT))
        self._evicted.clear()  # the trim may have forgotten some: ask again

    def flush(self, logged: tuple[object, ...] = ()) -> None:
        """Write the header (count, last major, bytes) if it changed.

        ``logged``: what ``SqlRepairs.record`` with ``header`` returned for this write's
        repair log entries, added in the same update: their bytes, which the header counts
        too (decision 0135), and on SQLite the entries themselves (decision 0148).

        With ``skips`` (decision 0195) rows appended at the end alone, the list of open
        calls unchanged and nothing logged, leave the header unwritten while
        ``header_skipped`` says so: its readers derive the counters from its tail.
        """
        self.header_written = False
        if not (self._dirty or logged) or self._id is None:
            return
        tail = self._tail_rows + self._appended
        if (
            self.skips
            and not (logged or self._edited or self._listed_changed)
            and header_skipped(tail, self._bytes, self._room)
        ):
            self._tail_rows, self._tail_tokens = tail, self._tail_tokens + self._tokens
            self._tokens = self._appended = 0
            self._dirty = False
            return
        # the tail's tokens too: the header's update adds them to its own
        params: list[Any] = [self._count, self._last, self._bytes, self._tokens + self._tail_tokens]
        name = "header_update"
        if self._listed_changed and self._listed is not None:
            listed = sorted((pos, order, cid) for cid, at in self._listed.items() for pos, order in at)
            params.append(_compact([[cid, pos, order] for pos, order, cid in listed]))
            name = "header_listed"
            self._listed_changed = False
        if logged:
            params.extend(logged)
            name = "header_listed_logged" if name == "header_listed" else "header_logged"
        self._db.run(name, (*params, self._id))
        self._tokens = self._appended = self._tail_rows = self._tail_tokens = 0
        self._dirty = self._edited = False
        self.header_written = True

    # --- helpers -------------------------------------------------------------------------
    def _end(self, name: str) -> PositionedRow | None:
        """Return the row a one-row statement (``oldest``/``newest``) picks, with its position."""
        if self._id is None:
            return None
        found = self._db.one(name, (self._id,))
        return None if found is None else PositionedRow(int(found[0]), load_row(found[1]))

    def _ensure(self) -> int:
        if self._id is None:
            made = self._db.one("header_insert", tuple(self._address))
            if made is None:  # created concurrently by an unserialized writer
                made = self._db.one("header_get", tuple(self._address))
                self._declared.clear()  # fetched for an empty buffer: ask again
                self._answers.clear()
                self._evicted.clear()
                self._open = None
            if made is None:
                raise StoreError("could not create the buffer header")
            self._id = int(made[0])
            if len(made) >= 4:
                self._count, self._last, self._bytes = int(made[1]), int(made[2]), int(made[3])
                self.bytes_before = self._bytes
            if len(made) > 4:  # the header lists its open calls (and was read just now)
                self._listing, self._listed_text, self._listed = True, str(made[4]), None
                self._carry = len(made) > 5
                self._entries = self._carry and made[5] != CARRIED_ROW
                self._on_row = self._carry and made[5] == CARRIED_ROW
            if len(made) > 8:
                self._take_tail(made)
        return self._id

    def _take_tail(self, head: Sequence[Any]) -> None:
        """A header read with its tail (decision 0195): its rows, its tokens and the room (columns 6-8)."""
        self._tail_rows, self._tail_tokens = int(head[6]), int(head[7])
        self._room = None if head[8] is None else int(head[8])

    def _row_at(self, bid: int, position: int) -> tuple[Message, str]:
        found = self._db.one("row_get", (bid, position))
        if found is None:
            raise StoreError(f"no buffer row at position {position}")
        return load_row(found[0]), str(found[0])

    def _write(self, bid: int, position: int, row: Message) -> None:
        self._next.clear()
        body = dump_row(row)
        tokens = estimate_tokens(row)  # the default counter's count, stored with the row
        ids = call_ids(row)  # read once for the row's parameter and its index
        self._db.run("row_insert", (bid, position, row["role"], body, tokens, *self._row_tail(row, ids)))
        self._bytes += utf8_size(body)
        self._tokens += tokens
        self._index(bid, position, row, ids)

    def _index(self, bid: int, position: int, row: Message, ids: list[str]) -> None:
        """Index ``row``'s declarations (``ids``: its ``call_ids``) and its answer."""
        for order, cid in enumerate(ids):
            listed = self._listing and self.answer_of(cid) is None
            if listed:
                self._list_call(cid, position, order)
            if not (listed and self._carry):  # carrying: an open call's entry is the list's
                self._db.run("call_insert", (bid, cid, position, order, bid, cid))
            self._declared[cid] = True
            self._open = None
        rid = result_id(row)
        if rid is not None:
            if self._carry:
                self._carry_answer(bid, rid, position, is_healed(row))
            else:
                self._db.run("answer_insert", (bid, rid, position, is_healed(row)))
            if self._listing:
                self._unlist(rid)
            else:
                self._db.run("calls_answered", (bid, rid))
            self._open = None
            if rid in self._answers:  # the first answer by position stays the answer
                first = self._answers[rid]
                if first is None:
                    self._answers[rid] = Answer(position, is_healed(row))
                elif first.position > position:
                    del self._answers[rid]

    def _unindex(self, bid: int, position: int, row: Message) -> None:
        if call_ids(row):
            self._db.run("calls_delete", (bid, position))
            for cid in call_ids(row):
                self._declared.pop(cid, None)
                if self._entries:  # the declaration an answer's entry carries (one row: cleared above)
                    self._db.run("answer_uncarry", (bid, cid, position))
                if self._listing:
                    self._unlist(cid, position)
            self._open = None
        rid = result_id(row)
        if rid is not None and self._carry:
            self._drop_answer(bid, rid, position)
        elif rid is not None:
            self._db.run("answer_delete", (bid, rid, position))
            self._answers.pop(rid, None)
            if not self._listing:
                self._db.run("calls_reopen", (bid, rid, bid, rid))
            elif self.answer_of(rid) is None:  # its last answer gone: its declarations are open again
                for declared, order in self._db.all("declared_of", (bid, rid)):
                    self._list_call(rid, int(declared), int(order))
            self._open = None

    # --- an answer that carries its declaration (decision 0180) --------------------------
    def _carry_answer(self, bid: int, rid: str, position: int, healed: bool) -> None:
        """Write the answer's entry, with the listed declaration it answers (its others: entries)."""
        at = sorted(self._open_listed().get(rid, ()))
        carried: tuple[int | None, int | None] = at[0] if at else (None, None)
        if not self._on_row:  # else the row holds it (``_row_tail``)
            self._db.run("answer_carry", (bid, rid, position, healed, *carried))
        for declared, order in at[1:]:  # declared again while open: entries of their own
            self._db.run("call_insert", (bid, rid, declared, order, bid, rid))

    def _drop_answer(self, bid: int, rid: str, position: int) -> None:
        """Delete the answer's entry; what it carried is listed again, or an entry when answered still.

        Where the answer is its row (``CARRIED_ROW``) nothing is deleted here: what the row
        carries is read, and the row goes (or is replaced) with the caller's own statement.
        """
        if self._on_row:
            found = self._db.one("answer_carried", (bid, position))
        else:
            found = self._db.one("answer_drop", (bid, rid, position))
        self._answers.pop(rid, None)
        carried = [] if found is None or found[0] is None else [(int(found[0]), int(found[1]))]
        if self._on_row:
            last = self._db.one("answer_other", (bid, rid, position)) is None
        else:
            last = self.answer_of(rid) is None
        if last:  # its last answer gone: its declarations are open again
            found_declared = self._db.all("declared_of", (bid, rid))
            declared = [(int(at), int(order)) for at, order in found_declared]
            if declared:
                self._db.run("calls_of_drop", (bid, rid))
            for at, order in carried + declared:
                self._list_call(rid, at, order)
        elif carried:
            self._db.run("call_insert", (bid, rid, *carried[0], bid, rid))
        self._open = None

    # --- a header that lists its open calls (decision 0137) ------------------------------
    def _row_tail(self, row: Message, ids: list[str]) -> tuple[Any, ...]:
        """A row write's last parameters: its call ids and, where an answer is its row, its answer.

        Its answer: the call id it answers (``result_id``) and the listed declaration it
        carries, its position and order (None: none).
        """
        if not self._on_row:
            return self._calls_of(ids)
        rid = result_id(row)
        at = None if rid is None else self._open_listed().get(rid)
        carried = min(at) if at else (None, None)
        return (*self._calls_of(ids), rid, *carried)

    def _calls_of(self, ids: list[str]) -> tuple[str | None, ...]:
        """A listing backend's last row parameter: the row's call ids (``ids``) as JSON (None: none)."""
        if not self._listing:
            return ()
        return (_compact(ids) if ids else None,)

    def _open_listed(self) -> dict[str, list[tuple[int, int]]]:
        """The header's open calls, read once per editor: call id -> [(position, order)]."""
        if self._listed is None:
            text = self._listed_text
            if text is None:
                found = self._db.one("open_list", (self._ensure(),))
                text = "[]" if found is None else str(found[0])
            listed: dict[str, list[tuple[int, int]]] = {}
            if text != "[]":
                for cid, pos, order in json.loads(text):
                    listed.setdefault(str(cid), []).append((int(pos), int(order)))
            self._listed = listed
        return self._listed

    def _listed_calls(self) -> list[tuple[str, int]]:
        """The header's open calls as (call id, declaring position), in position and call order."""
        found = sorted((pos, order, cid) for cid, at in self._open_listed().items() for pos, order in at)
        return [(cid, pos) for pos, _, cid in found]

    def _list_call(self, call_id: str, position: int, order: int) -> None:
        self._open_listed().setdefault(call_id, []).append((position, order))
        self._listed_changed = True

    def _unlist(self, call_id: str, position: int | None = None) -> None:
        """Take ``call_id``'s declarations (only the one at ``position`` when given) off the list."""
        listed = self._open_listed()
        at = listed.get(call_id)
        if at is None:
            return
        kept = [] if position is None else [(pos, order) for pos, order in at if pos != position]
        if kept:
            listed[call_id] = kept
        else:
            del listed[call_id]
        self._listed_changed = True

    def _shift_listed(self, position: int, major_end: int, need: int) -> None:
        """Move the listed declarations between ``position`` and ``major_end`` on by ``need``."""
        listed = self._open_listed()
        for cid, at in listed.items():
            listed[cid] = [(pos + need if position < pos < major_end else pos, order) for pos, order in at]
        self._listed_changed = True
