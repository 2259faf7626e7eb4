"""A paged read's arguments, checked once for every back-end, and the version check each page makes.

``Store.page_bodies`` (``SqlStore.page_bodies``) and the archive's ``page`` take the
same cursors and sizes on every back-end: a ``PageAsk`` refuses bad ones
(InvalidInputError, nothing read) and is what the back-end's ``_page`` reads;
``check_version`` is the refusal of a page whose buffer was written since the read's
first page (BufferChangedError).
"""

from __future__ import annotations

from dataclasses import dataclass

from flowmem.errors import BufferChangedError
from flowmem.store.base import Address
from flowmem.store.rows import check_batch, check_last


@dataclass(frozen=True)
class PageAsk:
    """What one page of a paged read asks for; InvalidInputError, nothing read, for a bad cursor or size."""

    after: int | None  # the cursor the page starts above (None: from the first row)
    before: int | None  # the cursor the page stays below (None: to the last row)
    last: int | None  # only the last ``last`` rows below ``before`` (None: all)
    version: tuple[int, int] | None  # the buffer's version the first page read (None: this is it)
    rows: int  # at most this many rows
    chars: int  # ending once the page holds this many characters (one row at least)

    def __post_init__(self) -> None:
        for value in (self.after, self.before, self.last):
            check_last(value)
        check_batch(self.rows)
        check_batch(self.chars)


def check_version(address: Address, found: tuple[int, int] | None, version: tuple[int, int] | None) -> None:
    """BufferChangedError when the buffer's version ``found`` is not the ``version`` the read's first page read."""
    if version is not None and found != version:
        raise BufferChangedError(
            f"buffer {address.scope}/{address.scope_id}/{address.key} was written "
            "since the first page of this read: read it again"
        )


__all__ = ["PageAsk", "check_version"]
