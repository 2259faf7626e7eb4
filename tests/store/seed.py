"""Test helper: put rows into a buffer exactly as given, bypassing the append rules.

Vectors start from buffers the rules would never build (a dangling call followed by
a user turn, for instance), so they are written row by row through the SQL editor
inside one transaction (``memory://`` is a SQLite store too).
"""

from __future__ import annotations

from typing import Any

from flowmem.store import Address, Store
from flowmem.store import sqlite as sqlite_backend
from flowmem.store.editor import SqlBufferEditor
from flowmem.store.sqlbase import StatementRunner


def seed(store: Store, address: Address, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` as the buffer's content (the buffer must be empty)."""
    assert store.count(address) == 0
    if isinstance(store, sqlite_backend.SqliteStore):
        with store._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            editor = SqlBufferEditor(StatementRunner(conn, sqlite_backend.SQL), address)
            for row in rows:
                editor.append_row(row)
            editor.flush()
            conn.execute("COMMIT")
        return
    from flowmem.store import postgres as pg_backend

    assert isinstance(store, pg_backend.PostgresStore)
    with store._connection() as pconn, pconn.transaction():
        editor = SqlBufferEditor(StatementRunner(pconn, pg_backend.SQL), address)
        for row in rows:
            editor.append_row(row)
        editor.flush()
