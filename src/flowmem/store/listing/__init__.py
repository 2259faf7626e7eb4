"""Memory records listed by (scope, scope id, key prefix), in key order: ``RecordListing``.

``Store`` reads and writes one record by its whole address. A caller that keeps a tree
of records under one key prefix (the LangGraph long-term store, decision 0041) must
also walk them: ``list_records`` returns one page, in code-point order of the key,
of the live records of one scope id whose key starts with a prefix; ``iter_records``
pages through all of them ``batch`` at a time, so memory stays bounded whatever
their number. Expired records are skipped, as ``Store.get_record`` reads them as
absent. ``touch_record`` moves a live record's expiry, only while it still holds
the value the caller read (a TTL refreshed on read never brings back a record
deleted meanwhile, nor puts back an older value).

It is a capability beside ``Store``, not part of it (like ``LocalCalls``): a backend
may implement ``RecordListing`` itself; for the three of today ``listing_of(store)``
gives one from this package (``memory.py``, ``sqlite.py``, ``postgres.py``: each
backend's statements live in its own module). Every SQL statement is a range scan of
the records table's primary key ``(scope, scope_id, key)``: no migration.

Every backend orders keys by code point (SQLite's ``BINARY``, Python's ``str``,
PostgreSQL's ``COLLATE "C"`` where the database's own collation is not C), so a page
boundary means the same everywhere. Keys never hold NUL (``rows.check_address``),
so ``key + "\\x01"`` is the smallest key after ``key``: a cursor is an inclusive
``start``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flowmem.errors import InvalidInputError
from flowmem.store.base import Address, Store
from flowmem.store.listing.records import (
    LIST_BATCH,
    ListedRecord,
    ListPage,
    RecordListing,
    prefix_end,
    successor,
)
from flowmem.store.rows import check_address
from flowmem.store.values import PerBackend


def _is_own(store: Any) -> bool:
    return isinstance(store, RecordListing)


listing_of = PerBackend[RecordListing](
    "flowmem.store.listing", "Listing", "RecordListing", "list its records", _is_own
)
"""The ``RecordListing`` of a store: itself when it has one, else this package's for its backend.

ConfigurationError for a store of another kind.
"""


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInputError(f"limit must be an integer >= 0, got {limit!r}")
    return int(limit)


def list_records(
    store: Store,
    scope: str,
    scope_id: str,
    prefix: str,
    *,
    now: float,
    after: str | None = None,
    start: str | None = None,
    limit: int = LIST_BATCH,
    values: bool = True,
) -> list[ListedRecord]:
    """One page: at most ``limit`` live records of ``(scope, scope_id)`` whose key starts with ``prefix``.

    In code-point order of the key, from the first key > ``after`` and >= ``start``
    (both optional). ``values=False`` reads keys only (``text`` None).
    """
    check_address(Address(scope, scope_id, prefix))
    count = _check_limit(limit)
    lower = prefix
    for bound, inclusive in ((start, True), (after, False)):
        if bound is None:
            continue
        if not isinstance(bound, str):
            raise InvalidInputError(f"a listing bound must be a string, got {bound!r}")
        candidate = bound if inclusive else successor(bound)
        lower = max(lower, candidate)
    end = prefix_end(prefix)
    if count == 0 or (end is not None and lower >= end):
        return []
    page = ListPage(scope, scope_id, prefix, float(now), lower, count, values)
    return listing_of(store).list_records(page)


def iter_records(
    store: Store,
    scope: str,
    scope_id: str,
    prefix: str,
    *,
    now: float,
    after: str | None = None,
    start: str | None = None,
    batch: int = LIST_BATCH,
    values: bool = True,
) -> Iterator[ListedRecord]:
    """Every live record ``list_records`` would list, read ``batch`` at a time (each page its own read)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidInputError(f"batch must be an integer >= 1, got {batch!r}")
    while True:
        page = list_records(
            store, scope, scope_id, prefix, now=now, after=after, start=start, limit=batch, values=values
        )
        yield from page
        if len(page) < batch:
            return
        after, start = None, successor(page[-1].key)  # the next page: from the key after the last


def touch_record(store: Store, address: Address, text: str, expires_at: float, now: float) -> bool:
    """Move a record's expiry to ``expires_at`` if it is live, expiring, and still holds ``text``.

    Returns True when it did. A record deleted, rewritten or expired since it was
    read is left as it is: a refresh never resurrects nor reverts.
    """
    check_address(address)
    if not isinstance(text, str):
        raise InvalidInputError(f"text must be the record's stored JSON text, got {text!r}")
    return listing_of(store).touch_record(address, text, float(expires_at), float(now))


__all__ = [
    "LIST_BATCH",
    "ListPage",
    "ListedRecord",
    "RecordListing",
    "iter_records",
    "list_records",
    "listing_of",
    "prefix_end",
    "successor",
    "touch_record",
]
