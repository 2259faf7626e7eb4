"""A buffer's archive: the rows a compaction took out of it, kept until the buffer goes (issue 28 §2).

``SupportsArchive`` is a store capability, as ``store.archive`` (like
``store.checkpoints``): ``SqlArchive`` (``sql.py``, its tables and statements in
``sqlite.py`` and ``postgres.py``). A
compaction (``compact``) runs in one transaction serialized with the buffer's
appends: it reads the rows up to the plan's first kept row again, and only when
their digest is the plan's (``flowmem.core.compaction``) does it move the rows
before that one to the archive, put the summary row in their place, and remember
their call ids as the window's evicted ones are remembered (decision 0045), but
never forgotten while the archive lives, so a late copy of an archived result or
turn is still a duplicate (MEM-1, MEM-2). A buffer's stored bytes (the
``buffer_bytes`` limit, the user's quota) count its archived rows too.

The archive goes with its buffer: ``clear``, a session's deletion and a user's
erasure delete it in their transaction (each backend's ``_drop_buffer``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from flowmem.core import Message
from flowmem.store.base import PAGE_CHARS, PAGE_ROWS, Address, BodyPage
from flowmem.store.paging import PageAsk
from flowmem.store.rows import check_address

SummaryMaker = Callable[[int, int], list[Message]]
"""Makes the rows that take the archived rows' place (one summary, or a compacted history)
from the archive sequence numbers ``(first, last)`` they stand for."""

EVERY_ROW = -1
"""``kept`` of a compaction that archives every row (the history replaced whole)."""


@dataclass(frozen=True)
class Archived:
    """What one compaction moved: ``count`` rows of ``bytes`` bytes, archive numbers ``first``..``last``."""

    count: int
    first: int
    last: int
    bytes: int
    summary: list[Message]


@dataclass(frozen=True)
class WithArchive:
    """A buffer read with its archive: the archived rows (oldest first), then the live rows."""

    archived: list[str]
    live: list[str]


@runtime_checkable
class SupportsArchive(Protocol):
    """Compaction into a buffer's archive, and reads of it (see the module docstring).

    The back-ends' archives subclass it: ``page`` is written here once for every
    back-end (the arguments checked), over each one's ``_page``.
    """

    def compact(
        self, address: Address, kept: int, digest: str, summary: SummaryMaker
    ) -> Archived | None:
        """Archive the rows before cursor ``kept`` when the rows up to it still have ``digest``.

        ``kept`` ``EVERY_ROW``: every row, when all of them still have ``digest``.
        One transaction serialized with the buffer's appends (MEM-12). None, and
        nothing changed, when the buffer is not the one planned on (the plan is
        stale). ``summary`` makes the rows that take the archived rows' place.
        """
        ...

    def read(self, address: Address) -> WithArchive:
        """Return the archived rows' and the live rows' JSON texts, in order, in one snapshot."""
        ...

    def page(
        self,
        address: Address,
        *,
        after: int | None = None,
        version: tuple[int, int] | None = None,
        rows: int = PAGE_ROWS,
        chars: int = PAGE_CHARS,
    ) -> BodyPage:
        """One page of the archived rows' texts, those numbered above ``after``, in order.

        As ``BufferStore.page_bodies`` (its cursors are the archive's numbers): at most
        ``rows`` rows, ending once it holds ``chars`` characters (one row at least);
        ``version`` and ``count`` are the buffer's, so the archive's pages and the live
        rows' pages of one read are one snapshot or refused (BufferChangedError).
        """
        check_address(address)
        return self._page(address, PageAsk(after, None, None, version, rows, chars))

    @abstractmethod
    def _page(self, address: Address, ask: PageAsk) -> BodyPage:
        """Read the page ``ask`` names of the buffer's archive (its arguments checked)."""
