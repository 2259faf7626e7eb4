"""Conversation buffers (``/v1/buffers``) and memory records (``/v1/memory``).

The scope id comes from the caller, never from the request (``flowmem.api.scopes``);
a refused identity scope returns the neutral result with ``resolved_scope_id: ""``
and touches no storage (MEM-6, MEM-7, MEM-13).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from flowmem.access import Principal
from flowmem.api.direct import DirectRoute, render
from flowmem.api.idempotency import PARAMETER, Keyed
from flowmem.api.models import (
    BufferAppend,
    BufferRead,
    BufferResult,
    Format,
    MemoryWrite,
    ReadResult,
    WriteResult,
)
from flowmem.api.routes.common import AUTH_ERRORS, BODY_ERRORS, errors
from flowmem.api.scopes import scope_context
from flowmem.api.target import TARGET_OPENAPI, MemoryCall, memory_call
from flowmem.core import check_storable, normalize
from flowmem.errors import PayloadTooLargeError
from flowmem.formats import check_format, read_document, write_document
from flowmem.scope import ExecutionContext
from flowmem.service import BufferText
from flowmem.store.base import SESSION_SCOPE, Idempotency, WriteGuard

router = APIRouter(prefix="/v1", tags=["memory"], route_class=DirectRoute)

MAX_BATCH = 1000  # messages per append request

SCOPE_ERRORS = (*AUTH_ERRORS, 403, 404, 422)
CALL = Depends(memory_call)
WRITE_OPENAPI = {**TARGET_OPENAPI, "parameters": [*TARGET_OPENAPI["parameters"], PARAMETER]}


class _Result(Protocol):
    """What the memory service returns: a result with its JSON form."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""


def _context(call: MemoryCall, principal: Principal, *, write: bool) -> ExecutionContext:
    """The execution context of a memory call: its scope ids, checked for the caller."""
    target = call.target
    return scope_context(
        call.caller.services.sessions,
        principal,
        target.scope,
        write=write,
        session_id=target.session_id,
        workflow_id=target.workflow_id,
        pipeline_id=target.pipeline_id,
        execution_id=target.execution_id,
    )


async def run(
    call: MemoryCall,
    work: Callable[[ExecutionContext, WriteGuard, Idempotency | None], _Result],
    *,
    write: bool,
) -> dict[str, Any] | Response:
    """Authenticate, resolve the scope and call ``work(context, guard, idempotency)`` in one store call.

    ``guard`` is what a write must find still true inside its transaction: the
    caller's token, and for the ``session`` scope the session (docs/decisions/0014).
    ``idempotency`` is the write's ``Idempotency-Key`` (None without one), recorded
    in the write's transaction; a keyed write is answered with a ``Response`` (the
    first answer on a repeat: ``flowmem.api.idempotency``).
    Every ``work`` here reads, or changes one record or buffer as its last step,
    so it may run on the event loop (``Caller.run_short``).
    """
    caller, target = call.caller, call.target
    keyed = Keyed.of(caller.request) if write else None

    def job(principal: Principal) -> Any:
        context = _context(call, principal, write=write)
        session = context.session_id if target.scope == SESSION_SCOPE else None
        guard = WriteGuard(principal.token_id, session)
        if keyed is None:
            return work(context, guard, None).to_dict()
        return keyed.fused(
            principal, lambda idem: work(context, guard, idem), lambda result: result.to_dict()
        )

    result = await caller.run_short(job)
    if keyed is None:
        answer: dict[str, Any] = result
        return answer
    return result.response()  # type: ignore[no-any-return]


READ_FORMAT = Query(
    "rows",
    description="`rows`: the stored rows, as appended. `openai`, `responses`, "
    "`anthropic`: the rows read (the page, with `last`) normalized on their own and "
    "written in that provider's format, sendable as is; `dropped` and `not_carried` "
    "say what was left out.",
)

STREAM_CHUNK = 512  # rows per chunk of a streamed buffer read


def _parts(text: BufferText) -> Iterator[bytes]:
    """Write a buffer read as JSON, the stored rows copied through unparsed, a chunk at a time."""
    yield b'{"messages":['
    bodies = text.bodies
    for start in range(0, len(bodies), STREAM_CHUNK):
        chunk = ",".join(bodies[start : start + STREAM_CHUNK])
        yield (("," if start else "") + chunk).encode("utf-8", "surrogatepass")
    tail = {
        "count": text.count,
        "appended": 0,
        "appended_any": False,
        "resolved_scope_id": text.resolved_scope_id,
        "next_before": text.next_before,
    }
    yield b"]," + render(tail)[1:]


def _converted(text: BufferText, fmt: str) -> dict[str, Any]:
    """Return a buffer read in provider format ``fmt``: the rows read, normalized and converted."""
    rows = json.loads("[" + ",".join(text.bodies) + "]")
    result = normalize(rows, keep_content=True)
    not_carried: dict[str, int] = {}
    written = write_document(fmt, result.messages, not_carried)
    answer: dict[str, Any] = {"format": fmt}
    if fmt == "anthropic":
        answer["system"] = written.get("system")
        written = written["messages"]
    answer.update(
        messages=written,
        count=text.count,
        appended=0,
        appended_any=False,
        resolved_scope_id=text.resolved_scope_id,
        next_before=text.next_before,
        dropped=result.dropped,
        not_carried=not_carried,
    )
    return answer


async def _stream(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


@router.get(
    "/buffers/{scope}/{key}",
    response_model=BufferRead,
    responses=errors(*SCOPE_ERRORS),
    openapi_extra=TARGET_OPENAPI,
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
    call: MemoryCall = CALL,
) -> Response:
    """Load a conversation buffer: all of it, or its last N messages (optionally before a cursor).

    With `format=rows` (the default) the rows are written as stored (never parsed
    and re-encoded); more than 512 of them are streamed a chunk at a time (chunked
    transfer encoding). A provider format parses the rows read, normalizes them and
    converts them (a page is normalized on its own).
    Page backwards with `last` = N, then `before` = the previous `next_before`.
    """
    memory, target, caller = call.caller.services.memory, call.target, call.caller

    def job(principal: Principal) -> BufferText:
        context = _context(call, principal, write=False)
        return memory.load_text(target.scope, target.key, context, last=last, before=before)

    text = await caller.run_short(job)
    if format != "rows":
        if len(text.bodies) <= STREAM_CHUNK:
            answer = _converted(text, format)
        else:  # a large buffer is converted off the event loop
            answer = await run_in_threadpool(_converted, text, format)
        return Response(render(answer), media_type="application/json")
    if len(text.bodies) <= STREAM_CHUNK:  # one chunk: a plain response with its length
        return Response(b"".join(_parts(text)), media_type="application/json")
    return StreamingResponse(_stream(_parts(text)), media_type="application/json")


def _check_batch(messages: list[Any]) -> None:
    if len(messages) > MAX_BATCH:
        raise PayloadTooLargeError(
            f"at most {MAX_BATCH} messages per append, got {len(messages)}", field="messages"
        )


def _from_provider(fmt: str, messages: list[Any], system: Any) -> list[Any]:
    """Return a provider's messages (and Anthropic's ``system``) as flowmem rows.

    Converted before the store is touched: a payload that plainly is another
    format is ``format_mismatch`` and invalid input in its own format is that
    format's error (``invalid_message``, ``unsupported_content`` …), both 422 with
    nothing written.
    """
    check_storable(system, "body.system")
    document: dict[str, Any] = {"messages": messages}
    if fmt == "anthropic" and system is not None:
        document["system"] = system
    check_format(document if fmt == "anthropic" else messages, fmt, "body.messages")
    if fmt == "responses":
        return read_document(fmt, messages)
    return read_document(fmt, document)


@router.post(
    "/buffers/{scope}/{key}",
    response_model=BufferResult,
    responses=errors(*SCOPE_ERRORS, *BODY_ERRORS, 409),
    openapi_extra=WRITE_OPENAPI,
)
async def append_buffer(
    body: BufferAppend,
    call: MemoryCall = CALL,
) -> dict[str, Any] | Response:
    """Append one message or a list to a buffer (MEM-1, 2, 3, 10, 12, 14 apply).

    `format` says what `messages` are: flowmem rows (default) or a provider's own
    messages (`openai`, `responses`, `anthropic` with its `system`), converted to
    rows first. Reports `count`, `appended` and `appended_any`; `messages` is `[]` unless
    `return_messages` is true (then the whole buffer after the append, which costs
    a read of it). At most 1000 messages per request (413 beyond).
    """
    memory, target = call.caller.services.memory, call.target
    messages = body.messages if isinstance(body.messages, list) else [body.messages]
    _check_batch(messages)
    if body.format != "rows":
        messages = _from_provider(body.format, messages, body.system)
        _check_batch(messages)
    return await run(
        call,
        lambda context, guard, idem: memory.append(
            target.scope,
            target.key,
            messages,
            context,
            body.max_messages,
            return_messages=body.return_messages,
            guard=guard,
            idempotency=idem,
        ),
        write=True,
    )


@router.delete(
    "/buffers/{scope}/{key}",
    response_model=WriteResult,
    responses=errors(*SCOPE_ERRORS, 409),
    openapi_extra=WRITE_OPENAPI,
)
async def clear_buffer(call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Delete every message of a buffer."""
    memory, target = call.caller.services.memory, call.target
    return await run(
        call,
        lambda context, _, idem: memory.clear(target.scope, target.key, context, idempotency=idem),
        write=True,
    )


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
    response_model=ReadResult,
    responses=errors(*SCOPE_ERRORS),
    openapi_extra=TARGET_OPENAPI,
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
    memory, target = call.caller.services.memory, call.target
    fallback = _parse_default(default)
    return await run(
        call,
        lambda context, _, __: memory.read(target.scope, target.key, context, default=fallback),
        write=False,
    )


@router.put(
    "/memory/{scope}/{key}",
    response_model=WriteResult,
    responses=errors(*SCOPE_ERRORS, *BODY_ERRORS, 409),
    openapi_extra=WRITE_OPENAPI,
)
async def write_record(body: MemoryWrite, call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Write a memory record (any JSON value) with an optional TTL in seconds."""
    memory, target = call.caller.services.memory, call.target
    return await run(
        call,
        lambda context, guard, idem: memory.write(
            target.scope, target.key, body.value, context, ttl=body.ttl, guard=guard, idempotency=idem
        ),
        write=True,
    )


@router.delete(
    "/memory/{scope}/{key}",
    response_model=WriteResult,
    responses=errors(*SCOPE_ERRORS, 409),
    openapi_extra=WRITE_OPENAPI,
)
async def delete_record(call: MemoryCall = CALL) -> dict[str, Any] | Response:
    """Delete a memory record."""
    memory, target = call.caller.services.memory, call.target
    return await run(
        call,
        lambda context, _, idem: memory.delete(target.scope, target.key, context, idempotency=idem),
        write=True,
    )
