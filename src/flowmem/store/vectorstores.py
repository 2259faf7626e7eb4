"""``vectors_of(store)``: the embedding vectors of any back-end's records (issue 40).

A store may keep its own (``store.vectors``); a ``SqliteStore`` (``memory://``'s
``MemoryStore`` among them) or ``PostgresStore`` gets a ``SqlVectors`` over its engine with its dialect's statements
(``PgVectors`` on PostgreSQL: pgvector's scoring where the extension is), made once
per store. Like ``flowmem.store.listing``, it sits above the back-ends and
imports none of their drivers: a back-end module not imported yet made no store.
"""

from __future__ import annotations

import sys

from flowmem.store.base import Store
from flowmem.store.values import per_store
from flowmem.store.vectors import SupportsVectors
from flowmem.store.vectors import vectors_of as own_vectors
from flowmem.store.vectors.sql import SqlVectors


def vectors_of(store: Store) -> SupportsVectors:
    """The vectors of a store's records (ConfigurationError for a store that keeps none)."""
    kept = per_store(store)
    found: SupportsVectors | None = kept.get(vectors_of)
    if found is not None:
        return found
    sqlite = sys.modules.get("flowmem.store.sqlite")
    postgres = sys.modules.get("flowmem.store.postgres")
    if sqlite is not None and isinstance(store, sqlite.SqliteStore):
        from flowmem.store.vectors import sqlite as dialect

        found = SqlVectors(store, dialect.SQL)
    elif postgres is not None and isinstance(store, postgres.PostgresStore):
        from flowmem.store.vectors import postgres as pg
        from flowmem.store.vectors.pgvector import PgVectors

        found = PgVectors(store, pg.SQL, pg.SQL_C)  # pgvector's scoring where the extension is
    else:
        return own_vectors(store)
    kept[vectors_of] = found
    return found


__all__ = ["vectors_of"]
