"""``PostgresVectors``: ``SqlVectors`` over a ``PostgresStore``, with the statements its collation needs."""

from __future__ import annotations

from typing import Any

from flowmem.store.listing import listing_of
from flowmem.store.listing.postgres import PostgresListing
from flowmem.store.vectors.postgres import SQL, SQL_C
from flowmem.store.vectors.sql import SqlVectors


class PostgresVectors(SqlVectors):
    """The vectors of one ``PostgresStore``'s records."""

    SQL = SQL

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        listing = listing_of(store)
        self._listing = listing if isinstance(listing, PostgresListing) else None

    def statement(self, name: str) -> str:
        """The named statement, comparing keys ``COLLATE "C"`` unless the database's collation is C."""
        if name == "vectors_spaces_locked":
            return SQL[name]
        if self._listing is not None and not self._listing.collation_is_c():
            return SQL_C[name]
        return SQL[name]
