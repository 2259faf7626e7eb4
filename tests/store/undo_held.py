"""Undo SQLite's migration 27 (decision 0148): no entries held in the header.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 27 changed: the held entries move to the table (numbered
after its newest, as the header's trigger would move them), the insert's trim trigger is
migration 24's again and the header's ``log_held`` and ``log_count`` go. It does nothing
on a database without migration 27.
"""

from __future__ import annotations

import sqlite3

from flowmem.store.repairs import sqlite as repairs_sqlite
from tests.store.undo_carried import undo_carried_calls


def undo_held(conn: sqlite3.Connection) -> None:
    """Take the database on ``conn`` back to before SQLite's migration 27 (nothing when it lacks it)."""
    undo_carried_calls(conn)  # migration 28 first (decision 0180)
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(buffers)")}
    if "log_held" not in columns:
        return
    conn.execute("DROP TRIGGER IF EXISTS repairs_held")
    held = [int(row[0]) for row in conn.execute("SELECT id FROM buffers WHERE log_held <> ''")]
    for buffer_id in held:  # moved as the trigger moves them (a log holds at most ``KEPT``: no trim)
        conn.execute(repairs_sqlite.spill("?1", "?2")[0], (buffer_id,))
        conn.execute("UPDATE buffers SET log_held = '' WHERE id = ?", (buffer_id,))
    conn.execute(next(m for m in reversed(repairs_sqlite.IN_THE_HEADER) if "TRIGGER repairs_kept " in m))
    conn.execute("ALTER TABLE buffers DROP COLUMN log_held")
    conn.execute("ALTER TABLE buffers DROP COLUMN log_count")
