"""A buffer read answered page by page: the JSON is written as the pages are read (issue 24 §3).

A read of a large buffer held the whole buffer, as Python strings, for as long as
its answer took to send (sixteen readers of a 16 MiB buffer took a worker from 87 to
390 MiB). Here the answer is the same bytes, written from one page at a time
(``MemoryService.first_page`` / ``next_page``, ``Store.page_bodies``): a reader holds
one page of stored JSON text and the chunk made of it, whatever the buffer's size,
and the next page is read only once the last chunk was taken by the connection
(uvicorn waits while the socket's buffer is full), so a slow reader costs a page,
not the buffer. The first page is read with the request's short call; the next ones
in a store thread (``StorePool.page``, issue 38 §2), never on the event loop.

Every page comes from the snapshot the first one saw, or not at all: a write to the
buffer between two pages makes the next one refuse (``BufferChangedError``), and the
answer is then cut short — the connection is closed before the end of the chunked
body, so no client takes a partial read for a whole one (``httpx`` raises, and the
flowmem client retries the read). A client that goes away stops the reading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from flowmem.api.errors import CORRUPT_HINT, record_store_fault
from flowmem.api.pool import StorePool
from flowmem.api.render import render
from flowmem.errors import BufferChangedError, StoreCorruptError
from flowmem.results import REFUSED_KEY, BufferText
from flowmem.service import MemoryService, PagedText

log = logging.getLogger("flowmem")


def head() -> bytes:
    """The answer's first bytes."""
    return b'{"messages":['


def chunk(bodies: Iterable[str], first: bool) -> bytes:
    """Stored rows' JSON texts as one piece of the ``messages`` array (copied through, unparsed)."""
    text = ",".join(bodies)
    return (text if first else "," + text).encode("utf-8", "surrogatepass")


def tail(text: BufferText) -> bytes:
    """The answer's last bytes: the array's end and the read's other fields."""
    fields = {
        "count": text.count,
        "appended": 0,
        "appended_any": False,
        "resolved_scope_id": text.resolved_scope_id,
        "next_before": text.next_before,
    }
    if text.refusal is not None:  # which refusal the neutral read was (decision 0047)
        fields[REFUSED_KEY] = text.refusal.code
    return b"]," + render(fields)[1:]


def whole(text: BufferText) -> bytes:
    """The answer to a read that fits in its first page: the same bytes, at once."""
    return head() + chunk(text.bodies, True) + tail(text)


def check_rows(read: int, expect: int | None) -> None:
    """StoreCorruptError when a whole read found other than the ``expect`` rows the buffer counts."""
    if expect is not None and read != expect:
        raise StoreCorruptError(
            f"a buffer read found {read} rows where the buffer counts {expect}: the database "
            "is damaged (a page that no longer parses reads short)"
        )


async def pages(
    paged: PagedText, memory: MemoryService, pool: StorePool, expect: int | None = None
) -> AsyncIterator[bytes]:
    """The answer's bytes: the first page's, then each next page's as it is read.

    ``expect``: the rows a whole read must find (StoreCorruptError before the answer's
    end otherwise, so the answer is cut short, never short).
    """
    yield head() + chunk(paged.text.bodies, True)
    read = len(paged.text.bodies)
    after, more = paged.after, paged.more
    while more and after is not None:
        await asyncio.sleep(0)  # a send that did not wait: let others run
        page = await pool.page(memory.next_page, paged, after)
        if not page.bodies:
            break
        read += len(page.bodies)
        yield chunk((body for _, body in page.bodies), False)
        after, more = page.bodies[-1][0], page.more
    check_rows(read, expect)
    yield tail(paged.text)


class PagedResponse(Response):
    """200, ``application/json``, chunked: the body from ``parts``; cut short when a page is refused."""

    media_type = "application/json"

    def __init__(self, parts: AsyncIterator[bytes]) -> None:  # no super(): it would set a length
        self.status_code = 200
        self.background = None
        self.parts = parts
        self.raw_headers = [(b"content-type", b"application/json")]  # uvicorn chunks the body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the pieces as they come; stop when the client leaves, cut the answer on a refusal."""
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for part in self.parts:
                if gone.done():
                    return
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except BufferChangedError as exc:
            # returning without the body's end makes the server close the connection
            log.warning("buffer read cut short: %s", exc.message)
        except StoreCorruptError as exc:  # cut short too; named, and readiness fails
            log.error("buffer read cut short (%s): %s%s", exc.code, exc.message, CORRUPT_HINT)
            record_store_fault(scope["app"], exc)
        finally:
            gone.cancel()
            await _closed(self.parts)


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone (the request's body was read already)."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _closed(parts: AsyncIterator[bytes]) -> None:
    close = getattr(parts, "aclose", None)
    if close is not None:
        await close()
