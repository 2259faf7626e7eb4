"""Undo SQLite's migration 24 (decision 0135): the repair log's bytes back in ``user_usage``.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 24 changed: the log's bytes counted in ``user_usage`` by
the log's own triggers (migrations 17 and 19, as migration 23 left them), the quota
triggers that summed the headers' rows only, and no ``log_bytes`` column. It does
nothing on a database without migration 24.
"""

from __future__ import annotations

import sqlite3

from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite.schema import LISTED_CALLS
from tests.store.undo_reserved import undo_reserved

# the triggers migration 24 made anew, and the tables they are on
_TRIGGERS = {
    "usage_buffer_bytes": "buffers", "usage_record_insert": "records", "usage_record_value": "records",
    "usage_vectors_insert": "record_vectors", "usage_repairs_insert": "buffer_repairs",
    "usage_repairs_delete": "buffer_repairs", "repairs_kept": "buffer_repairs",
}  # fmt: skip


def _has(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    found = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = ? AND name = ?", (kind, name))
    return bool(found.fetchone()[0])


def undo_log_in_header(conn: sqlite3.Connection) -> None:
    """Take the database on ``conn`` back to before SQLite's migration 24 (nothing when it lacks it)."""
    undo_reserved(conn)  # migration 25 first (the reservation, decision 0137)
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(buffers)")}
    if "log_bytes" not in columns:
        return
    conn.execute("""UPDATE user_usage SET bytes = bytes + (SELECT COALESCE(SUM(b.log_bytes), 0)
        FROM buffers AS b WHERE b.owner = user_usage.user_id)""")
    older = [*LISTED_CALLS, *repairs_sqlite.MIGRATION, *repairs_sqlite.TRIM_IN_TRIGGER]
    for name, table in _TRIGGERS.items():
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        if _has(conn, "table", table):
            conn.execute(next(m for m in reversed(older) if f"CREATE TRIGGER {name} " in m))
    conn.execute("ALTER TABLE buffers DROP COLUMN log_bytes")
