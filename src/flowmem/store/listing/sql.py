"""``RecordListing`` over a SQL store's records table: what SQLite and PostgreSQL share.

No SQL text here: each backend's statements are its own module's ``SQL``
(``listing/sqlite.py``, ``listing/postgres.py``), run through the engine's
``connection()`` (a pooled driver connection whose errors become ``StoreError``).
Each statement is one autocommitted read or write, like an unguarded ``put_record``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from flowmem.store.base import Address
from flowmem.store.engine import SqlEngine
from flowmem.store.listing.records import ListedRecord, ListPage, prefix_end


class SqlListing:
    """Lists and touches records with the ``SQL`` statements of its backend.

    ``list`` / ``list_open`` (with / without an upper bound on the key) take
    ``(values, scope, scope_id, start[, end], now, limit)``; ``touch`` takes
    ``(expires_at, scope, scope_id, key, text, now)``.
    """

    SQL: ClassVar[dict[str, str]] = {}

    def __init__(self, store: SqlEngine[Any]) -> None:
        self.store = store

    def statement(self, name: str) -> str:
        """The text of the named statement for this store."""
        return self.SQL[name]

    def list_records(self, page: ListPage) -> list[ListedRecord]:
        """The records ``page`` asks for: at most its ``limit``, in key order."""
        end = prefix_end(page.prefix)
        bounds = (page.start,) if end is None else (page.start, end)
        name = "list_open" if end is None else "list"
        params = (page.values, page.scope, page.scope_id, *bounds, page.now, page.limit)
        sql = self.statement(name)
        with self.store.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [
            ListedRecord(str(key), None if text is None else str(text), _expiry(expires_at))
            for key, text, expires_at in rows
        ]

    def touch_record(self, address: Address, text: str, expires_at: float, now: float) -> bool:
        """Set a live, expiring record's expiry if its stored text is ``text``; True when it was."""
        sql = self.statement("touch")
        with self.store.connection() as conn:
            done = conn.execute(sql, (expires_at, *address, text, now))
            return bool(done.rowcount > 0)


def _expiry(value: Any) -> float | None:
    return None if value is None else float(value)
