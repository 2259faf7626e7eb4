"""``SessionBuffers`` for ``PostgresStore``: ``%s`` placeholders; the ``id`` sequence orders buffers."""

from __future__ import annotations

from flowmem.store import headers
from flowmem.store.heads.sql import SqlBuffers
from flowmem.store.postgres import PostgresStore


class PostgresBuffers(SqlBuffers):
    """Reads the buffers and lines of one ``PostgresStore``."""

    P = "%s"
    BORN = "id"  # BIGSERIAL: a sequence never gives a number twice
    HEAD_ID = "(c.record::jsonb ->> 'head_id')"
    HEADS = headers.HEADS  # the counts derived with each header's tail (decision 0195)

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store)


__all__ = ["PostgresBuffers"]
