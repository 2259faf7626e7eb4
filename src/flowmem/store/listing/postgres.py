"""``RecordListing`` for ``PostgresStore``: its statements (``%s`` placeholders).

A listing must order keys by code point, as the other backends do. In a database
whose collation is C (``initdb --locale=C``, what docs/deploy-postgres.md and the
tests use) the primary key ``(scope, scope_id, key)`` already is in that order, and a
listing is one range scan of it. In any other database (``en_US.UTF-8``, ICU) the
index's order is the locale's, in which a key range is not a key prefix: there the
statements compare and sort ``key COLLATE "C"`` (``@c``), correct but read every
record of the scope id and sort the page. Which one a store uses is read once from
``pg_database``: only the libc provider with ``C`` or ``POSIX`` counts as C.
"""

from __future__ import annotations

from flowmem.store.listing.sql import SqlListing
from flowmem.store.postgres import PostgresStore

_COLUMNS = "SELECT key, CASE WHEN %s THEN value END, expires_at FROM records"
_LIVE = "AND (expires_at IS NULL OR expires_at > %s)"

SQL: dict[str, str] = {
    "list": f"""{_COLUMNS}
        WHERE scope = %s AND scope_id = %s AND key >= %s AND key < %s
        {_LIVE} ORDER BY key LIMIT %s""",
    "list_open": f"""{_COLUMNS}
        WHERE scope = %s AND scope_id = %s AND key >= %s
        {_LIVE} ORDER BY key LIMIT %s""",
    "list@c": f"""{_COLUMNS}
        WHERE scope = %s AND scope_id = %s
        AND key COLLATE "C" >= %s AND key COLLATE "C" < %s
        {_LIVE} ORDER BY key COLLATE "C" LIMIT %s""",
    "list_open@c": f"""{_COLUMNS}
        WHERE scope = %s AND scope_id = %s AND key COLLATE "C" >= %s
        {_LIVE} ORDER BY key COLLATE "C" LIMIT %s""",
    "touch": """UPDATE records SET expires_at = %s
        WHERE scope = %s AND scope_id = %s AND key = %s AND value = %s
        AND expires_at IS NOT NULL AND expires_at > %s""",
    # datlocprovider exists from PostgreSQL 15 on; before it every database is libc's
    "collation": """SELECT d.datcollate, to_jsonb(d) ->> 'datlocprovider'
        FROM pg_database d WHERE d.datname = current_database()""",
}


class PostgresListing(SqlListing):
    """Lists and touches the records of one ``PostgresStore``."""

    SQL = SQL

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store)
        self._collation_is_c: bool | None = None

    def collation_is_c(self) -> bool:
        """True when the database's own collation orders text by code point (read once)."""
        if self._collation_is_c is None:
            with self.store.connection() as conn:
                row = conn.execute(SQL["collation"]).fetchone()
            collate, provider = (row[0], row[1]) if row is not None else (None, None)
            self._collation_is_c = provider in (None, "c") and collate in ("C", "POSIX")
        return self._collation_is_c

    def statement(self, name: str) -> str:
        """The named statement; its ``COLLATE "C"`` form when the database's collation is not C."""
        if name.startswith("list") and not self.collation_is_c():
            return SQL[f"{name}@c"]
        return SQL[name]
