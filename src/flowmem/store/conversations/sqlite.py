"""SQLite's conversation tables (the pydantic-ai migration) and their statements, by name."""

from __future__ import annotations

from flowmem.store.conversations.statements import statements
from flowmem.store.conversations.tables import line_tables, tables

MIGRATION: tuple[str, ...] = tables("INTEGER", " WITHOUT ROWID")

UPGRADE: tuple[str, ...] = (
    *line_tables("INTEGER"),
    """CREATE TRIGGER pa_messages_drop AFTER DELETE ON pa_conversations BEGIN
        DELETE FROM pa_messages WHERE conversation_id = OLD.conversation_id;
    END""",
)

SQL: dict[str, str] = {
    **statements("?", "born"),
    # a line's declarations where SQLite keeps them since its migration 28 (decision 0180): an
    # entry of their own, carried by their answer's entry, or the header's list of open calls,
    # which the editor writes when it flushes: the rows appended since (past the stored header's
    # last major) are read for their own call ids, and each declaration is checked on its row
    "pa_declarations": """WITH b AS (SELECT id, unanswered, last_major FROM buffers
                WHERE scope = 'session' AND scope_id = ? AND key = ?),
            d AS (SELECT c.call_id AS cid, c.declared_pos AS pos FROM b JOIN buffer_calls AS c
                    ON c.buffer_id = b.id
                UNION SELECT a.call_id, a.declared_pos FROM b JOIN buffer_answers AS a
                    ON a.buffer_id = b.id WHERE a.declared_pos IS NOT NULL
                UNION SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
                    FROM b, json_each(b.unanswered) AS j
                UNION SELECT j.value, r.pos FROM b JOIN buffer_rows AS r ON r.buffer_id = b.id
                    AND r.pos > (b.last_major << 20), json_each(r.calls) AS j WHERE r.calls IS NOT NULL)
        SELECT d.cid, d.pos, EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = b.id AND a.call_id = d.cid), r.body
            FROM b, d JOIN buffer_rows AS r ON r.buffer_id = b.id AND r.pos = d.pos
        WHERE (d.cid = ? OR substr(d.cid, 1, ?) = ?)
            AND EXISTS (SELECT 1 FROM json_each(r.calls) AS k WHERE k.value = d.cid)
        ORDER BY d.pos, d.cid""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    9: MIGRATION,  # pydantic-ai conversation records and where their entries end (decision 0051)
    20: UPGRADE,  # each entry's message as pydantic-ai's JSON, and the line they make whole (decision 0131)
}
