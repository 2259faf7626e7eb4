"""SQLite's archive table (its migration) and its statements, by name."""

from __future__ import annotations

from flowmem.store.archive.statements import SQLITE_PAGE, statements

MIGRATION: tuple[str, ...] = (
    """CREATE TABLE buffer_archive (
        buffer_id INTEGER NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (buffer_id, seq)) WITHOUT ROWID""",
    # an archived call id is never trimmed from the evicted ones (decision 0083)
    "ALTER TABLE buffer_evicted ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",
)

SQL: dict[str, str] = {
    **statements("?"),
    "archive_page": SQLITE_PAGE,
    # SQLite flags no answered call (its migration 23, decision 0137): the header lists the
    # open ones, listed again from the declarations left without an answer (?1 and ?3: the
    # flags PostgreSQL's statement sets and reads)
    "archive_reopen": """UPDATE buffers SET unanswered = (SELECT json_group_array(json_array(call_id,
            declared_pos, ord)) FROM (SELECT c.call_id, c.declared_pos, c.ord FROM buffer_calls AS c
            WHERE c.buffer_id = ?2 AND NOT EXISTS (SELECT 1 FROM buffer_answers AS a
                WHERE a.buffer_id = c.buffer_id AND a.call_id = c.call_id)
            ORDER BY c.declared_pos, c.ord))
        WHERE id = ?2 AND ?1 IS NOT ?3""",
}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    14: MIGRATION,  # what compactions archived (issue 28 §2)
}
