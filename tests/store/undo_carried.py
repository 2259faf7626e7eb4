"""Undo SQLite's migration 28 (decision 0180): a declaration's entry written when declared.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 28 changed: each declaration an answer carries gets its
own ``buffer_calls`` entry again, and so does each call the header lists (its
``answered`` flag 0: what held when it was declared), and the answers' ``declared_pos``
and ``ord`` columns go. It does nothing on a database without migration 28.
"""

from __future__ import annotations

import sqlite3


def undo_carried_calls(conn: sqlite3.Connection) -> None:
    """Take the database on ``conn`` back to before SQLite's migration 28 (nothing when it lacks it)."""
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(buffer_answers)")}
    if "declared_pos" not in columns:
        return
    conn.execute("""INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered)
        SELECT buffer_id, call_id, declared_pos, ord, 0 FROM buffer_answers WHERE declared_pos IS NOT NULL""")
    conn.execute("""INSERT INTO buffer_calls (buffer_id, call_id, declared_pos, ord, answered)
        SELECT b.id, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'),
            json_extract(j.value, '$[2]'), 0 FROM buffers AS b, json_each(b.unanswered) AS j
        WHERE true ON CONFLICT DO NOTHING""")
    conn.execute("ALTER TABLE buffer_answers DROP COLUMN declared_pos")
    conn.execute("ALTER TABLE buffer_answers DROP COLUMN ord")
