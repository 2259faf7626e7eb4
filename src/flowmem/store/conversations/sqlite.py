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

# a line's declarations where SQLite keeps them since its migration 28 (decision 0180): an
# entry of their own, carried by their answer's entry, or the header's list of open calls,
# which the editor writes when it flushes: the rows appended since (past the stored header's
# last major) are read for their own call ids, and each declaration is checked on its row.
# The parameters: conversation, line key, call id, the qualified prefix's length, the prefix
# (``<id>@``, ``lines.QUALIFIER``)
PLAIN_DECLARATIONS = """WITH b AS (SELECT id, unanswered, last_major FROM buffers
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
        ORDER BY d.pos, d.cid"""
"""The plain path of ``DECLARATIONS``: every entry and carried declaration of the line read, then filtered."""

_UPTO = "substr(?5, 1, ?4 - 1) || char(unicode(substr(?5, ?4)) + 1)"
"""The least text past every one the prefix ``?5`` (ending in ``@``) starts: ``<id>A``."""

DECLARATIONS = f"""WITH b AS (SELECT id, unanswered, last_major FROM buffers
                WHERE scope = 'session' AND scope_id = ?1 AND key = ?2),
            d AS (SELECT c.call_id AS cid, c.declared_pos AS pos FROM b JOIN buffer_calls AS c
                    ON c.buffer_id = b.id AND c.call_id = ?3
                UNION SELECT c.call_id, c.declared_pos FROM b JOIN buffer_calls AS c
                    ON c.buffer_id = b.id AND c.call_id >= ?5 AND c.call_id < {_UPTO}
                UNION SELECT a.call_id, a.declared_pos FROM b JOIN buffer_answers AS a
                    ON a.buffer_id = b.id AND a.call_id = ?3 WHERE a.declared_pos IS NOT NULL
                UNION SELECT a.call_id, a.declared_pos FROM b JOIN buffer_answers AS a
                    ON a.buffer_id = b.id AND a.call_id >= ?5 AND a.call_id < {_UPTO}
                    WHERE a.declared_pos IS NOT NULL
                UNION SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')
                    FROM b, json_each(b.unanswered) AS j
                UNION SELECT j.value, r.pos FROM b JOIN buffer_rows AS r ON r.buffer_id = b.id
                    AND r.pos > (b.last_major << 20), json_each(r.calls) AS j WHERE r.calls IS NOT NULL)
        SELECT d.cid, d.pos, EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = b.id AND a.call_id = d.cid), r.body
            FROM b, d JOIN buffer_rows AS r ON r.buffer_id = b.id AND r.pos = d.pos
        WHERE (d.cid = ?3 OR substr(d.cid, 1, ?4) = ?5)
            AND EXISTS (SELECT 1 FROM json_each(r.calls) AS k WHERE k.value = d.cid)
        ORDER BY d.pos, d.cid"""
"""``PLAIN_DECLARATIONS`` reading only the entries of the call id and its qualified ids (decision 0191).

The call ids of ``buffer_calls`` and ``buffer_answers`` (text, compared bytewise) that equal
the id or start with its prefix are exactly those from the prefix up to ``_UPTO``, each a
range of the tables' keys; the filter of the plain path is kept as it is, so these arms
only read less (a line's answers carry their declarations: ~1 a turn, all read before)."""

SQL: dict[str, str] = {
    **statements("?", "born"),
    "pa_declarations": DECLARATIONS,
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    9: MIGRATION,  # pydantic-ai conversation records and where their entries end (decision 0051)
    20: UPGRADE,  # each entry's message as pydantic-ai's JSON, and the line they make whole (decision 0131)
}
