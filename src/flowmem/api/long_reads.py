"""The answer of a long read written page by page (issue 38 §2, decision 0113): a ``PagedRead``'s bytes.

A token window, a compaction plan and a read with the archive are found in a store
thread (``MemoryService.load(..., paged=True)``, ``compaction_plan(..., paged=True)``),
which also renders the answer's fields (``rendered``); their rows are then written
as ``flowmem.api.paged`` writes a plain read's: copied through as stored, a page at
a time, each page read once the last one was taken by the connection
(``MemoryService.read_segment``, in a store thread through ``StorePool.page``: never
on the event loop), all of the snapshot the first read saw. The bytes
are those of the whole answer rendered at once (``render``). A read that fits in its
first page is answered whole, with its length; a longer one is chunked and, as a
plain read, cut short when the buffer is written during it (``PagedResponse``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.responses import Response

from flowmem.api.idempotency import REFUSED_HEADER
from flowmem.api.paged import PagedResponse, check_rows
from flowmem.api.pool import StorePool
from flowmem.api.render import render_pieces
from flowmem.api.services import Services
from flowmem.scope import Refusal
from flowmem.service import MemoryService
from flowmem.service.paged_reads import PagedRead


@dataclass(frozen=True)
class Rendered:
    """A paged read's answer around its rows: ``head`` up to the ``messages`` array's first row, ``tail`` after it.

    ``tail`` takes how many archived rows the answer listed (written last as
    ``PagedRead.counted`` when the read counts them).
    """

    head: bytes
    tail: Callable[[int], bytes]


def rendered(read: PagedRead, render: Callable[[object], bytes]) -> Rendered:
    """The bytes around ``read``'s rows, its fields rendered with ``render`` (blocking: in a store thread)."""
    head = render(read.head)[:-1] + b',"messages":[' if read.head else b'{"messages":['
    fields = render(read.tail)
    counted = read.counted

    def tail(count: int) -> bytes:
        if counted is None:
            return b"]," + fields[1:]
        return b"]," + fields[1:-1] + f',"{counted}":{count}}}'.encode()

    return Rendered(head, tail)


def _piece(bodies: Iterable[str], first: bool) -> bytes:
    text = ",".join(bodies)
    return (text if first or not text else "," + text).encode("utf-8", "surrogatepass")


def whole(read: PagedRead, parts: Rendered) -> bytes | None:
    """The whole answer when its rows are the lead and at most one first page; else None (page it)."""
    if len(read.segments) > 1 or (read.first is not None and read.first.more):
        return None
    if read.segments and read.first is None:
        return None
    bodies = list(read.lead)
    counted = 0
    if read.segments and read.first is not None:
        page = [body for _, body in read.first.bodies]
        check_rows(len(page), read.segments[0].expect)
        counted = len(page) if read.segments[0].archive else 0
        bodies += page
    return parts.head + _piece(bodies, True) + parts.tail(counted)


async def pages(
    read: PagedRead, parts: Rendered, memory: MemoryService, pool: StorePool
) -> AsyncIterator[bytes]:
    """The answer's bytes: the head and the lead, then each segment's pages as they are read.

    StoreCorruptError before the answer's end when a segment holds fewer rows than
    it counted (the answer is cut short, never short).
    """
    first = not read.lead
    yield parts.head + _piece(read.lead, True)
    counted = 0
    for index, segment in enumerate(read.segments):
        if index == 0 and read.first is not None:
            page = read.first
        else:
            await asyncio.sleep(0)
            page = await pool.page(memory.read_segment, read, segment)
        seen = 0
        while page.bodies:
            seen += len(page.bodies)
            yield _piece((body for _, body in page.bodies), first)
            first = False
            if not page.more:
                break
            await asyncio.sleep(0)  # a send that did not wait: let others run
            page = await pool.page(memory.read_segment, read, segment, page.bodies[-1][0])
        check_rows(seen, segment.expect)
        counted += seen if segment.archive else 0
    yield parts.tail(counted)


def answer(
    read: PagedRead,
    services: Services,
    render: Callable[[object], bytes],
    neutral: Callable[[Refusal], Response],
) -> Response:
    """The response to a paged read (built in a store thread): ``neutral`` of a refusal; else whole
    when it fits in its first page, else written page by page."""
    if read.refusal is not None:
        return neutral(read.refusal)
    parts = rendered(read, render)
    content = whole(read, parts)
    if content is not None:
        return Response(content, media_type="application/json")
    return PagedResponse(pages(read, parts, services.memory, services.pool))


def answering(services: Services, neutral: Callable[[Refusal], Response]) -> Callable[[PagedRead], Response]:
    """A route's ``answer`` to its paged read, its fields rendered a piece at a time (``render_pieces``)."""
    return partial(answer, services=services, render=render_pieces, neutral=neutral)


def refused(result: Callable[..., Any], **fields: Any) -> Callable[[Refusal], Response]:
    """The answer of a refused paged read: the neutral ``result(refusal=...)`` with ``fields``, and which refusal (0047)."""

    def neutral(refusal: Refusal) -> Response:
        content = render_pieces({**result(refusal=refusal).to_dict(), **fields})
        return Response(content, headers={REFUSED_HEADER: refusal.code}, media_type="application/json")

    return neutral


__all__ = ["Rendered", "answer", "answering", "pages", "refused", "rendered", "whole"]
