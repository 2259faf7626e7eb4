"""Undo PostgreSQL's migration 28 (decision 0159): ``buffer_calls`` and ``buffer_answers`` tables again.

The upgrade tests take a database back to an older schema before opening it again;
this gives back what migration 28 changed: the declarations and the answers in tables
of their own, with the keys and the index of moved declarations migration 27 left, and
no ``buffer_call_ids``, views or trigger. It does nothing on a database without it.
"""

from __future__ import annotations

from typing import Any

from tests.store.postgres.undo_carried import undo_carried


def undo_call_ids(conn: Any) -> None:
    """Take the PostgreSQL database on ``conn`` back to before its migration 28 (nothing when it lacks it)."""
    found = conn.execute(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_name = 'buffer_call_ids'"
    ).fetchone()
    if not found[0]:
        return
    undo_carried(conn)  # migration 34 first (decision 0190)
    conn.execute("""CREATE TEMP TABLE calls_back AS
        SELECT buffer_id, call_id, declared_pos, ord, answered FROM buffer_calls""")
    conn.execute(
        "CREATE TEMP TABLE answers_back AS SELECT buffer_id, call_id, pos, healed FROM buffer_answers"
    )
    conn.execute("DROP VIEW buffer_calls")
    conn.execute("DROP VIEW buffer_answers")
    conn.execute("DROP FUNCTION flowmem_call_ids_write()")
    conn.execute("DROP TABLE buffer_call_ids")
    conn.execute("""CREATE TABLE buffer_calls (
        buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL,
        declared_pos BIGINT NOT NULL, ord INTEGER NOT NULL, answered BOOLEAN NOT NULL,
        PRIMARY KEY (buffer_id, call_id, declared_pos))""")
    conn.execute(
        "CREATE INDEX buffer_calls_moved ON buffer_calls (buffer_id) WHERE declared_pos < 0"
    )
    conn.execute("""CREATE TABLE buffer_answers (
        buffer_id BIGINT NOT NULL, call_id TEXT NOT NULL, pos BIGINT NOT NULL,
        healed BOOLEAN NOT NULL, PRIMARY KEY (buffer_id, call_id, pos))""")
    conn.execute("INSERT INTO buffer_calls SELECT * FROM calls_back")
    conn.execute("INSERT INTO buffer_answers SELECT * FROM answers_back")
    conn.execute("DROP TABLE calls_back")
    conn.execute("DROP TABLE answers_back")
