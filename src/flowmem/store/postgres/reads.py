"""``PostgresReads``: how ``PostgresStore`` reads a buffer, in fewer round trips than the default.

A base of ``PostgresStore`` over ``SqlStore``: a snapshot is one transaction, a
whole buffer streams through a server-side cursor, a paged read is one statement
(the server cuts the page), and the last rows of a buffer are read by its id, first
found, with an unprepared indexed statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from flowmem.store.base import Address, BodyPage
from flowmem.store.paging import PageAsk, check_version
from flowmem.store.postgres.queries import SQL
from flowmem.store.sqlbase import LAST_MAX, SqlStore


class PostgresReads(SqlStore[psycopg.Connection[Any]]):
    """The reads of a buffer ``PostgresStore`` does its own way (``SqlStore``'s hooks and ``page_bodies``)."""

    @contextmanager
    def _reading(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a connection inside one transaction, so several reads see one snapshot."""
        with self._connection() as conn, conn.transaction():
            yield conn

    def _stream_batches(
        self, conn: psycopg.Connection[Any], address: Address, batch: int
    ) -> Iterator[list[tuple[str]]]:
        """Yield bodies through a server-side cursor: the server sends ``batch`` rows at a time."""
        with conn.cursor(name="flowmem_iter_rows") as cursor:
            cursor.execute(SQL["load_all"], tuple(address))
            while chunk := cursor.fetchmany(batch):
                yield chunk

    def _page(self, address: Address, ask: PageAsk) -> BodyPage:
        """One page of a paged read in one statement: one snapshot, one round trip.

        The server cuts the page at ``chars`` bytes (``octet_length``), so only the
        page crosses the network.
        """
        after, before, last, rows, chars = ask.after, ask.before, ask.last, ask.rows, ask.chars
        high = LAST_MAX if before is None else min(before, LAST_MAX)
        low = -1 if after is None else after
        limit = 0 if last == 0 else rows + 1
        page = (high, limit, rows, chars, *address)
        with self._connection() as conn:
            if last is None or last == 0:
                found = conn.execute(SQL["page_read"], (low, *page)).fetchall()
            else:
                params = (high, min(last, LAST_MAX), low, *page)
                found = conn.execute(SQL["page_read_last"], params).fetchall()
        head = (int(found[0][0]), int(found[0][1])) if found else None
        check_version(address, head, ask.version)
        if not found or head is None:
            return BodyPage(None, 0)
        bodies = [(int(r[4]), str(r[5])) for r in found if r[4] is not None]
        fetched = int(found[0][6] or 0)
        older = last is not None and last > 0 and found[0][3] is not None
        return BodyPage(head, int(found[0][2]), bodies, older, fetched > len(bodies))

    def _load_last(
        self, conn: psycopg.Connection[Any], address: Address, last: int
    ) -> list[tuple[str]]:
        """Return the last ``last`` bodies: the buffer id first, then an unprepared indexed read."""
        head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
        if head is None:
            return []
        found: list[tuple[str]] = conn.execute(
            SQL["load_last"], (head[0], last), prepare=False
        ).fetchall()
        return found

    def _bodies_last(
        self, conn: psycopg.Connection[Any], address: Address, before: int, last: int
    ) -> list[tuple[int, str]]:
        """Return the last ``last`` (pos, body) below ``before``: the buffer id first, unprepared."""
        head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
        if head is None:
            return []
        found: list[tuple[int, str]] = conn.execute(
            SQL["bodies_last_before"], (head[0], before, last), prepare=False
        ).fetchall()
        return found


__all__ = ["PostgresReads"]
