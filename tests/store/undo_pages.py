"""Undo SQLite's migration 22 (issue 42 §1, decision 0129): what a database had before it.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 22 changed: the answered flags written again, the
indexes of declarations by position and of unanswered calls, the buffers' row and log
bytes counted in ``user_usage`` by the triggers of migrations 12, 17 and 18; the new
columns, index and triggers go. It does nothing on a database without migration 22.
"""

from __future__ import annotations

import sqlite3

from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite import MIGRATIONS
from flowmem.store.vectors import sqlite as vectors_sqlite

_NEW_TRIGGERS = (
    "calls_declared", "calls_undeclared", "calls_moved", "answers_added", "answers_removed",
    "repairs_logged", "repairs_dropped",
)  # fmt: skip
# the usage triggers migration 22 made anew, by the table they are on
_USAGE_TRIGGERS = {
    "buffer_insert": "user_usage", "buffer_bytes": "user_usage", "buffer_delete": "user_usage",
    "record_insert": "user_usage", "record_value": "user_usage", "vectors_insert": "record_vectors",
}  # fmt: skip


def _has(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    found = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = ? AND name = ?", (kind, name))
    return bool(found.fetchone()[0])


def undo_append_pages(conn: sqlite3.Connection) -> None:
    """Take the database on ``conn`` back to before SQLite's migration 22 (nothing when it lacks it)."""
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(buffers)")}
    if "unanswered" not in columns:
        return
    conn.execute("""UPDATE buffer_calls SET answered = EXISTS (SELECT 1 FROM buffer_answers AS a
        WHERE a.buffer_id = buffer_calls.buffer_id AND a.call_id = buffer_calls.call_id)""")
    for trigger in _NEW_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    if _has(conn, "table", "user_usage"):
        conn.execute("""UPDATE user_usage SET bytes = bytes + (SELECT COALESCE(SUM(b.bytes + b.log_bytes), 0)
            FROM buffers AS b WHERE b.owner = user_usage.user_id)""")
    older = [*MIGRATIONS[11], *vectors_sqlite.MIGRATION]
    for name, table in _USAGE_TRIGGERS.items():
        conn.execute(f"DROP TRIGGER IF EXISTS usage_{name}")
        if _has(conn, "table", table):
            made = next(m for m in older if f"TRIGGER usage_{name} " in m or f"EXISTS usage_{name} " in m)
            conn.execute(made)
    if _has(conn, "table", "buffer_repairs"):
        for statement in repairs_sqlite.MIGRATION[1:]:  # the log's usage triggers of migration 17
            conn.execute(statement)
    conn.execute("DROP INDEX IF EXISTS buffers_owner")
    conn.execute("CREATE INDEX buffer_calls_pos ON buffer_calls (buffer_id, declared_pos)")
    conn.execute("""CREATE INDEX buffer_calls_open ON buffer_calls (buffer_id, declared_pos, ord)
        WHERE answered = 0""")
    conn.execute("ALTER TABLE buffer_rows DROP COLUMN calls")
    for column in ("unanswered", "log_seq", "log_bytes"):
        conn.execute(f"ALTER TABLE buffers DROP COLUMN {column}")
