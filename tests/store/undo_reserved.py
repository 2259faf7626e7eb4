"""Undo SQLite's migration 25 (decision 0137, "the reservation"): no ``buffers.reserved``.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 25 changed: the reservations leave ``user_usage.bytes``,
the usage triggers are migration 24's again and the column goes. It does nothing on a
database without migration 25.
"""

from __future__ import annotations

import sqlite3

from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite.schema import LISTED_CALLS
from tests.store.undo_held import undo_held

# the triggers migration 25 made anew, and the tables they are on
_TRIGGERS = {
    "usage_buffer_bytes": "buffers", "usage_buffer_delete": "buffers", "usage_record_insert": "records",
    "usage_record_value": "records", "usage_vectors_insert": "record_vectors",
}  # fmt: skip


def _has(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    found = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = ? AND name = ?", (kind, name))
    return bool(found.fetchone()[0])


def undo_reserved(conn: sqlite3.Connection) -> None:
    """Take the database on ``conn`` back to before SQLite's migration 25 (nothing when it lacks it)."""
    undo_held(conn)  # migration 27 first (decision 0148)
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(buffers)")}
    if "reserved" not in columns:
        return
    conn.execute("""UPDATE user_usage SET bytes = bytes - (SELECT COALESCE(SUM(b.reserved), 0)
        FROM buffers AS b WHERE b.owner = user_usage.user_id)""")
    conn.execute("DROP TRIGGER IF EXISTS usage_buffer_reserved")
    older = [*LISTED_CALLS, *repairs_sqlite.IN_THE_HEADER]
    for name, table in _TRIGGERS.items():
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        if _has(conn, "table", table):
            conn.execute(next(m for m in reversed(older) if f"CREATE TRIGGER {name} " in m))
    conn.execute("ALTER TABLE buffers DROP COLUMN reserved")
