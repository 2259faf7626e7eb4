"""A provider-format read of more than one page, written page by page (issue 38 §2, decision 0113).

Two passes over the read's pages, both of the snapshot its first page saw: the
first (``first_pass``, ``window_pass``; one long call in a store thread) parses each
page to learn whether normalization would only move the system rows first
(``flowmem.formats.streamed.Sendable``), keeping the system rows; when it would
repair more (a call without its result, a result out of its turn, an unreadable
row…), the pages are read once more into a ``core.normalize_pages.RepairPlan``,
which keeps the system rows, the answered call ids and the *key* of each late
result. The second pass (``parts``) reads each page again, builds its normalized
rows (``Rows``, or ``RepairRows``, which reads a late result again by its key when
its turn's run closes: one row, ``MemoryService.read_segment``) and converts them
(``PageWriter``), and renders the messages they finish, one page per store-thread
call. A reader holds a page, the system rows, the ids of the buffer's calls and,
for a format that merges neighbouring turns, the message still open.

What is read: a plain read's pages (``TextPages``: ``MemoryService.next_page``), or a
token window's kept system rows and suffix (``WindowPages``: a ``PagedRead`` of
``MemoryService.load(..., paged=True)``). The bytes are those of the whole read
(``routes.memory._converted``, which gives the answer's other fields here: it is
called on no rows).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowmem import metrics
from flowmem.api.paged import check_rows
from flowmem.api.pool import StorePool
from flowmem.core import Message
from flowmem.core.normalize_pages import Keyed, RepairPlan, RepairRows
from flowmem.errors import StoreCorruptError
from flowmem.formats.streamed import PageWriter, Rows, Sendable
from flowmem.results import BufferText
from flowmem.service import MemoryService, PagedText
from flowmem.service.paged_reads import PagedRead, Segment
from flowmem.store.rows import stored_json

Render = Callable[[object], bytes]
Converted = Callable[[BufferText, str], dict[str, Any]]
Key = tuple[int, int]  # (0, n): the n-th text the read began with; (1, cursor): a stored row
Page = tuple[list[tuple[Key, str]], bool]  # a page's keyed texts, and whether more follow


class Source(Protocol):
    """A read's rows page by page, each with the key that reads it again (blocking)."""

    expect: int | None  # the rows it must hold (fewer read: StoreCorruptError), None when not known

    def pages(self) -> Iterator[Page]:
        """Every page from the first, each with whether more follow."""
        ...

    def fetch(self, key: Key) -> str:
        """The text of the row ``key`` names, of the read's snapshot."""
        ...


def _row(memory: MemoryService, read: PagedRead, cursor: int) -> str:
    """The stored row at ``cursor`` of ``read``'s snapshot: a page of one row (BufferChangedError as a page)."""
    page = memory.read_segment(read, Segment(False, cursor - 1, cursor + 1))
    if not page.bodies:
        raise StoreCorruptError("a row a read found is gone from its snapshot: the database is damaged")
    return page.bodies[0][1]


@dataclass
class TextPages:
    """A plain read's pages (``MemoryService.next_page``), the first the one it began with."""

    paged: PagedText
    memory: MemoryService
    expect: int | None = None

    def pages(self) -> Iterator[Page]:
        """Every page from the first, each with whether more follow (blocking)."""
        paged = self.paged
        after, more = paged.after, paged.more and paged.after is not None
        yield [((0, n), body) for n, body in enumerate(paged.text.bodies)], more
        while more and after is not None:
            page = self.memory.next_page(paged, after)
            if not page.bodies:
                return
            after, more = page.bodies[-1][0], page.more
            yield [((1, cursor), body) for cursor, body in page.bodies], more

    def fetch(self, key: Key) -> str:
        """A row's text again: of the first page, held; else read (blocking)."""
        if key[0] == 0:
            return self.paged.text.bodies[key[1]]
        return _row(self.memory, PagedRead(self.paged.address, self.paged.version), key[1])


@dataclass
class WindowPages:
    """A token window's rows: its kept system rows (the read's lead), then its suffix's pages."""

    read: PagedRead
    memory: MemoryService
    expect: int | None = field(init=False)

    def __post_init__(self) -> None:
        segments = self.read.segments
        suffix = segments[0].expect if segments else 0
        self.expect = None if suffix is None else len(self.read.lead) + suffix

    def pages(self) -> Iterator[Page]:
        """The lead and the first page, then each next page (blocking)."""
        read = self.read
        keyed: list[tuple[Key, str]] = [((0, n), body) for n, body in enumerate(read.lead)]
        if not read.segments:
            yield keyed, False
            return
        segment = read.segments[0]
        page = read.first if read.first is not None else self.memory.read_segment(read, segment)
        while True:
            keyed += [((1, cursor), body) for cursor, body in page.bodies]
            more = page.more and bool(page.bodies)
            yield keyed, more
            if not more:
                return
            page = self.memory.read_segment(read, segment, page.bodies[-1][0])
            keyed = []

    def fetch(self, key: Key) -> str:
        """A row's text again: a kept system row, held; else read (blocking)."""
        if key[0] == 0:
            return self.read.lead[key[1]]
        return _row(self.memory, self.read, key[1])


class _Sendable:
    """The second pass of a read normalization only reorders: each row built alone (``Rows``)."""

    dropped = 0

    def __init__(self) -> None:
        self._rows = Rows()

    def of(self, entries: list[Keyed]) -> list[Message]:
        return self._rows.of(entry for _, entry in entries)

    def end(self) -> list[Message]:
        return []


def _parsed(keyed: list[tuple[Key, str]]) -> list[Keyed]:
    """A page's keyed texts, parsed (StoreCorruptError for text that no longer parses)."""
    entries = stored_json("[" + ",".join(body for _, body in keyed) + "]")
    return list(zip((key for key, _ in keyed), entries, strict=True))


@dataclass
class ProviderStream:
    """A provider read written page by page: its answer's fields and the writer's state."""

    source: Source
    fields: dict[str, Any]
    writer: PageWriter
    rows: _Sendable | RepairRows = field(default_factory=_Sendable)
    more: bool = False
    dropped: int = 0  # normalization's count, known once ``tail`` was written
    _pages: Iterator[Page] | None = None

    def head(self, render: Render) -> bytes:
        """The answer up to its messages, and the system rows' messages (OpenAI, Responses) (blocking)."""
        before = {}
        for key, value in self.fields.items():
            if key == "messages":
                break
            before[key] = value
        return render(before)[:-1] + b',"messages":[' + self.writer.lead

    def step(self, memory: object = None) -> bytes:
        """The next page read, converted and rendered: what it writes of the messages (blocking).

        ``memory``: unused, the source reads (kept for the callers that pass it).
        """
        if self._pages is None:
            self._pages = self.source.pages()
        found = next(self._pages, None)
        if found is None:
            self.more = False
            return b""
        keyed, self.more = found
        return self.writer.page(self.rows.of(_parsed(keyed)))

    def tail(self, render: Render) -> bytes:
        """The rows after the last page, the message still open and the answer's end (blocking)."""
        last = self.writer.page(self.rows.end()) + self.writer.end()
        self.dropped = self.rows.dropped
        if self.dropped:
            metrics.normalized(self.dropped)
        after: dict[str, Any] = {}
        seen = False
        for key, value in self.fields.items():
            if seen:
                after[key] = value
            seen = seen or key == "messages"
        after["dropped"] = self.dropped
        after["not_carried"] = self.writer.not_carried
        return last + b"]," + render(after)[1:]

    def whole(self, render: Render) -> bytes:
        """Every part at once: the answer of a read that fits in a page (blocking)."""
        parts = [self.head(render), self.step()]
        while self.more:
            parts.append(self.step())
        parts.append(self.tail(render))
        return b"".join(parts)


def _stream(source: Source, fmt: str, fields: dict[str, Any], render: Render) -> ProviderStream:
    """Read every page once (twice more when normalization repairs): the stream of ``source`` (blocking)."""
    sendable = Sendable()
    read = 0
    for keyed, _ in source.pages():
        sendable.feed(entry for _, entry in _parsed(keyed))
        read += len(keyed)
        if not sendable.ok:
            break
    systems = sendable.rows()
    rows: _Sendable | RepairRows = _Sendable()
    if systems is None:  # normalization repairs: what it needs ahead, from every page again
        plan = RepairPlan()
        read = 0
        for keyed, _ in source.pages():
            plan.feed(_parsed(keyed))
            read += len(keyed)
        systems = plan.systems
        rows = RepairRows(plan, lambda key: stored_json(source.fetch(key)))  # type: ignore[arg-type]
    check_rows(read, source.expect)
    writer = PageWriter(fmt, systems, render)
    if fmt == "anthropic":
        fields["system"] = writer.system
    elif fmt == "gemini":
        fields["system_instruction"] = writer.system
    return ProviderStream(source, fields, writer, rows)


def first_pass(
    paged: PagedText,
    memory: MemoryService,
    fmt: str,
    converted: Converted,
    expect: int | None,
    render: Render,
) -> ProviderStream:
    """Read every page of a plain read: its stream in format ``fmt`` (blocking).

    ``render`` writes the messages as the API does (each page's, once converted).
    """
    text = paged.text
    fields = converted(BufferText([], text.count, text.next_before, text.resolved_scope_id, text.refusal), fmt)
    return _stream(TextPages(paged, memory, expect), fmt, fields, render)


def window_pass(
    read: PagedRead, memory: MemoryService, fmt: str, converted: Converted, render: Render
) -> ProviderStream:
    """Read every page of a token window (``load(..., paged=True)``): its stream in format ``fmt`` (blocking)."""
    tail = read.tail
    fields = converted(BufferText([], tail["count"], None, tail["resolved_scope_id"]), fmt)
    fields["window"] = tail["window"]
    return _stream(WindowPages(read, memory), fmt, fields, render)


async def parts(
    stream: ProviderStream,
    memory: MemoryService,
    pool: StorePool,
    render: Render,
    noted: Callable[[int], Awaitable[None]] | None = None,
) -> AsyncIterator[bytes]:
    """The answer's bytes: its head, each page's messages as it is converted, its end (each in a store thread).

    ``noted`` takes normalization's count before the answer's last bytes (a whole read's repair log).
    """
    yield await pool.in_thread(stream.head, render)
    yield await pool.page(stream.step, memory)
    while stream.more:
        await asyncio.sleep(0)
        yield await pool.page(stream.step, memory)
    last = await pool.page(stream.tail, render)
    if noted is not None:
        await noted(stream.dropped)
    yield last


__all__ = ["ProviderStream", "TextPages", "WindowPages", "first_pass", "parts", "window_pass"]
