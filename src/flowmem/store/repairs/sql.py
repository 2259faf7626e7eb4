"""``SqlRepairs``: the repair log on a SQL store (SQLite or PostgreSQL).

``record`` runs inside the append's transaction, on the runner the append writes with
(a ``StatementRunner`` over its connection, or PostgreSQL's pipeline), after the rules
ran and before the header is written: writes only, no read, so it adds no round trip
to a pipelined append. The insert's quota trigger may refuse it, and the whole append
rolls back. ``page`` reads the entries and the rows they wrote in one snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from flowmem.core import Repair
from flowmem.store.base import Address
from flowmem.store.editor import SqlRunner
from flowmem.store.engine import LAST_MAX, SqlEngine
from flowmem.store.repairs import (
    KEPT,
    PAGE,
    RepairPage,
    check_paging,
    entry_texts,
    parse_entry,
    placed,
)
from flowmem.store.rows import check_address


class SqlRepairs:
    """``SupportsRepairs`` over a ``SqlStore``'s engine, and the append's ``record`` hook."""

    def __init__(self, store: SqlEngine[Any], kept: int = KEPT) -> None:
        self.store = store
        self.sql = store.statements
        self.kept = kept  # the newest entries a buffer keeps

    def record(self, db: SqlRunner, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Log an append's repairs in its transaction (``db``), keeping the newest ``kept``.

        Implements the log of MEM-1, MEM-2, MEM-3 and MEM-10 (issue 37 §2).
        """
        if not repairs:
            return
        for text in entry_texts(repairs, time.time()):
            db.run("repairs_insert", (buffer_id, text, buffer_id))
        db.run("repairs_trim", (buffer_id, buffer_id, self.kept))

    def page(self, address: Address, *, before: int | None = None, limit: int = PAGE) -> RepairPage:
        """The newest ``limit`` entries numbered below ``before``, newest first (one statement)."""
        check_address(address)
        check_paging(before, limit)
        below = LAST_MAX if before is None else before
        with self.store.reading() as conn:
            found = conn.execute(self.sql["repairs_page"], (*address, below, limit + 1)).fetchall()

            def index_of(call_id: str) -> int | None:
                row = conn.execute(self.sql["repairs_row"], (*address, call_id)).fetchone()
                return None if row is None else int(row[0])

            entries = [placed(parse_entry(int(seq), str(text)), index_of) for seq, text in found[:limit]]
        return RepairPage(entries, len(found) > limit)
