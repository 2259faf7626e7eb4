"""PostgreSQL's conversation tables (the pydantic-ai migration) and their statements, by name."""

from __future__ import annotations

from flowmem.store.conversations.statements import statements
from flowmem.store.conversations.tables import line_tables, tables
from flowmem.store.headers import HEADS

MIGRATION: tuple[str, ...] = tables("BIGINT", "")

UPGRADE: tuple[str, ...] = (
    *line_tables("BIGINT"),
    """CREATE FUNCTION pa_messages_drop() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM pa_messages WHERE conversation_id = OLD.conversation_id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER pa_messages_drop AFTER DELETE ON pa_conversations
        FOR EACH ROW EXECUTE FUNCTION pa_messages_drop()""",
)

# what Python's ``str.strip`` trims, as ``flowmem.core.call_ids`` strips a row's call ids
_STRIPPED = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
# the call ids a stored row's body names (its ``tool_calls``, top level and in ``metadata``:
# each one's ``id`` and ``tool_call_id``), PostgreSQL storing none of a row's own
_ROW_IDS = f"""SELECT btrim(e.value ->> k.name, '{_STRIPPED}') FROM (SELECT {{row}}.body::json AS j) AS m
    CROSS JOIN LATERAL (SELECT m.j -> 'tool_calls' AS calls UNION ALL SELECT m.j -> 'metadata' -> 'tool_calls') AS s
    CROSS JOIN LATERAL json_array_elements(CASE WHEN json_typeof(s.calls) = 'array' THEN s.calls END) AS e
    CROSS JOIN (VALUES ('tool_call_id'), ('id')) AS k(name)"""

SQL: dict[str, str] = {
    **statements("%s", "id", HEADS),
    # a line's declarations where PostgreSQL keeps them since its migration 34 (decision 0190,
    # as SQLite's 28): a row of their own or their answer's row (``buffer_calls``: since
    # migration 35, decision 0194, the answer's row is its tool row of ``buffer_rows``), or the
    # header's list of open calls, which the editor writes when it flushes: the rows appended
    # since (past the stored header's last major) are read for the call ids they name, and
    # each declaration is checked on its row
    "pa_declarations": f"""WITH b AS (SELECT id, unanswered, last_major FROM buffers
                WHERE scope = 'session' AND scope_id = %s AND key = %s),
            q AS (SELECT %s::text AS cid, %s::integer AS n, %s::text AS prefix),
            d AS (SELECT c.call_id AS cid, c.declared_pos AS pos FROM b JOIN buffer_calls AS c
                    ON c.buffer_id = b.id
                UNION SELECT o.e ->> 0, (o.e ->> 1)::bigint FROM b,
                    json_array_elements(b.unanswered::json) AS o(e)
                UNION SELECT i.id, r.pos FROM b JOIN buffer_rows AS r ON r.buffer_id = b.id
                    AND r.pos > (b.last_major << 20) AND r.role = 'assistant'
                    CROSS JOIN LATERAL ({_ROW_IDS.format(row="r")}) AS i(id))
        SELECT d.cid, d.pos, EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = b.id AND a.call_id = d.cid), r.body
            FROM b, q, d JOIN buffer_rows AS r ON r.pos = d.pos
        WHERE r.buffer_id = b.id AND (d.cid = q.cid OR substr(d.cid, 1, q.n) = q.prefix)
            AND r.role = 'assistant' AND d.cid IN ({_ROW_IDS.format(row="r")})
        ORDER BY d.pos, d.cid""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    9: MIGRATION,  # pydantic-ai conversation records and where their entries end (decision 0051)
    20: UPGRADE,  # each entry's message as pydantic-ai's JSON, and the line they make whole (decision 0131)
}
