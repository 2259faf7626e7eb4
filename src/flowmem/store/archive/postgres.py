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

SQL: dict[str, str] = {**statements("%s"), "archive_page_sized": POSTGRES_PAGE}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    14: MIGRATION,  # what compactions archived (issue 28 §2)
}
