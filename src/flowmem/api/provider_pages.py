"""A provider-format read of more than one page, written page by page (issue 38 §2, decision 0113).

Two passes over the read's pages, both of the snapshot its first page saw
(``MemoryService.next_page``): the first (``first_pass``, one long call in a store
thread) parses each page to learn whether normalization would only move the system
rows first (``flowmem.formats.streamed.Sendable``), keeping the system rows; the
second (``parts``) reads each page again, builds its rows and converts them
(``PageWriter``), and renders the messages they finish, one page per store-thread
call. A reader holds a page, the system rows and, for a format that merges
neighbouring turns, the message still open. A read normalization would repair is
answered whole by the caller (``None`` from ``first_pass``). The bytes are those of
the whole read (``routes.memory._converted``, which gives the answer's other fields
here: it is called on no rows).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from flowmem.api.fast.pool import StorePool
from flowmem.api.paged import check_rows
from flowmem.formats.streamed import PageWriter, Rows, Sendable
from flowmem.results import BufferText
from flowmem.service import MemoryService, PagedText
from flowmem.store.rows import stored_json

Render = Callable[[object], bytes]
Converted = Callable[[BufferText, str], dict[str, Any]]


@dataclass
class ProviderStream:
    """A provider read found writable page by page: its answer's fields and the writer's state."""

    paged: PagedText
    fields: dict[str, Any]
    writer: PageWriter
    rows: Rows = field(default_factory=Rows)
    after: int | None = None
    more: bool = False
    started: bool = False  # the first page converted

    def head(self, render: Render) -> bytes:
        """The answer up to its messages, and the system rows' messages (OpenAI, Responses) (blocking)."""
        before = {}
        for key, value in self.fields.items():
            if key == "messages":
                break
            before[key] = value
        return render(before)[:-1] + b',"messages":[' + self.writer.lead

    def step(self, memory: MemoryService) -> bytes:
        """The next page read, converted and rendered: what it writes of the messages (blocking)."""
        if not self.started:  # the first page: the one the read began with
            self.started = True
            bodies = self.paged.text.bodies
            self.after, self.more = self.paged.after, self.paged.more
        elif self.after is None:  # the last page was empty: nothing more
            bodies = []
        else:
            page = memory.next_page(self.paged, self.after)
            bodies = [body for _, body in page.bodies]
            self.after = page.bodies[-1][0] if page.bodies else None
            self.more = page.more and self.after is not None
        return self.writer.page(self.rows.of(stored_json("[" + ",".join(bodies) + "]")))

    def tail(self, render: Render) -> bytes:
        """The message still open and the answer's end (blocking)."""
        last = self.writer.end()
        after: dict[str, Any] = {}
        seen = False
        for key, value in self.fields.items():
            if seen:
                after[key] = value
            seen = seen or key == "messages"
        after["not_carried"] = self.writer.not_carried
        return last + b"]," + render(after)[1:]


def _pages(paged: PagedText, memory: MemoryService) -> Iterator[list[str]]:
    """Every page's texts, the first page's first (blocking)."""
    yield paged.text.bodies
    after, more = paged.after, paged.more
    while more and after is not None:
        page = memory.next_page(paged, after)
        if not page.bodies:
            return
        yield [body for _, body in page.bodies]
        after, more = page.bodies[-1][0], page.more


def first_pass(
    paged: PagedText,
    memory: MemoryService,
    fmt: str,
    converted: Converted,
    expect: int | None,
    render: Render,
) -> ProviderStream | None:
    """Read every page once: a stream of the read in format ``fmt``, or None (normalize it whole) (blocking).

    ``render`` writes the messages as the API does (each page's, once converted).
    """
    sendable = Sendable()
    read = 0
    for bodies in _pages(paged, memory):
        sendable.feed(stored_json("[" + ",".join(bodies) + "]"))
        read += len(bodies)
        if not sendable.ok:
            return None
    systems = sendable.rows()
    if systems is None:
        return None
    check_rows(read, expect)
    text = paged.text
    fields = converted(BufferText([], text.count, text.next_before, text.resolved_scope_id, text.refusal), fmt)
    writer = PageWriter(fmt, systems, render)
    if fmt == "anthropic":
        fields["system"] = writer.system
    elif fmt == "gemini":
        fields["system_instruction"] = writer.system
    return ProviderStream(paged, fields, writer)


async def parts(
    stream: ProviderStream, memory: MemoryService, pool: StorePool, render: Render
) -> AsyncIterator[bytes]:
    """The answer's bytes: its head, each page's messages as it is converted, its end (each in a store thread)."""
    yield await pool.in_thread(stream.head, render)
    yield await pool.page(stream.step, memory)
    while stream.more:
        await asyncio.sleep(0)
        yield await pool.page(stream.step, memory)
    yield await pool.in_thread(stream.tail, render)


__all__ = ["ProviderStream", "first_pass", "parts"]
