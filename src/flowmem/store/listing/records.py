"""What a listing is: a listed record, the ``RecordListing`` protocol, key-order helpers.

Kept apart from the package's ``__init__`` (``listing_of`` and the calls), so the
backends' listings import this and never the package that dispatches to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from flowmem.errors import InvalidInputError
from flowmem.store.base import Address
from flowmem.store.rows import prefix_end as prefix_end  # re-exported: listing's pages
from flowmem.store.rows import stored_json
from flowmem.store.rows import successor as successor

LIST_BATCH = 100  # records one page of ``iter_records`` reads at most


@dataclass(frozen=True)
class ListedRecord:
    """One live record of a listing: its key, its stored JSON text (None: keys only), its expiry."""

    key: str
    text: str | None
    expires_at: float | None

    @property
    def value(self) -> Any:
        """The record's value (its JSON text parsed); InvalidInputError for a keys-only listing."""
        if self.text is None:
            raise InvalidInputError("this listing read keys only, not values")
        return stored_json(self.text)


@dataclass(frozen=True)
class ListPage:
    """What one page of a listing reads: the live records of ``(scope, scope_id)`` at ``now``.

    Those whose key starts with ``prefix`` and is >= ``start``, in key order, at most
    ``limit`` of them; ``values=False`` reads keys only (``ListedRecord.text`` None).
    """

    scope: str
    scope_id: str
    prefix: str
    now: float
    start: str
    limit: int
    values: bool


@runtime_checkable
class RecordListing(Protocol):
    """A capability: list one scope id's live records by key prefix, and refresh an expiry."""

    def list_records(self, page: ListPage) -> list[ListedRecord]:
        """The records ``page`` asks for: at most its ``limit``, in key order."""
        ...

    def touch_record(self, address: Address, text: str, expires_at: float, now: float) -> bool:
        """Set a live, expiring record's expiry if its stored text is ``text``; True when it was."""
        ...


