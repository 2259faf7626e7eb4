"""``SqlArchive``: the ``SupportsArchive`` capability on a SQL store (SQLite or PostgreSQL).

A compaction is one transaction of the store serialized with the buffer's appends
(``_write_serialized``: SQLite's write transaction, PostgreSQL's advisory lock).
The rows leave the buffer through ``SqlBufferEditor`` (so its call and answer
indexes stay exact) and their texts go to ``buffer_archive`` unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowmem.core import call_ids
from flowmem.core.compaction import prefix_digest
from flowmem.store.archive import EVERY_ROW, Archived, SummaryMaker, WithArchive
from flowmem.store.base import Address
from flowmem.store.editor import SqlBufferEditor, load_row
from flowmem.store.rows import check_address, utf8_size
from flowmem.store.sqlbase import LAST_MAX

if TYPE_CHECKING:
    from flowmem.store.sqlbase import SqlStore


class _ArchiveEditor(SqlBufferEditor):
    """``SqlBufferEditor`` whose header also counts the bytes moved to the archive."""

    def keep_bytes(self, size: int) -> None:
        """Count ``size`` archived bytes in the buffer's stored bytes (its limit, its quota)."""
        self._bytes += size
        self._dirty = True


class SqlArchive:
    """``SupportsArchive`` over a ``SqlStore``'s connection and transactions."""

    def __init__(self, store: SqlStore[Any]) -> None:
        self.store = store
        self.sql = store.SQL

    def compact(
        self, address: Address, kept: int, digest: str, summary: SummaryMaker
    ) -> Archived | None:
        """Archive the rows before cursor ``kept`` if the rows up to it still have ``digest``."""
        check_address(address)
        sql = self.sql

        def work(conn: Any) -> Archived | None:
            head = conn.execute(sql["header_get"], tuple(address)).fetchone()
            if head is None:
                return None
            bid = int(head[0])
            upto = LAST_MAX if kept == EVERY_ROW else kept
            found = [
                (int(pos), str(body))
                for pos, body in conn.execute(sql["archive_prefix"], (bid, upto)).fetchall()
            ]
            moved = found if kept == EVERY_ROW else found[:-1]
            if not moved or prefix_digest(found) != digest:
                return None
            if kept != EVERY_ROW and found[-1][0] != kept:
                return None
            last = conn.execute(sql["archive_last"], (bid,)).fetchone()
            first = (int(last[0]) if last else 0) + 1
            rows = summary(first, first + len(moved) - 1)
            editor = _ArchiveEditor(self.store._runner(conn), address, head)
            for pos, _ in moved[1:]:
                editor.delete(pos)
            editor.replace(moved[0][0], rows[0])
            editor.insert_after(moved[0][0], rows[1:])
            size = 0
            for seq, (_, body) in enumerate(moved, start=first):
                conn.execute(sql["archive_insert"], (bid, seq, body))
                size += utf8_size(body)
                for cid in call_ids(load_row(body)):
                    conn.execute(sql["archive_call"], (bid, cid, True))
            editor.keep_bytes(size)
            editor.flush()
            return Archived(len(moved), first, first + len(moved) - 1, size, rows)

        return self.store._write_serialized(address, work)

    def read(self, address: Address) -> WithArchive:
        """Return the archived rows' and the live rows' texts, in order (one statement)."""
        check_address(address)
        with self.store._connection() as conn:
            found = conn.execute(self.sql["archive_read"], (*address, *address)).fetchall()
        archived = [str(body) for part, body in found if int(part) == 0]
        return WithArchive(archived, [str(body) for part, body in found if int(part) == 1])
