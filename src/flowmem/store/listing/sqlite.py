"""``RecordListing`` for ``SqliteStore``: its statements (``?`` placeholders).

The records table is ``WITHOUT ROWID`` with primary key ``(scope, scope_id, key)``
in SQLite's ``BINARY`` collation, so a listing is one range scan of that key in
code-point order; the value is read in the same b-tree row and sent only when asked.
"""

from __future__ import annotations

from flowmem.store.listing.sql import SqlListing
from flowmem.store.sqlite import SqliteStore

SQL: dict[str, str] = {
    "list": """SELECT key, CASE WHEN ? THEN value END, expires_at FROM records
        WHERE scope = ? AND scope_id = ? AND key >= ? AND key < ?
        AND (expires_at IS NULL OR expires_at > ?) ORDER BY key LIMIT ?""",
    "list_open": """SELECT key, CASE WHEN ? THEN value END, expires_at FROM records
        WHERE scope = ? AND scope_id = ? AND key >= ?
        AND (expires_at IS NULL OR expires_at > ?) ORDER BY key LIMIT ?""",
    "touch": """UPDATE records SET expires_at = ?
        WHERE scope = ? AND scope_id = ? AND key = ? AND value = ?
        AND expires_at IS NOT NULL AND expires_at > ?""",
}


class SqliteListing(SqlListing):
    """Lists and touches the records of one ``SqliteStore``."""

    SQL = SQL

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)
