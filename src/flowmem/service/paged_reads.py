"""Long reads answered page by page (issue 38 §2, decision 0113): a token window, a compaction plan, the archive.

The plain read is paged (decision 0044: ``MemoryService.first_page``); these three
read a whole buffer too, and held it, parsed, per reader. Here each is found
first from what it needs of the rows, none kept: a window's cut from the rows'
facts and stored token counts (``store.window.read_cut``), a plan's cut likewise
and its digest over its rows a page at a time. What the answer then lists is
named as ``Segment``\\ s of the store (the live rows between two cursors, or the
archive), read a page at a time (``segment_page``: ``Store.page_bodies``,
``SupportsArchive.page``), all of one snapshot: every page passes the version the
first read found, and a write in between refuses it (BufferChangedError). A reader
holds a page (and a window's kept system rows), whatever the buffer's size.

``PagedRead`` carries the answer's other fields: ``head`` (written before
``messages``) and ``tail`` (after), and ``counted``, a field written last with
the number of archived rows the pages held. The first page is read with the rest
of the work, so a write racing it makes the read start again
(``flowmem.store.window.reread``: ``READ_ATTEMPTS`` times at most)
rather than cut an answer short.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from flowmem.compaction import archive_of
from flowmem.core.compaction import CompactionPlan, is_summary, prefix_digest
from flowmem.errors import StoreCorruptError
from flowmem.results import TokenWindow
from flowmem.scope import Refusal
from flowmem.store.base import Address, BodyPage, Store
from flowmem.store.rows import stored_json
from flowmem.store.window import WindowAsk, read_cut, reread


@dataclass(frozen=True)
class Segment:
    """Rows a paged read lists: the live rows with ``after < cursor < before``, or the archive's above ``after``.

    ``expect``: how many rows it holds (fewer read is a damaged store:
    StoreCorruptError), None when not known.
    """

    archive: bool
    after: int | None = None
    before: int | None = None
    expect: int | None = None


@dataclass(frozen=True)
class PagedRead:
    """A long read answered page by page (see the module docstring); ``refusal``: the neutral read (MEM-7).

    ``lead``: texts listed first (a window's kept system rows); ``first``: the first
    page of ``segments[0]`` (None: none read yet).
    """

    address: Address | None = None
    version: tuple[int, int] | None = None
    lead: list[str] = field(default_factory=list)
    segments: tuple[Segment, ...] = ()
    head: dict[str, Any] = field(default_factory=dict)
    tail: dict[str, Any] = field(default_factory=dict)
    counted: str | None = None
    first: BodyPage | None = None
    refusal: Refusal | None = None


def segment_page(store: Store, read: PagedRead, segment: Segment, after: int | None = None) -> BodyPage:
    """The page of ``segment`` after cursor ``after`` (its start when None), of ``read``'s snapshot."""
    if read.address is None:
        return BodyPage(None, 0)
    low = segment.after if after is None else after
    if segment.archive:
        return archive_of(store).page(read.address, after=low, version=read.version)
    return store.page_bodies(read.address, after=low, before=segment.before, version=read.version)


def _with_first(store: Store, read: PagedRead) -> PagedRead:
    """``read`` with the first page of its first segment read (same snapshot, or BufferChangedError)."""
    if not read.segments:
        return read
    return replace(read, first=segment_page(store, read, read.segments[0]))


def window_read(
    store: Store,
    address: Address,
    budget: int,
    keep_system: bool = True,
    first_role: str | None = None,
) -> PagedRead:
    """The token window of ``budget`` tokens (the default counter) as a paged read.

    Its answer is ``MemoryService.load_window_raw``'s, ``next_before`` null after it.
    WindowTooSmallError when the newest turn alone does not fit.
    """

    def work() -> PagedRead:
        found = read_cut(store, address, WindowAsk(budget, keep_system, first_role))
        cut = found.cut
        window = TokenWindow(budget, cut.tokens, cut.start_index, cut.cut_messages, cut.cut_tokens)
        segments: tuple[Segment, ...] = ()
        if cut.start is not None and found.version is not None:
            after = cut.start - 1 if cut.start > 0 else None
            segments = (Segment(False, after, None, cut.suffix),)
        tail = {
            "count": cut.total,
            "appended": 0,
            "appended_any": False,
            "resolved_scope_id": address.scope_id,
            "window": window.to_dict(),
            "next_before": None,
        }
        read = PagedRead(address, found.version, found.systems, segments, tail=tail)
        return _with_first(store, read)

    return reread(work)


def plan_read(store: Store, address: Address, keep_tokens: int) -> PagedRead:
    """A compaction plan keeping ``keep_tokens`` (the default counter) as a paged read.

    Its answer is ``MemoryService.compaction_plan_raw``'s: the same cut (system rows
    counted as ordinary rows) and the same plan id, the digest taken over the rows
    up to the first kept one a page at a time. WindowTooSmallError as that.
    """

    def work() -> PagedRead:
        found = read_cut(store, address, WindowAsk(keep_tokens, keep_system=False))
        cut = found.cut
        start = cut.start_index
        nothing = PagedRead(
            address,
            found.version,
            head={"plan": None},
            tail={"archived": 0, "tokens": 0, "kept": cut.total, "kept_tokens": 0, "resolved_scope_id": address.scope_id},
        )
        if found.version is None or cut.start is None or start == 0 or start >= cut.total:
            return nothing
        read = PagedRead(address, found.version)
        upto = Segment(False, None, cut.start + 1, start + 1)  # the prefix and the first kept row
        firsts: list[Any] = []
        digest = prefix_digest(_checked_rows(store, read, upto, firsts))
        if start == 1 and is_summary(firsts[0]):
            return nothing  # nothing beyond the budget but the last compaction's summary: keep it
        plan = CompactionPlan((), (), cut.cut_tokens or 0, cut.start, cut.suffix, cut.tokens, digest)
        tail = {
            "archived": start,
            "tokens": cut.cut_tokens,
            "kept": cut.suffix,
            "kept_tokens": cut.tokens,
            "resolved_scope_id": address.scope_id,
        }
        prefix = (Segment(False, None, cut.start, start),)
        return _with_first(store, replace(read, segments=prefix, head={"plan": plan.plan_id}, tail=tail))

    return reread(work)


def _checked_rows(
    store: Store, read: PagedRead, segment: Segment, firsts: list[Any]
) -> Iterator[tuple[int, str]]:
    """Every ``(cursor, text)`` of ``segment``, a page at a time, each page's texts parsed to check them.

    ``firsts`` gets the first row, parsed. StoreCorruptError for text that no longer
    parses, or fewer rows than ``segment.expect``.
    """
    seen, after = 0, None
    while True:
        page = segment_page(store, read, segment, after)
        if page.bodies:
            rows = stored_json("[" + ",".join(body for _, body in page.bodies) + "]")
            if not firsts:
                firsts.append(rows[0])
            seen += len(page.bodies)
            yield from page.bodies
            after = page.bodies[-1][0]
        if not page.more or not page.bodies:
            break
    if segment.expect is not None and seen != segment.expect:
        raise StoreCorruptError(
            f"a buffer read found {seen} rows where it counted {segment.expect}: the database "
            "is damaged (a page that no longer parses reads short)"
        )


def archive_read(store: Store, address: Address) -> PagedRead:
    """A read with the archive as a paged read: the archived rows, then the live ones (decision 0084).

    Its answer is ``MemoryService.load_raw(..., include_archived=True)``'s with
    ``archived`` (how many archived rows lead) last.
    """

    def work() -> PagedRead:
        first = archive_of(store).page(address)
        tail = {"count": first.count, "appended": 0, "appended_any": False, "resolved_scope_id": address.scope_id}
        if first.version is None:
            return PagedRead(address, None, tail=tail, counted="archived")
        segments = (Segment(True), Segment(False, expect=first.count))
        return PagedRead(address, first.version, [], segments, {}, tail, "archived", first)

    return reread(work)


__all__ = ["PagedRead", "Segment", "archive_read", "plan_read", "segment_page", "window_read"]
