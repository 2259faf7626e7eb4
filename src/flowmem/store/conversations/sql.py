"""``SqlConversations``: the ``Conversations`` protocol on a SQL store (SQLite or PostgreSQL).

A write runs in one transaction of the store, serialized with the appends to the
conversation's first line (``write_at``: SQLite's write transaction,
PostgreSQL's advisory lock): the session claim, the revision check, the rows through
the buffer rules (``SqlBufferEditor``, so a line's call index stays exact) and the
record commit together, or nothing does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Any

from flowmem.core import Message, Repair
from flowmem.store.base import SESSION_SCOPE, Address, WriteGuard
from flowmem.store.conversations import (
    LINE,
    ConversationWrite,
    LineState,
    StoredConversation,
    entry_of,
    run_of,
)
from flowmem.store.conversations.lines import QUALIFIER, Declaration, Place, write_lines
from flowmem.store.conversations.statements import many
from flowmem.store.editor import MINOR_BITS, SqlBufferEditor, SqlRunner, load_row, load_rows
from flowmem.store.engine import SqlKind
from flowmem.store.rows import dump_json, stored_json

UNLIMITED = 2**62  # a LIMIT both backends take for "every row"
ROWS_PER_STATEMENT = 200
"""At most this many entries' places (or messages) one held-back write puts in one statement (decision 0171)."""


class _Refused(Exception):
    """A write whose revision or head does not hold: roll back, report False."""


class _LineEditor(SqlBufferEditor):
    """``SqlBufferEditor`` that says where its last append went, and keeps its line's end known.

    ``ends``: the transaction's known line ends (``_SqlTx.line_end``), by key: an
    append puts the line's end at its row (a new major, past every row); any other
    write makes it unknown again (asked once more).
    """

    def __init__(self, db: SqlRunner, address: Address, ends: dict[str, int | None]) -> None:
        super().__init__(db, address)
        self.ends = ends

    def last_position(self) -> int:
        """The position ``append_row`` wrote last (the last major, minor 0)."""
        return self._last << MINOR_BITS

    def append_row(self, row: Message) -> None:
        """Append, the line's end now that row."""
        super().append_row(row)
        self.ends[self.address.key] = self.last_position()

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert, the line's end asked again."""
        self.ends.pop(self.address.key, None)
        super().insert_after(position, rows)

    def replace(self, position: int, row: Message) -> None:
        """Replace (the line's end unchanged, asked again all the same)."""
        self.ends.pop(self.address.key, None)
        super().replace(position, row)

    def delete(self, position: int) -> None:
        """Delete, the line's end asked again."""
        self.ends.pop(self.address.key, None)
        super().delete(position)


def _stored(row: Any) -> StoredConversation:
    return StoredConversation(
        conversation_id=row[0],
        revision=row[1],
        scope=row[2],
        updated=int(row[3]),
        record=stored_json(row[4]),
    )


class _SqlTx:
    """``LineTx`` inside one open write transaction.

    Its reads (``places``, ``line_end``, ``rows_upto``, ``declarations``) read rows,
    calls, answers and entries, which the line editors write at once; only a buffer's
    header waits for ``flush``, and none of them reads it, so none flushes. A line's end
    is read once per transaction and kept by its editor's appends (``_LineEditor``).

    Where entries end and their messages (``index``) are held back, by their tables'
    keys (a later index of the same key replacing the earlier, as a second upsert
    would), and written at ``flush`` as one multi-row statement per table
    (``ROWS_PER_STATEMENT`` rows at most), or before ``places`` reads them (decision 0171).
    """

    def __init__(
        self, conn: Any, sql: Mapping[str, str], runner: SqlRunner, conversation_id: str
    ) -> None:
        self.conn = conn
        self.sql = sql
        self.conversation_id = conversation_id
        self.runner = runner
        self.editors: dict[str, _LineEditor] = {}
        self.repairs: dict[str, list[Repair]] = {}  # logged once the lines are flushed
        self.line: tuple[str, bool, bool] | None = None  # (key, whole, empty) of the line written
        self.ends: dict[str, int | None] = {}  # each line's end as known in this transaction
        self.placed: dict[tuple[str, str], tuple[Any, ...]] = {}  # pa_entries rows held back
        self.kept: dict[tuple[str, int], tuple[Any, ...]] = {}  # pa_messages rows held back
        self.put: dict[tuple[str, int], str] = {}  # each message put: its entry, by place

    def _run(self, name: str, params: tuple[Any, ...]) -> Any:
        return self.conn.execute(self.sql[name], params)

    def flush(self) -> None:
        """Write what the line editors hold back, then the entries' places and messages."""
        for editor in self.editors.values():
            editor.flush()
        self._put_index()

    def _put_index(self) -> None:
        """Write the held-back ``pa_entries`` and ``pa_messages`` rows, one statement per table (and chunk)."""
        for name, held in (("pa_entry_put", self.placed), ("pa_message_put", self.kept)):
            rows = list(held.values())
            held.clear()
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                chunk = rows[start : start + ROWS_PER_STATEMENT]
                params = tuple(chain.from_iterable(chunk))  # the rows' values in order, flat
                self.conn.execute(many(self.sql[name], len(chunk)), params)

    def places(self, entry_id: str, conversation_id: str) -> list[Place]:
        """Where the entry ends in each of the conversation's lines (``pa_entries``, what is held back written first)."""
        if self.placed:
            self._put_index()
        rows = self._run("pa_entry_in", (entry_id, conversation_id)).fetchall()
        return [Place(conversation_id, key, int(pos)) for key, pos in rows]

    def line_end(self, key: str) -> int | None:
        """The position of the line's last row (read once, then kept by the line's appends)."""
        if key in self.ends:
            return self.ends[key]
        row = self._run("pa_line_end", (self.conversation_id, key)).fetchone()
        end = None if row is None or row[0] is None else int(row[0])
        self.ends[key] = end
        return end

    def rows_upto(self, place: Place) -> list[Message]:
        """The line's rows up to ``place``."""
        params = (place.conversation_id, place.key, place.position)
        return load_rows(self._run("pa_line_upto", params).fetchall())

    def editor(self, key: str) -> _LineEditor:
        """The line's buffer editor (one per key for the transaction)."""
        if key not in self.editors:
            self.editors[key] = _LineEditor(
                self.runner, Address(SESSION_SCOPE, self.conversation_id, key), self.ends
            )
        return self.editors[key]

    def declarations(self, key: str, call_id: str) -> list[Declaration]:
        """Declarations of ``call_id``, plain or qualified, from the line's call index."""
        prefix = call_id + QUALIFIER
        params = (self.conversation_id, key, call_id, len(prefix), prefix)
        found = []
        for cid, pos, answered, body in self._run("pa_declarations", params).fetchall():
            row = load_row(body)
            found.append(Declaration(cid, int(pos), bool(answered), run_of(row), entry_of(row)))
        return found

    def index(
        self, entry_id: str, key: str, position: int, rows: bool, message: str | None = None
    ) -> None:
        """Record where the entry ends, and its message when given (``pa_messages``); written at ``flush``."""
        self.placed[(entry_id, key)] = (entry_id, self.conversation_id, key, position)
        if message is not None:
            self.kept[(key, position)] = (self.conversation_id, key, position, entry_id, message)
            self.put[(key, position)] = entry_id

    def appended(self, held: LineState, write: ConversationWrite) -> int | None:
        """Where the write's last entry ends when it appended each entry's message to ``held``'s line, in order.

        None when it wrote another line or copied one, changed a row, left an entry
        without its message, or put a message elsewhere (decision 0183).
        """
        if self.line != (held.key, True, False) or not write.entries:
            return None
        places = list(self.put)
        if [key for key, _ in places] != [held.key] * len(places):
            return None
        positions = [position for _, position in places]
        if list(self.put.values()) != [entry.entry_id for entry in write.entries]:
            return None
        if positions[0] <= held.position or positions != sorted(set(positions)):
            return None
        return positions[-1]

    def written(self, key: str, whole: bool, empty: bool) -> None:
        """Keep the line written and how, for ``SqlConversations.write``'s line stamp."""
        self.line = (key, whole, empty)

    def log(self, key: str, repairs: Sequence[Repair]) -> None:
        """Keep the line's repairs for ``SqlConversations.write`` to log after the flush."""
        self.repairs.setdefault(key, []).extend(repairs)


def _held_before(held: LineState, conversation_id: str, found: Any) -> bool:
    """Whether ``held`` is the conversation's own line as the record's stamp says it is now, unchanged.

    ``found``: ``pa_revision_line``'s row (revision, line key, stamp, version, unchanged).
    """
    return (
        found is not None
        and bool(found[4])
        and held.conversation_id == conversation_id
        and (found[1], found[2], found[3]) == (held.key, held.stamp, held.version)
    )


class SqlConversations(SqlKind):
    """Conversation records in ``pa_conversations``, entries in session buffers and ``pa_entries``."""

    def get(self, conversation_id: str) -> StoredConversation | None:
        """The stored record, or None."""
        with self.store.connection() as conn:
            row = self._run(conn, "pa_get", (conversation_id,)).fetchone()
        return None if row is None else _stored(row)

    def records(self, scope: str | None, limit: int | None) -> list[StoredConversation]:
        """Records newest first, of ``scope`` when given, at most ``limit``."""
        bound = UNLIMITED if limit is None else limit
        with self.store.connection() as conn:
            if scope is None:
                rows = self._run(conn, "pa_list_all", (bound,)).fetchall()
            else:
                rows = self._run(conn, "pa_list_scope", (scope, bound)).fetchall()
        return [_stored(row) for row in rows]

    def write(
        self, write: ConversationWrite, expected: str | None, guard: WriteGuard | None = None
    ) -> bool:
        """Store the record and its entries in one transaction (see ``Conversations.write``)."""
        return self.write_held(write, expected, guard, None)[0]

    def write_held(
        self,
        write: ConversationWrite,
        expected: str | None,
        guard: WriteGuard | None,
        held: LineState | None,
    ) -> tuple[bool, LineState | None]:
        """``write``, and the line's state after it when ``held`` was its state before (see ``Conversations``)."""
        record = write.record
        cid = record.conversation_id
        body = dump_json(dict(record.record), "conversation record")
        after: list[LineState] = []

        def work(conn: Any) -> None:
            if guard is not None:
                self.store.check_guard(conn, guard)
            found = self._run(conn, "pa_revision_line", (cid,)).fetchone()
            if (None if found is None else found[0]) != expected:
                raise _Refused
            tx = _SqlTx(conn, self.sql, self.store.runner(conn), cid)
            if not write_lines(tx, write):
                raise _Refused
            tx.flush()
            for key, repairs in tx.repairs.items():  # the lines' repair logs (issue 37 §2)
                self.store.record_repairs(conn, tx.editors[key].buffer_id, repairs)
            params = (cid, record.revision, record.scope, record.updated, body)
            line = self._line(found, tx.line)
            if not isinstance(line, str):
                self._run(conn, "pa_put", (*params, *line))
                return
            # stamped with the line as it is now, in the same statement, which says how
            stamped = self._run(conn, "pa_put_line", (*params, cid, line)).fetchall()
            if held is not None and _held_before(held, cid, found):
                end = tx.appended(held, write)
                now: Any = stamped[0] if stamped else (None, None, None)
                if end is not None and (now[0], now[1]) == (held.key, held.stamp):
                    after.append(LineState(cid, held.key, end, held.stamp, int(now[2])))

        try:
            self.store.write_at(self._lock(cid), work)
        except _Refused:
            return False, None
        return True, (after[0] if after else None)

    @staticmethod
    def _line(found: Any, written: tuple[str, bool, bool] | None) -> tuple[Any, Any, Any] | str:
        """The record's line stamp after a write: the line whose messages pa_entries holds whole.

        The line written, as its buffer is now, when the write kept its messages whole
        and the line was empty or whole before: its key, the stamp read by the record's
        own write (``pa_put_line``, decision 0171; none when the line has no buffer); the
        stamp as it was when no line was written; none otherwise (its history is then
        read from the rows, decision 0131).
        """
        before = (None, None, None) if found is None else (found[1], found[2], found[3])
        if written is None:
            return before
        key, whole, empty = written
        if not whole or not (empty or (found is not None and found[1] == key and found[4])):
            return (None, None, None)
        return key

    def messages(
        self, entry_id: str, conversation_id: str | None = None, limit: int | None = None
    ) -> list[tuple[str, str]] | None:
        """The last ``limit`` + 1 messages of the history an entry ends, newest first (decision 0131).

        Two queries: where the history is and whether its messages are whole, then them.
        """
        with self.store.connection() as conn:
            return self._messages(conn, entry_id, conversation_id, limit)

    def loaded(
        self, conversation_id: str, limit: int | None = None
    ) -> tuple[StoredConversation | None, list[tuple[str, str]] | None]:
        """``get`` and, for the record's head, ``messages(head, None, limit)``, on one connection (decision 0176).

        The messages are None when there is no record or it has no head, else as
        ``messages`` gives them.
        """
        with self.store.connection() as conn:
            row = self._run(conn, "pa_get", (conversation_id,)).fetchone()
            if row is None:
                return None, None
            stored = _stored(row)
            head = stored.record.get("head_id")
            if not isinstance(head, str):
                return stored, None
            return stored, self._messages(conn, head, None, limit)

    def loaded_held(
        self, conversation_id: str, proven: Callable[[LineState], bool]
    ) -> tuple[StoredConversation | None, list[tuple[str, str]] | None, LineState | None]:
        """``loaded`` of the whole history, its texts unread when ``proven`` knows their line's state (decision 0183).

        On one connection: the record, where its head's history is with its line's state,
        then (unless proven) the texts and whether the line holds a message past them.
        """
        with self.store.connection() as conn:
            row = self._run(conn, "pa_get", (conversation_id,)).fetchone()
            if row is None:
                return None, None, None
            stored = _stored(row)
            head = stored.record.get("head_id")
            if not isinstance(head, str):
                return stored, None, None
            place = self._run(conn, "pa_messages_line", (head,)).fetchone()
            if place is None or not place[3]:
                return stored, None, None
            at = (str(place[0]), str(place[1]), int(place[2]))
            state = LineState(*at, int(place[4]), int(place[5]))
            if proven(state):
                return stored, None, state
            found = self._texts(conn, place, UNLIMITED)
            if found is None:
                return stored, None, None
            past = self._run(conn, "pa_messages_after", (place[0], place[1], place[2])).fetchone()
            return stored, found, (None if past is not None else state)

    def _messages(
        self, conn: Any, entry_id: str, conversation_id: str | None, limit: int | None
    ) -> list[tuple[str, str]] | None:
        """``messages`` on the caller's connection."""
        bound = UNLIMITED if limit is None else limit + 1
        if conversation_id is None:
            place = self._run(conn, "pa_messages_line", (entry_id,)).fetchone()
        else:
            place = self._run(conn, "pa_messages_line_in", (entry_id, conversation_id)).fetchone()
        if place is None or not place[3]:
            return None
        return self._texts(conn, place, bound)

    def _texts(self, conn: Any, place: Any, bound: int) -> list[tuple[str, str]] | None:
        """The last ``bound`` messages of ``place``'s line up to it, newest first; None for an entry written twice."""
        rows = self._run(conn, "pa_messages", (place[0], place[1], place[2], bound)).fetchall()
        found = [(str(e), str(m)) for e, m in rows]
        if not found or len({e for e, _ in found}) != len(found):
            return None  # an entry written twice in the line: its rows say which is right
        return found

    def delete(self, conversation_id: str, expected: str) -> bool:
        """Delete the conversation's session in one transaction when its revision is ``expected``."""

        def work(conn: Any) -> None:
            found = self._run(conn, "pa_revision", (conversation_id,)).fetchone()
            if found is None or found[0] != expected:
                raise _Refused
            if self.store.drop_session(conn, conversation_id) is None:
                self.drop(conn, conversation_id)

        try:
            self.store.write_at(self._lock(conversation_id), work)
        except _Refused:
            return False
        return True

    def history(self, entry_id: str, conversation_id: str | None = None) -> list[Message] | None:
        """The rows of the line the entry ends (in ``conversation_id`` when given), up to it: one query."""
        with self.store.connection() as conn:
            if conversation_id is None:
                rows = self._run(conn, "pa_history", (entry_id,)).fetchall()
                known = rows or self._run(conn, "pa_entry_any", (entry_id,)).fetchone() is not None
            else:
                rows = self._run(conn, "pa_history_in", (entry_id, conversation_id)).fetchall()
                known = rows or self._run(conn, "pa_entry_in", (entry_id, conversation_id)).fetchone() is not None
        return load_rows(rows) if known else None

    def holders(self, entry_id: str) -> list[str]:
        """The conversations holding the entry, by id."""
        with self.store.connection() as conn:
            return [str(row[0]) for row in self._run(conn, "pa_entry_holders", (entry_id,)).fetchall()]

    def drop(self, conn: Any, conversation_id: str) -> None:
        """Delete a conversation's record and entry index inside the caller's transaction."""
        self._run(conn, "pa_drop", (conversation_id,))
        self._run(conn, "pa_entries_drop", (conversation_id,))

    @staticmethod
    def _lock(conversation_id: str) -> Address:
        return Address(SESSION_SCOPE, conversation_id, LINE)


__all__ = ["SqlConversations"]
