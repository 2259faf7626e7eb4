"""``RecordListing`` for ``MemoryStore``: its engine's records table, read under its lock.

The dict is not ordered by key, so a page is the ``limit`` smallest matching keys of
one pass over the records (``heapq.nsmallest``): memory is bounded by the page, time
is linear in the store, which is what an in-process reference store can afford.
"""

from __future__ import annotations

import heapq

from flowmem.store.base import Address
from flowmem.store.listing.records import ListedRecord
from flowmem.store.memory import MemoryStore


class MemoryListing:
    """Lists and touches the records of one ``MemoryStore`` (its tables' ``records``, locked)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def list_records(
        self,
        scope: str,
        scope_id: str,
        prefix: str,
        now: float,
        start: str,
        limit: int,
        values: bool,
    ) -> list[ListedRecord]:
        """At most ``limit`` live records with key >= ``start`` starting with ``prefix``, in key order."""
        with self.store.locked() as tables:
            page = heapq.nsmallest(
                limit,
                (
                    (address.key, text, expires_at)
                    for address, (text, expires_at) in tables.records.items()
                    if address.scope == scope
                    and address.scope_id == scope_id
                    and address.key >= start
                    and address.key.startswith(prefix)
                    and (expires_at is None or expires_at > now)
                ),
                key=lambda found: found[0],
            )
        return [ListedRecord(key, text if values else None, expires) for key, text, expires in page]

    def touch_record(self, address: Address, text: str, expires_at: float, now: float) -> bool:
        """Set a live, expiring record's expiry if its stored text is ``text``; True when it was."""
        with self.store.locked() as tables:
            stored = tables.records.get(address)
            if stored is None or stored[0] != text or stored[1] is None or stored[1] <= now:
                return False
            tables.records[address] = (text, expires_at)
            return True
