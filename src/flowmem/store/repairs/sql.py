"""``SqlRepairs``: the repair log on a SQL store (SQLite or PostgreSQL).

``record`` runs inside the append's (or the compaction's) transaction, on the runner
it writes with (a ``StatementRunner`` over its connection, or PostgreSQL's pipeline),
writes only, no read, so it adds no round trip to a pipelined append. Since decision
0148 a write's entries go into its buffer's header row, in the header's own update
(``log_held``, newest first, with their bytes in ``log_bytes`` and their number in
``log_count``): an entry writes no row and no page of its own. A trigger of that update
moves the held entries to the log's table once they pass ``HELD_CHARS`` and trims the log
to its newest ``KEPT``; the header's usage trigger counts and checks their bytes with the
rows' (decision 0135), so the quota may refuse them and the whole append rolls back.
``note`` logs a change that wrote no row (a drop on a read, a refusal) in a small write of
its own. ``page`` reads the held entries, the table's and the rows they wrote in one snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from flowmem.core import Repair
from flowmem.errors import QuotaExceededError
from flowmem.store.base import Address
from flowmem.store.editor import SqlRunner
from flowmem.store.engine import LAST_MAX, SqlEngine
from flowmem.store.repairs import (
    KEPT,
    PAGE,
    REPLACING,
    RepairEntry,
    RepairPage,
    check_paging,
    entry_texts,
    held_entries,
    parse_entry,
    placed,
)
from flowmem.store.rows import check_address, utf8_size

# a store keeping fewer than ``KEPT`` moves the held entries and trims at once: each
# backend's statements for it, and how many of (buffer id, kept) each takes
_SPILLS = (("repairs_spill", 1), ("repairs_spill_header", 2), ("repairs_spill_trim", 2), ("repairs_spill_kept", 2))


class SqlRepairs:
    """``SupportsRepairs`` over a ``SqlStore``'s engine, and the append's ``record`` hook."""

    def __init__(self, store: SqlEngine[Any], kept: int = KEPT) -> None:
        self.store = store
        self.sql = store.statements
        self.kept = kept  # the newest entries a buffer keeps (at most ``KEPT``: a trigger trims there)

    def record(
        self, db: SqlRunner, buffer_id: int, repairs: Sequence[Repair], header: bool = False
    ) -> tuple[object, ...]:
        """Log a write's repairs in its transaction (``db``), keeping the newest ``kept``.

        Implements the log of MEM-1, MEM-2, MEM-3 and MEM-10, of window evictions and of
        compactions (issue 37 §2). The entries' bytes are the header's ``log_bytes``
        (decision 0135), counted and checked with the rows' by the header's trigger: a
        write that frees more than its entries take does not grow, and is never refused
        for its log. On SQLite the entries themselves go into the header (decision 0148:
        ``log_held``, moved to the table in batches by the header's trigger). With
        ``header`` the caller writes the header after this call and adds the returned
        parameters to that update (``SqlBufferEditor.flush``); else they are written here
        (``repairs_counted``) and this returns ``()``.
        """
        if not repairs:
            return ()
        texts = entry_texts(repairs, time.time())
        size = sum(map(utf8_size, texts))
        counted: tuple[object, ...] = (size, "," + ",".join(reversed(texts)), len(texts))  # newest first
        if header and self.kept >= KEPT:
            return counted
        db.run("repairs_counted", (*counted, buffer_id))
        if self.kept < KEPT:  # the schema's trigger trims at ``KEPT``: a store keeping fewer trims now
            for name, arity in _SPILLS:
                if name in self.sql:
                    db.run(name, (buffer_id, self.kept)[:arity])
        return ()

    def note(self, address: Address, repair: Repair) -> bool:
        """Log a change that wrote no row in a transaction of its own, serialized with the buffer's writes.

        Nothing for an absent buffer or when its newest entry says the same; nothing
        when the owner's quota refuses the entry (the transaction rolled back).
        """
        check_address(address)
        with self.store.reading() as conn:  # a poll of the same drop: one read, no write
            found = self._newest(conn, "@address", tuple(address))
        if found is not None and found.same_as(repair):
            return False

        def work(conn: Any) -> bool:
            head = conn.execute(self.sql["header_get"], tuple(address)).fetchone()
            if head is None:
                return False
            newest = self._newest(conn, "", (int(head[0]),))
            if newest is not None and newest.same_as(repair):
                return False
            self.record(self.store.runner(conn), int(head[0]), [repair])
            return True

        try:
            return self.store.write_at(address, work)
        except QuotaExceededError:
            return False

    def _newest(self, conn: Any, by: str, key: tuple[Any, ...]) -> RepairEntry | None:
        """A buffer's newest entry (held in its header on SQLite, else the table's), by id or ``@address``."""
        head = conn.execute(self.sql["repairs_held" + by], key).fetchone()
        held = [] if head is None else held_entries(str(head[0]), int(head[1]))
        if held or head is None:
            return held[-1] if held else None
        found = conn.execute(self.sql["repairs_newest" + by], key).fetchone()
        return None if found is None else parse_entry(int(found[0]), str(found[1]))

    def page(self, address: Address, *, before: int | None = None, limit: int = PAGE) -> RepairPage:
        """The newest ``limit`` entries numbered below ``before``, newest first (one statement)."""
        check_address(address)
        check_paging(before, limit)
        below = LAST_MAX if before is None else before
        with self.store.reading() as conn:
            head = conn.execute(self.sql["repairs_held@address"], tuple(address)).fetchone()
            held = [] if head is None else held_entries(str(head[0]), int(head[1]))
            newer = [entry for entry in reversed(held) if entry.seq < below][: limit + 1]  # newest first
            below = min(below, held[0].seq) if held else below
            found = conn.execute(self.sql["repairs_page"], (*address, below, limit + 1 - len(newer))).fetchall()

            def index_of(statement: str) -> Callable[[str], int | None]:
                def find(call_id: str) -> int | None:
                    row = conn.execute(self.sql[statement], (*address, call_id)).fetchone()
                    return None if row is None else int(row[0])

                return find

            first, last = index_of("repairs_row"), index_of("repairs_row_last")
            read = [*newer, *(parse_entry(int(seq), str(text)) for seq, text in found)]
            entries = [placed(entry, last if entry.rule == REPLACING else first) for entry in read[:limit]]
        return RepairPage(entries, len(read) > limit)
