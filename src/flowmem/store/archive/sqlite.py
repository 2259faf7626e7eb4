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

SQL: dict[str, str] = {**statements("?"), "archive_page": SQLITE_PAGE}

# the schema's migrations this kind of data owns, by number (flowmem.store.migrations)
MIGRATIONS: dict[int, tuple[str, ...]] = {
    14: MIGRATION,  # what compactions archived (issue 28 §2)
}
