"""Undo PostgreSQL's migration 35 (decision 0194): answers back in ``buffer_call_ids``.

The upgrade tests take a database back to an older schema before opening it again; this
gives back what migration 35 changed: every tool row with a call id is an answer's row of
``buffer_call_ids`` again, holding the declaration the row carried (migration 34's layout),
the table's answer columns and the views' write trigger come back, and the rows' key, their
call ids, carried columns and the healed function go. Nothing is done on a database without migration 35.
"""

from __future__ import annotations

from typing import Any

from flowmem.store.postgres import callids

_ANSWERS_BACK = """INSERT INTO buffer_call_ids (buffer_id, call_id, answer_pos, healed, declared_pos, ord, answered)
    SELECT buffer_id, call_id, pos, flowmem_healed(body), declared_pos, declared_ord,
        CASE WHEN declared_pos IS NOT NULL THEN TRUE END
    FROM buffer_rows WHERE call_id IS NOT NULL"""


def undo_answered_rows(conn: Any) -> None:
    """Take the PostgreSQL database on ``conn`` back to before its migration 35."""
    found = conn.execute(
        """SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema()
        AND table_name = 'buffer_rows' AND column_name = 'declared_pos'"""
    ).fetchone()
    if not found[0]:
        return
    conn.execute("DROP VIEW buffer_calls")
    conn.execute("DROP VIEW buffer_answers")
    conn.execute(
        """ALTER TABLE buffer_call_ids ADD COLUMN answer_pos BIGINT, ADD COLUMN healed BOOLEAN,
        ALTER COLUMN declared_pos DROP NOT NULL, ALTER COLUMN ord DROP NOT NULL"""
    )
    conn.execute(_ANSWERS_BACK)
    conn.execute("DROP INDEX buffer_rows_answers")
    conn.execute(
        "ALTER TABLE buffer_rows DROP COLUMN call_id, DROP COLUMN declared_pos, DROP COLUMN declared_ord"
    )
    conn.execute("DROP FUNCTION flowmem_healed(text)")
    views = [
        s
        for s in callids.MIGRATION
        if s.lstrip().startswith(("CREATE VIEW", "CREATE FUNCTION", "CREATE TRIGGER"))
    ]
    for statement in views:
        conn.execute(statement)
    conn.execute("DELETE FROM flowmem_schema WHERE version >= 35")
