"""PostgreSQL's archive table (its migration) and its statements, by name."""

from __future__ import annotations

from flowmem.store.archive.statements import POSTGRES_PAGE, statements

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_archive (
        buffer_id BIGINT NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq))""",
    # an archived call id is never trimmed from the evicted ones (decision 0083)
    "ALTER TABLE buffer_evicted ADD COLUMN archived BOOLEAN NOT NULL DEFAULT FALSE",
)

SQL: dict[str, str] = {
    **statements("%s"),
    "archive_page_sized": POSTGRES_PAGE,
    # the header lists the open calls since migration 26 (decision 0153, as SQLite's 23):
    # listed again from the declarations left without an answer (the first and third
    # parameters: the flags the shared statement sets and reads)
    "archive_reopen": """UPDATE buffers AS b SET unanswered = COALESCE((SELECT json_agg(json_build_array(
            c.call_id, c.declared_pos, c.ord) ORDER BY c.declared_pos, c.ord)::text FROM buffer_calls AS c
            WHERE c.buffer_id = b.id AND NOT EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id)), '[]')
        FROM (SELECT %s::boolean AS f, %s::bigint AS id, %s::boolean AS t) AS p
        WHERE b.id = p.id AND p.f IS DISTINCT FROM p.t""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    14: MIGRATION,  # what compactions archived (issue 28 §2)
}
