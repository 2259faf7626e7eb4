"""``MemoryConversations``: the ``Conversations`` protocol in a ``MemoryStore``'s dicts.

The reference the SQL tables are tested against. Lines are the store's own session
buffers; an entry is found by scanning its conversation's lines (a placeholder insert
moves list positions, so none is kept), and an entry that holds no row is remembered as
the entry whose row ended the line when it was stored.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from flowmem.core import IndexedListEditor, Message, Repair, call_ids, result_id
from flowmem.store.base import SESSION_SCOPE, Address, SessionRecord, WriteGuard, quota_owner
from flowmem.store.conversations import (
    LINE,
    ConversationWrite,
    StoredConversation,
    entry_of,
    run_of,
)
from flowmem.store.conversations.lines import QUALIFIER, START, Declaration, Place, write_lines
from flowmem.store.engine import MemoryEngine, MemoryTables
from flowmem.store.rows import dump_json, utf8_size


class _ListLine(IndexedListEditor):
    """A line's rows as a list editor that says where its last append went."""

    def last_position(self) -> int:
        """The index of the last row."""
        return len(self.rows) - 1


class MemoryLineTx:
    """``LineTx`` over copies of one conversation's lines, committed by ``commit``.

    Made inside the memory engine's locked step that lent ``tables``.
    """

    def __init__(
        self, owner: MemoryConversations, tables: MemoryTables, conversation_id: str
    ) -> None:
        self.owner = owner
        self.tables = tables
        self.conversation_id = conversation_id
        self.editors: dict[str, _ListLine] = {}
        self.repairs: dict[str, list[Repair]] = {}  # logged by ``commit`` with the lines
        self.aliases: dict[tuple[str, str], tuple[str, str | None]] = {}

    def _rows(self, conversation_id: str, key: str) -> list[Message]:
        if conversation_id == self.conversation_id and key in self.editors:
            return self.editors[key].rows
        return self.tables.buffers.get(Address(SESSION_SCOPE, conversation_id, key), [])

    def _keys(self, conversation_id: str) -> list[str]:
        keys = {
            a.key
            for a in self.tables.buffers
            if a.scope == SESSION_SCOPE and a.scope_id == conversation_id and _is_line(a.key)
        }
        if conversation_id == self.conversation_id:
            keys.update(self.editors)
        return sorted(keys)

    def _find(self, conversation_id: str, key: str, entry_id: str) -> int | None:
        rows = self._rows(conversation_id, key)
        for index in range(len(rows) - 1, -1, -1):
            if entry_of(rows[index]) == entry_id:
                return index
        return None

    def places(self, entry_id: str, conversation_id: str) -> list[Place]:
        """Scan the conversation's lines for the entry's last row, else its alias."""
        found = []
        for key in self._keys(conversation_id):
            index = self._find(conversation_id, key, entry_id)
            if index is not None:
                found.append(Place(conversation_id, key, index))
        alias = self._alias(entry_id, conversation_id)
        return found if found or alias is None else [alias]

    def _alias(self, entry_id: str, conversation_id: str) -> Place | None:
        alias = self.aliases.get((conversation_id, entry_id))
        if alias is None:
            alias = self.owner.aliases.get((conversation_id, entry_id))
        if alias is None:
            return None
        key, anchor = alias
        if anchor is None:
            return Place(conversation_id, key, START)
        found = self._find(conversation_id, key, anchor)
        return None if found is None else Place(conversation_id, key, found)

    def line_end(self, key: str) -> int | None:
        """The index of the line's last row."""
        rows = self._rows(self.conversation_id, key)
        return len(rows) - 1 if rows else None

    def rows_upto(self, place: Place) -> list[Message]:
        """A copy of the line's rows up to ``place``."""
        return copy.deepcopy(self._rows(place.conversation_id, place.key)[: place.position + 1])

    def editor(self, key: str) -> _ListLine:
        """A list editor over a copy of the line."""
        if key not in self.editors:
            self.editors[key] = _ListLine(copy.deepcopy(self._rows(self.conversation_id, key)))
        return self.editors[key]

    def declarations(self, key: str, call_id: str) -> list[Declaration]:
        """Scan the line for declarations of ``call_id`` (plain or qualified)."""
        rows = self._rows(self.conversation_id, key)
        answered = {rid for row in rows if (rid := result_id(row)) is not None}
        found = []
        for index, row in enumerate(rows):
            for cid in call_ids(row):
                if cid == call_id or cid.startswith(call_id + QUALIFIER):
                    found.append(
                        Declaration(cid, index, cid in answered, run_of(row), entry_of(row))
                    )
        return found

    def written(self, key: str, whole: bool, empty: bool) -> None:
        """Nothing to keep: ``memory://`` reads every history from its rows (decision 0131)."""

    def index(
        self, entry_id: str, key: str, position: int, rows: bool, message: str | None = None
    ) -> None:
        """Remember an entry that holds no row by the entry before it (the message is not kept)."""
        if rows:
            return
        line = self._rows(self.conversation_id, key)
        anchor = entry_of(line[position]) if position > START else None
        self.aliases[(self.conversation_id, entry_id)] = (key, anchor)

    def log(self, key: str, repairs: Sequence[Repair]) -> None:
        """Keep the line's repairs for ``commit`` to log with the lines."""
        self.repairs.setdefault(key, []).extend(repairs)

    def commit(self, created: SessionRecord | None) -> None:
        """Write the changed lines and aliases into the store (its lock held), with the claimed session.

        The lines count against the session owner's quotas: past one, QuotaExceededError
        and nothing is written (the session a claim creates neither).
        """
        tables, store = self.tables, self.owner.store
        lines = []
        for key, editor in self.editors.items():
            address = Address(SESSION_SCOPE, self.conversation_id, key)
            size = sum(utf8_size(dump_json(r, "message")) for r in editor.rows)
            lines.append((size - tables.sizes.get(address, 0), address, editor.rows, size))
        session = tables.sessions.get(self.conversation_id) or created
        owner = quota_owner(SESSION_SCOPE, self.conversation_id, None if session is None else session.owner)
        new = sum(address not in tables.buffers for _, address, _, _ in lines)
        store.charge(tables, owner, sum(line[0] for line in lines), new, 0, count=False)
        growth = sum(line[0] for line in lines)
        logs = [  # the lines' repair logs (issue 37 §2), checked with the rows, then added with them
            store.stage_repairs(
                tables, Address(SESSION_SCOPE, self.conversation_id, key), repairs, growth, created
            )
            for key, repairs in self.repairs.items()
        ]
        store.store_session(tables, created)
        for _, address, rows, size in sorted(lines, key=lambda line: line[0]):  # shrinking first
            store.set_buffer(tables, address, rows, size)
        for log in logs:
            log()
        self.owner.aliases.update(self.aliases)


def _is_line(key: str) -> bool:
    return key == LINE or key.startswith(LINE + "#")


class MemoryConversations:
    """Conversation records in a dict, their entries in a ``MemoryStore``'s session buffers."""

    def __init__(self, store: MemoryEngine) -> None:
        self.store = store
        self._records: dict[str, StoredConversation] = {}
        # an entry that holds no row: (conversation, entry) -> (line, the entry before it)
        self.aliases: dict[tuple[str, str], tuple[str, str | None]] = {}

    def get(self, conversation_id: str) -> StoredConversation | None:
        """The stored record, or None."""
        with self.store.locked():
            return copy.deepcopy(self._records.get(conversation_id))

    def records(self, scope: str | None, limit: int | None) -> list[StoredConversation]:
        """Records newest first, of ``scope`` when given."""
        with self.store.locked():
            found = [r for r in self._records.values() if scope is None or r.scope == scope]
        found.sort(key=lambda r: (r.updated, r.conversation_id), reverse=True)
        return copy.deepcopy(found[:limit])

    def write(
        self, write: ConversationWrite, expected: str | None, guard: WriteGuard | None = None
    ) -> bool:
        """Store the record and its entries at once (see ``Conversations.write``)."""
        cid = write.record.conversation_id
        with self.store.locked() as tables:
            created = self.store.check_guard(tables, guard)
            stored = self._records.get(cid)
            if (None if stored is None else stored.revision) != expected:
                return False
            tx = MemoryLineTx(self, tables, cid)
            if not write_lines(tx, write):
                return False
            tx.commit(created)
            self._records[cid] = copy.deepcopy(write.record)
            return True

    def delete(self, conversation_id: str, expected: str) -> bool:
        """Delete the conversation's session when its revision is ``expected``."""
        with self.store.locked():
            stored = self._records.get(conversation_id)
            if stored is None or stored.revision != expected:
                return False
            if not self.store.delete_session(conversation_id):
                self.drop(conversation_id)
            return True

    def history(self, entry_id: str, conversation_id: str | None = None) -> list[Message] | None:
        """The rows of the line the entry ends (in ``conversation_id`` when given), up to it."""
        with self.store.locked() as tables:
            for cid in self._conversations(tables, conversation_id):
                places = MemoryLineTx(self, tables, cid).places(entry_id, cid)
                if places:
                    return MemoryLineTx(self, tables, cid).rows_upto(places[0])
        return None

    def messages(
        self, entry_id: str, conversation_id: str | None = None, limit: int | None = None
    ) -> list[tuple[str, str]] | None:
        """None: ``memory://`` keeps no messages beside the rows, its histories are read from them."""
        return None

    def holders(self, entry_id: str) -> list[str]:
        """The conversations holding the entry, by id."""
        with self.store.locked() as tables:
            return [
                cid
                for cid in self._conversations(tables, None)
                if MemoryLineTx(self, tables, cid).places(entry_id, cid)
            ]

    def _conversations(self, tables: MemoryTables, only: str | None) -> list[str]:
        """The conversations with a session buffer or an alias, by id (``only``: that one)."""
        if only is not None:
            return [only]
        owners = {a.scope_id for a in tables.buffers if a.scope == SESSION_SCOPE}
        owners.update(cid for cid, _ in self.aliases)
        return sorted(owners)

    def drop(self, conversation_id: str) -> None:
        """Forget a conversation's record and aliases (its session's buffers go with the session)."""
        self._records.pop(conversation_id, None)
        for name in [a for a in self.aliases if a[0] == conversation_id]:
            del self.aliases[name]


__all__ = ["MemoryConversations", "MemoryLineTx"]
