"""Conversation buffers (``/v1/buffers``) and memory records (``/v1/memory``).

The scope id comes from the caller, never from the request (``flowmem.api.fast.route``);
a refused identity scope returns the neutral result with ``resolved_scope_id: ""``
and touches no storage (MEM-6, MEM-7, MEM-13); its answer names the refusal,
``refused`` in the JSON and the ``X-Flowmem-Refused`` header (decision 0047). Each route's store work is one
named ``Operation`` of the memory service (``MemoryCall.short``).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from fastapi import Query
from fastapi.responses import Response

from flowmem import metrics
from flowmem.api import long_reads, provider_pages
from flowmem.api import paged as paged_answer
from flowmem.api.fast.route import (
    TARGET_OPENAPI,
    WRITE_OPENAPI,
    MemoryCall,
    Operation,
    render,
)
from flowmem.api.idempotency import REFUSED_HEADER
from flowmem.api.models import (
    BufferAppend,
    BufferRead,
    BufferResult,
    Format,
    MemoryWrite,
    PopResult,
    ReadResult,
    WriteResult,
)
from flowmem.api.render import render_pieces
from flowmem.api.routes.common import BODY_ERRORS, CALL, scoped, scoped_router
from flowmem.api.routes.incoming import rows_of
from flowmem.api.services import Services
from flowmem.core import check_storable, normalize
from flowmem.errors import InvalidInputError
from flowmem.formats import FIRST_ROLE, write_answer
from flowmem.results import REFUSED_KEY
from flowmem.service import BufferResult as ServiceBufferResult
from flowmem.service import BufferText, PagedText
from flowmem.service.paged_reads import PagedRead

router = scoped_router()


READ_FORMAT = Query(
    "rows",
    description="`rows`: the stored rows, as appended. `openai`, `responses`, "
    "`anthropic`, `gemini`: the rows read (the page, with `last`) normalized on their own "
    "and written in that provider's format, sendable as is; `dropped` and `not_carried` "
    "say what was left out.",
)

STREAM_CHUNK = 512  # rows of a buffer read converted on the event loop (a provider format)


def _converted(text: BufferText, fmt: str) -> dict[str, Any]:
    """Return a buffer read in provider format ``fmt``: the rows read, normalized and converted."""
    bodies = text.bodies
    rows: list[Any] = []
    for at in range(0, len(bodies), STREAM_CHUNK):  # short parses: the loop gets the lock between
        rows += json.loads("[" + ",".join(bodies[at : at + STREAM_CHUNK]) + "]")
    return _written(rows, text, fmt)


def _written(rows: list[Any], text: BufferText, fmt: str) -> dict[str, Any]:
    """Return ``rows`` (a read described by ``text``) normalized and written in format ``fmt``."""
    result = normalize(rows, keep_content=True)
    metrics.normalized(result.dropped)
    not_carried: dict[str, int] = {}
    answer: dict[str, Any] = {"format": fmt, **write_answer(fmt, result.messages, not_carried)}
    answer.update(
        count=text.count,
        appended=0,
        appended_any=False,
        resolved_scope_id=text.resolved_scope_id,
        next_before=text.next_before,
        dropped=result.dropped,
        not_carried=not_carried,
    )
    if text.refusal is not None:
        answer[REFUSED_KEY] = text.refusal.code
    return answer


async def _note_dropped(call: MemoryCall, dropped: int) -> None:
    """Note a whole read's normalization drops in the buffer's repair log (MEM-5; decision 0121).

    Only a whole read: a page's drops may be the page's own cut (a result whose call
    is on the page before). Nothing when nothing was dropped; never fails the read.
    """
    if dropped > 0:
        await call.short(Operation.NOTE_DROPPED, dropped=dropped)


@router.get(
    "/buffers/{scope}/{key}",
    **scoped(BufferRead, openapi=TARGET_OPENAPI),
)
async def load_buffer(
    last: int | None = Query(
        None, ge=0, le=2**62, description="Only the last N messages (a page of N)."
    ),
    before: int | None = Query(
        None,
        ge=0,
        le=2**62,
        description="A cursor from `next_before`: only messages older than it.",
    ),
    format: Format = READ_FORMAT,
    max_tokens: int | None = Query(
        None,
        ge=0,
        le=2**62,
        description="Only the longest sendable suffix within this many tokens (never paged): "
        "calls kept with their results, system messages kept and counted, and with a "
        "`format` that provider's rules (Anthropic, Gemini: the first turn is a user turn). "
        "`window` says what was cut; 422 `window_too_small` (with `needed`) when the "
        "newest turn alone does not fit. Not with `last` or `before`.",
    ),
    archived: bool = Query(
        False,
        description="Also the rows compactions archived: first, in order (`archived` of "
        "them), then the live rows (`count`). The whole buffer as stored rows: not with "
        "`last`, `before` or a provider `format`.",
    ),
    call: MemoryCall = CALL,
) -> Response:
    """Load a conversation buffer: all of it, or its last N messages (optionally before a cursor).

    With `format=rows` (the default) the rows are written as stored (never parsed
    and re-encoded). A read of more than one page (512 rows, or about 256 KiB of
    JSON) is streamed page by page (chunked transfer encoding): the server holds
    one page per reader, and a write to the buffer during the read cuts the answer
    short (the connection closes before the body's end: read again). A provider
    format normalizes the rows read (a page asked with `last` on its own) and
    converts them, written page by page too (repair included: a late result is
    read again when its call's turn is written). A token window, in any format, and `archived=true` are streamed page by
    page as well. Page backwards with `last` = N, then `before` = the previous `next_before`.
    With `max_tokens`, a token window (docs/memory.md, "Token windows").
    """
    if archived and max_tokens is not None:
        raise InvalidInputError("archived=true reads the whole buffer: leave out max_tokens", argument="max_tokens")
    if max_tokens is not None:
        return await _window(call, max_tokens, format, last, before)
    if archived:
        return await _with_archive(call, last, before, format)
    paged: PagedText = await call.short(Operation.LOAD, last=last, before=before)
    if paged.text.refusal is not None:  # the neutral (empty) read, and which refusal (0047)
        headers = {REFUSED_HEADER: paged.text.refusal.code}
        neutral = paged.text
        content = render(_converted(neutral, format)) if format != "rows" else paged_answer.whole(neutral)
        return Response(content, headers=headers, media_type="application/json")
    services = call.caller.services
    whole = last is None and before is None
    if format != "rows":
        if not paged.more and len(paged.text.bodies) <= STREAM_CHUNK:  # one page: on the loop
            answer = _converted(paged.text, format)
            content = render(answer)
            if whole:
                await _note_dropped(call, int(answer["dropped"]))
        else:  # more pages: read, converted and rendered off the event loop, page by page (0113)
            expect = paged.text.count if whole else None
            stream = await services.pool.long(
                provider_pages.first_pass, paged, services.memory, format, _converted, expect, render_pieces
            )
            noted = partial(_note_dropped, call) if whole else None
            parts = provider_pages.parts(stream, services.memory, services.pool, render_pieces, noted)
            return paged_answer.PagedResponse(parts)
        return Response(content, media_type="application/json")
    # a whole read must hold as many rows as the buffer counts: fewer is a damaged file
    # read short (a SQLite page whose cells no longer parse), never a short answer
    expect = paged.text.count if last is None and before is None else None
    if not paged.more:  # one page: a plain response with its length
        paged_answer.check_rows(len(paged.text.bodies), expect)
        return Response(paged_answer.whole(paged.text), media_type="application/json")
    parts = paged_answer.pages(paged, services.memory, services.pool, expect)
    return paged_answer.PagedResponse(parts)


async def _window(
    call: MemoryCall, max_tokens: int, fmt: str, last: int | None, before: int | None
) -> Response:
    """A token-budget window of the buffer (``MemoryService.load`` with ``max_tokens``)."""
    if last is not None or before is not None:
        raise InvalidInputError("give max_tokens, or last and before: not both")
    first_role = FIRST_ROLE.get(fmt)
    services = call.caller.services
    if fmt == "rows":  # paged: a reader holds a page (decision 0113)
        then = long_reads.answering(services, _NEUTRAL_WINDOW)
    else:  # a provider format: normalized and converted page by page too
        then = partial(_provider_window, services, fmt)
    return await call.in_thread(Operation.WINDOW, then, max_tokens=max_tokens, first_role=first_role, paged=True)


def _provider_window(services: Services, fmt: str, read: PagedRead) -> Response:
    """A window's answer in provider format ``fmt`` (in a store thread): whole when it fits in a page, else paged."""
    if read.refusal is not None:
        return _window_answer(fmt, ServiceBufferResult(refusal=read.refusal))
    stream = provider_pages.window_pass(read, services.memory, fmt, _converted, render_pieces)
    if not (len(read.segments) > 0 and read.first is not None and read.first.more):
        return Response(stream.whole(render_pieces), media_type="application/json")
    return paged_answer.PagedResponse(provider_pages.parts(stream, services.memory, services.pool, render_pieces))


_NEUTRAL_WINDOW = long_reads.refused(ServiceBufferResult, next_before=None)
"""A refused window's answer: the neutral read, and which refusal (decision 0047)."""
_NEUTRAL_ARCHIVE = long_reads.refused(ServiceBufferResult)
"""A refused read with the archive's answer: the neutral read, and which refusal."""


def _window_answer(fmt: str, result: ServiceBufferResult) -> Response:
    """A window's answer, in stored rows or provider format ``fmt`` (built in a store thread)."""
    if fmt == "rows":
        answer = {**result.to_dict(), "next_before": None}
    else:
        text = BufferText([], result.count, None, result.resolved_scope_id, result.refusal)
        answer = _written(result.messages, text, fmt)
        if result.window is not None:
            answer["window"] = result.window.to_dict()
    headers = {} if result.refusal is None else {REFUSED_HEADER: result.refusal.code}
    return Response(render_pieces(answer), headers=headers, media_type="application/json")

async def _with_archive(call: MemoryCall, last: Any, before: Any, fmt: str) -> Response:
    """A read with the archive (decision 0084): the archived rows, then the live ones."""
    for name, value in (("last", last), ("before", before)):
        if value is not None:
            raise InvalidInputError(f"archived=true reads the whole buffer: leave out {name}", argument=name)
    if fmt != "rows":
        raise InvalidInputError("archived=true reads stored rows: leave out format", argument="format")
    then = long_reads.answering(call.caller.services, _NEUTRAL_ARCHIVE)
    return await call.in_thread(Operation.LOAD_ALL, then, include_archived=True, paged=True)


@router.post(
    "/buffers/{scope}/{key}",
    **scoped(BufferResult, *BODY_ERRORS, 409, openapi=WRITE_OPENAPI),
)
async def append_buffer(
    body: BufferAppend,
    call: MemoryCall = CALL,
) -> dict[str, Any] | Response:
    """Append one message or a list to a buffer (MEM-1, 2, 3, 10, 12, 14 apply).

    `format` says what `messages` are: flowmem rows (default) or a provider's own
    messages (`openai`, `responses`, `anthropic` with its `system`, `gemini` with its
    `system_instruction`), converted to rows first. Reports `count`, `appended` and `appended_any`; `messages` is `[]` unless
    `return_messages` is true (then the whole buffer after the append, which costs
    a read of it). At most 1000 messages per request (413 beyond).
    """
    return await call.answer(
        Operation.APPEND,
        messages=rows_of(body),
        max_messages=body.max_messages,
        return_messages=body.return_messages,
    )


@router.delete(
    "/buffers/{scope}/{key}",
    **scoped(WriteResult, 409, openapi=WRITE_OPENAPI),
)
async def clear_buffer(call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Delete every message of a buffer."""
    return await call.answer(Operation.CLEAR)


@router.delete(
    "/buffers/{scope}/{key}/last",
    **scoped(PopResult, 409, openapi=WRITE_OPENAPI),
)
async def pop_buffer(call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Remove and return a buffer's last message (the Agents SDK's `pop_item`).

    `message` is the row removed, `null` when the buffer is empty; `success` is
    false, and nothing removed, when the scope refused. A write: for scope
    `session` the caller must be able to drive the session.
    """
    return await call.answer(Operation.POP)


def _parse_default(text: str | None) -> Any:
    """JSON text becomes its value; any other text is the default as a string.

    A value holding text that cannot be stored or served (``"\\ud800"``) is refused
    with ``invalid_text`` (422), like the same text in a body.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    check_storable(value, "query.default")
    return value


@router.get(
    "/memory/{scope}/{key}",
    **scoped(ReadResult, openapi=TARGET_OPENAPI),
)
async def read_record(
    default: str | None = Query(
        None,
        max_length=65536,
        description="Returned as `value` when not found: parsed as JSON when it is JSON "
        '(`42`, `"x"`, `[1]`), otherwise the text itself.',
    ),
    call: MemoryCall = CALL,
) -> dict[str, Any] | Response:
    """Read a memory record; `found: false` and the default when absent, expired or refused."""
    fallback = _parse_default(default)
    return await call.answer(Operation.READ, default=fallback)


@router.put(
    "/memory/{scope}/{key}",
    **scoped(WriteResult, *BODY_ERRORS, 409, openapi=WRITE_OPENAPI),
)
async def write_record(body: MemoryWrite, call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Write a memory record (any JSON value) with an optional TTL in seconds."""
    return await call.answer(Operation.WRITE, value=body.value, ttl=body.ttl)


@router.delete(
    "/memory/{scope}/{key}",
    **scoped(WriteResult, 409, openapi=WRITE_OPENAPI),
)
async def delete_record(call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Delete a memory record."""
    return await call.answer(Operation.DELETE)
