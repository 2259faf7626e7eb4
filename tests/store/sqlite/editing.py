"""A SQLite file's schema and one transaction on it, rolled back at the end, for the editor's oracle tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from flowmem.store import Quotas
from flowmem.store import sqlite as sqlite_backend
from flowmem.store.sqlbase import StatementRunner
from flowmem.store.sqlite import SqliteStore
from tests.migrated import migrated_sqlite_url


@contextmanager
def editing(path: str) -> Iterator[tuple[sqlite3.Connection, StatementRunner]]:
    """The file at ``path`` migrated, a connection in ``BEGIN IMMEDIATE`` and its statement runner; rolled back at the end."""
    SqliteStore(migrated_sqlite_url(path)).close()  # the schema: a copy of the migrated template
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_backend.add_quota_function(conn, Quotas.off)  # what the quota triggers call
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn, StatementRunner(conn, sqlite_backend.SQL)
    finally:
        conn.execute("ROLLBACK")
        conn.close()
