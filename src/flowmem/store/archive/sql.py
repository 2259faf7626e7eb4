"""``SqlArchive``: the ``SupportsArchive`` capability on a SQL store (SQLite or PostgreSQL).

A compaction is one transaction of the store serialized with the buffer's appends
(``write_at``: SQLite's write transaction, PostgreSQL's advisory lock).
The rows leave the buffer through ``SqlBufferEditor`` (so its call and answer
indexes stay exact) and their texts go to ``buffer_archive`` unchanged.
"""

from __future__ import annotations

from typing import Any

from flowmem.core import Repair
from flowmem.core.compaction import prefix_digest
from flowmem.core.repairs import COMPACTION
from flowmem.core.tokens import estimate_tokens
from flowmem.store.archive import EVERY_ROW, Archived, SummaryMaker, SupportsArchive, WithArchive
from flowmem.store.base import Address, BodyPage
from flowmem.store.editor import SqlBufferEditor
from flowmem.store.engine import LAST_MAX, SqlKind
from flowmem.store.paging import PageAsk, check_version
from flowmem.store.rows import check_address, stored_json, utf8_size

# the statements that drop the archived rows and their entries, in order; a dialect without one skips it
_DROPS = (
    "archive_rows_drop", "archive_carried_kept", "archive_calls_drop", "archive_carried_drop", "archive_answers_drop",
)  # fmt: skip


class _ArchiveEditor(SqlBufferEditor):
    """``SqlBufferEditor`` that counts rows dropped in bulk, and the bytes kept in the archive."""

    def dropped(self, rows: int, size: int, tokens: int) -> None:
        """``rows`` rows of ``size`` bytes and ``tokens`` default tokens left the buffer by a bulk delete."""
        self._count -= rows
        self._bytes -= size
        self._tokens -= tokens
        self._dirty = True

    def keep_bytes(self, size: int) -> None:
        """Count ``size`` archived bytes in the buffer's stored bytes (its limit, its quota)."""
        self._bytes += size
        self._dirty = True


class SqlArchive(SqlKind, SupportsArchive):
    """``SupportsArchive`` over a ``SqlStore``'s connection and transactions."""

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
            low, high = moved[0][0], moved[-1][0]
            conn.execute(sql["archive_insert"], (first - 1, bid, high))
            conn.execute(sql["archive_calls"], (True, bid, high))
            for name in _DROPS:  # SQLite's carried declarations too (decision 0180)
                if name in sql:
                    conn.execute(sql[name], (bid, low, high))
            conn.execute(sql["archive_reopen"], (False, bid, True))
            if "archive_reopened" in sql:
                conn.execute(sql["archive_reopened"], (bid,))
            editor = _ArchiveEditor(self.store.runner(conn), address, head)
            sizes = [utf8_size(body) for _, body in moved]
            tokens = sum(estimate_tokens(stored_json(body)) for _, body in moved[1:])
            editor.dropped(len(moved) - 1, sum(sizes[1:]), tokens)
            editor.replace(low, rows[0])  # the first archived row's place: the summary's
            editor.insert_after(low, rows[1:])
            size = sum(sizes)
            editor.keep_bytes(size)
            editor.flush()
            count, archived = len(moved), (first, first + len(moved) - 1)
            logged = Repair(COMPACTION, (), count, tuple(range(count)), archived)
            self.store.record_repairs(conn, editor.buffer_id, [logged])  # issue 37 §2
            return Archived(len(moved), first, first + len(moved) - 1, size, rows)

        return self.store.write_at(address, work)

    def read(self, address: Address) -> WithArchive:
        """Return the archived rows' and the live rows' texts, in order (one statement)."""
        check_address(address)
        with self.store.connection() as conn:
            found = conn.execute(self.sql["archive_read"], (*address, *address)).fetchall()
        archived = [str(body) for part, body in found if int(part) == 0]
        return WithArchive(archived, [str(body) for part, body in found if int(part) == 1])

    def _page(self, address: Address, ask: PageAsk) -> BodyPage:
        """One page of the archived rows (``SupportsArchive.page``): one statement, one snapshot."""
        after, rows, chars = ask.after, ask.rows, ask.chars
        low = -1 if after is None else min(after, LAST_MAX)
        sized = "archive_page_sized" in self.sql  # PostgreSQL: the page cut by size on the server
        name = "archive_page_sized" if sized else "archive_page"
        params = (low, rows + 1, rows, chars, *address) if sized else (low, *address, rows + 1)
        bodies: list[tuple[int, str]] = []
        head: tuple[int, int] | None = None
        count, size, more = 0, 0, False
        with self.store.connection() as conn:
            for stamp, changes, counted, seq, body, fetched in conn.execute(self.sql[name], params):
                head, count = (int(stamp), int(changes)), int(counted)
                if seq is None:
                    break
                if len(bodies) >= rows or size >= chars:
                    more = True
                    break
                bodies.append((int(seq), str(body)))
                size += len(body)
                more = fetched is not None and int(fetched) > len(bodies)
        check_version(address, head, ask.version)
        return BodyPage(head, count, bodies, False, more)
