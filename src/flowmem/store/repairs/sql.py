"""``SqlRepairs``: the repair log on a SQL store (SQLite or PostgreSQL).

``record`` runs inside the append's (or the compaction's) transaction, on the runner
it writes with (a ``StatementRunner`` over its connection, or PostgreSQL's pipeline),
writes only, no read, so it adds no round trip to a pipelined append. Since decision
0135 the log's bytes are the header's: an append's entries are inserted with no trigger
under ``KEPT`` (on PostgreSQL one insert, which the pipeline sends within the append's
own write statement) and their bytes added by the header's own update, whose trigger
counts and checks them with the rows'; a trigger of the insert trims past ``KEPT``. The
quota may refuse it, and the whole append rolls back. ``note`` logs a change that wrote no row (a drop on a read, a
refusal) in a small write of its own. ``page`` reads the entries and the rows they wrote in one snapshot.
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
    RepairPage,
    check_paging,
    entry_texts,
    parse_entry,
    placed,
)
from flowmem.store.rows import check_address, utf8_size


class SqlRepairs:
    """``SupportsRepairs`` over a ``SqlStore``'s engine, and the append's ``record`` hook."""

    def __init__(self, store: SqlEngine[Any], kept: int = KEPT) -> None:
        self.store = store
        self.sql = store.statements
        self.kept = kept  # the newest entries a buffer keeps (at most ``KEPT``: a trigger trims there)
        self.joined = "repairs_trim_bytes" not in self.sql  # PostgreSQL: a write's entries in one statement
        self.trims = ("repairs_trim",) if self.joined else ("repairs_trim_bytes", "repairs_trim")

    def record(self, db: SqlRunner, buffer_id: int, repairs: Sequence[Repair], header: bool = False) -> int:
        """Log a write's repairs in its transaction (``db``), keeping the newest ``kept``.

        Implements the log of MEM-1, MEM-2, MEM-3 and MEM-10, of window evictions and of
        compactions (issue 37 §2). The entries' bytes are the header's ``log_bytes``
        (decision 0135), counted and checked with the rows' by the header's trigger: a
        write that frees more than its entries take does not grow, and is never refused
        for its log. With ``header`` the caller writes the header after this call and
        adds the returned bytes in that update (``SqlBufferEditor.flush``); else they are
        added here (``repairs_counted``) and this returns 0.
        """
        if not repairs:
            return 0
        texts = entry_texts(repairs, time.time())
        if self.joined and len(texts) > 1:  # PostgreSQL: one insert for all (a JSON text has no newline)
            db.run("repairs_add", (buffer_id, buffer_id, "\n".join(texts)))
        elif self.joined:
            db.run("repairs_add1", (buffer_id, buffer_id, texts[0]))
        else:
            for text in texts:
                db.run("repairs_add", (buffer_id, buffer_id, text))
        if self.kept < KEPT:  # the schema's trigger trims at ``KEPT``
            for name in self.trims:
                db.run(name, (buffer_id, self.kept))
        size = sum(map(utf8_size, texts))
        if header:
            return size
        db.run("repairs_counted", (size, buffer_id))
        return 0

    def note(self, address: Address, repair: Repair) -> bool:
        """Log a change that wrote no row in a transaction of its own, serialized with the buffer's writes.

        Nothing for an absent buffer or when its newest entry says the same; nothing
        when the owner's quota refuses the entry (the transaction rolled back).
        """
        check_address(address)
        with self.store.reading() as conn:  # a poll of the same drop: one read, no write
            found = conn.execute(self.sql["repairs_newest@address"], tuple(address)).fetchone()
        if found is not None and parse_entry(int(found[0]), str(found[1])).same_as(repair):
            return False

        def work(conn: Any) -> bool:
            head = conn.execute(self.sql["header_get"], tuple(address)).fetchone()
            if head is None:
                return False
            newest = conn.execute(self.sql["repairs_newest"], (int(head[0]),)).fetchone()
            if newest is not None and parse_entry(int(newest[0]), str(newest[1])).same_as(repair):
                return False
            self.record(self.store.runner(conn), int(head[0]), [repair])
            return True

        try:
            return self.store.write_at(address, work)
        except QuotaExceededError:
            return False

    def page(self, address: Address, *, before: int | None = None, limit: int = PAGE) -> RepairPage:
        """The newest ``limit`` entries numbered below ``before``, newest first (one statement)."""
        check_address(address)
        check_paging(before, limit)
        below = LAST_MAX if before is None else before
        with self.store.reading() as conn:
            found = conn.execute(self.sql["repairs_page"], (*address, below, limit + 1)).fetchall()

            def index_of(statement: str) -> Callable[[str], int | None]:
                def find(call_id: str) -> int | None:
                    row = conn.execute(self.sql[statement], (*address, call_id)).fetchone()
                    return None if row is None else int(row[0])

                return find

            first, last = index_of("repairs_row"), index_of("repairs_row_last")
            entries = [
                placed(entry, last if entry.rule == REPLACING else first)
                for entry in (parse_entry(int(seq), str(text)) for seq, text in found[:limit])
            ]
        return RepairPage(entries, len(found) > limit)
