"""Undo PostgreSQL's migration 34 (decision 0190): a declaration's row written when declared.

The upgrade tests take a database back to an older schema before opening it again; this
gives back what migration 34 changed: each call the header lists gets its declaration's
row of ``buffer_call_ids`` again (``answered`` false: what held when it was declared). A
row holding an answer and the declaration it carries is one the older layout wrote too
(an answer set on its declaration's row). Nothing is done for a listed declaration that
has its row already (a database without migration 34). Migration 35 is undone first
(``undo_answered_rows``).
"""

from __future__ import annotations

from typing import Any

from tests.store.postgres.undo_answered_rows import undo_answered_rows

_LISTED_ROWS = """INSERT INTO buffer_call_ids (buffer_id, call_id, declared_pos, ord, answered)
    SELECT b.id, o.e ->> 0, (o.e ->> 1)::bigint, (o.e ->> 2)::integer, FALSE
    FROM buffers AS b, json_array_elements(b.unanswered::json) AS o(e)
    WHERE NOT EXISTS (SELECT 1 FROM buffer_call_ids AS c WHERE c.buffer_id = b.id
        AND c.call_id = o.e ->> 0 AND c.declared_pos = (o.e ->> 1)::bigint AND c.ord IS NOT NULL)"""


def undo_carried(conn: Any) -> None:
    """Take the PostgreSQL database on ``conn`` back to before its migration 34 (and 35 first)."""
    undo_answered_rows(conn)
    found = conn.execute(
        """SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema()
        AND table_name = 'buffers' AND column_name = 'unanswered'"""
    ).fetchone()
    tables = conn.execute(
        """SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()
        AND table_name = 'buffer_call_ids'"""
    ).fetchone()
    if found[0] and tables[0]:
        conn.execute(_LISTED_ROWS)
