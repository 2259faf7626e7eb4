"""``SessionBuffers`` for ``SqliteStore``: ``?`` placeholders, ``born`` orders buffers, JSON1 reads a record."""

from __future__ import annotations

from flowmem.store.heads.sql import SqlBuffers
from flowmem.store.sqlite import SqliteStore


class SqliteBuffers(SqlBuffers):
    """Reads the buffers and lines of one ``SqliteStore``."""

    P = "?"
    BORN = "born"  # a rowid is reused after the largest is deleted: ``born`` never is
    HEAD_ID = "json_extract(c.record, '$.head_id')"

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)


__all__ = ["SqliteBuffers"]
