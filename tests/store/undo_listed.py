"""Undo SQLite's migration 23 (issue 42 §1, decision 0137): what a database had before it.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 23 changed: the answered flags written again, the
indexes of declarations by position and of unanswered calls, the buffers' row bytes
counted in ``user_usage`` by migration 12's triggers (and the record, repair log and
vector triggers of migrations 12, 17 and 18); the new columns and index go. It does
nothing on a database without migration 23.
"""

from __future__ import annotations

import sqlite3

from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite import MIGRATIONS
from flowmem.store.vectors import sqlite as vectors_sqlite
from tests.store.undo_log_header import undo_log_in_header

# the usage triggers migration 23 made anew, by the table each is on
_USAGE_TRIGGERS = {
    "buffer_insert": "user_usage", "buffer_bytes": "user_usage", "buffer_delete": "user_usage",
    "record_insert": "user_usage", "record_value": "user_usage", "vectors_insert": "record_vectors",
    "repairs_insert": "buffer_repairs",
}  # fmt: skip


def _has(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    found = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = ? AND name = ?", (kind, name))
    return bool(found.fetchone()[0])


def undo_listed_calls(conn: sqlite3.Connection) -> None:
    """Take the database on ``conn`` back to before SQLite's migration 23 (nothing when it lacks it)."""
    undo_log_in_header(conn)  # migration 24 first (decision 0135)
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(buffers)")}
    if "unanswered" not in columns:
        return
    conn.execute("""UPDATE buffer_calls SET answered = EXISTS (SELECT 1 FROM buffer_answers AS a
        WHERE a.buffer_id = buffer_calls.buffer_id AND a.call_id = buffer_calls.call_id)""")
    if _has(conn, "table", "user_usage"):
        conn.execute("""UPDATE user_usage SET bytes = bytes + (SELECT COALESCE(SUM(b.bytes), 0)
            FROM buffers AS b WHERE b.owner = user_usage.user_id)""")
    older = [*MIGRATIONS[11], *vectors_sqlite.MIGRATION, *repairs_sqlite.MIGRATION]
    for name, table in _USAGE_TRIGGERS.items():
        conn.execute(f"DROP TRIGGER IF EXISTS usage_{name}")
        if _has(conn, "table", table):
            made = next(m for m in older if f"TRIGGER usage_{name} " in m or f"EXISTS usage_{name} " in m)
            conn.execute(made)
    conn.execute("DROP INDEX IF EXISTS buffers_owner")
    conn.execute("CREATE INDEX buffer_calls_pos ON buffer_calls (buffer_id, declared_pos)")
    conn.execute("""CREATE INDEX buffer_calls_open ON buffer_calls (buffer_id, declared_pos, ord)
        WHERE answered = 0""")
    conn.execute("ALTER TABLE buffer_rows DROP COLUMN calls")
    conn.execute("ALTER TABLE buffers DROP COLUMN unanswered")
