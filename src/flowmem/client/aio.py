# sync: """``Client``: flowmem over HTTP, synchronous (one pooled ``httpx.Client`` per instance)."""
"""``AsyncClient``: flowmem over HTTP for asyncio (one pooled ``httpx.AsyncClient`` per instance).

``flowmem.client.sync.Client`` is generated from this module by ``scripts/async_to_sync.py``:
the same methods, calls (``flowmem.client.calls``), results and errors, not awaited. Change
this module, then run the script (``make lint`` fails while ``sync.py`` is stale). A
``# async only`` comment leaves the statement below it out of ``sync.py``; ``# sync: …``
lines replace it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import httpx

from flowmem.client import calls
from flowmem.client.aio_compaction import AsyncCompactionCalls
from flowmem.client.aio_vectors import AsyncVectorCalls
from flowmem.client.base import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_TIMEOUT,
    Refused,
    explained,
    read_answer,
    request_of,
    settings,
    unreachable,
    wait_after,
)
from flowmem.client.calls import Call, ScopeIds, Where
from flowmem.client.retry import RetryPolicy
from flowmem.client.types import (
    BufferRead,
    CheckResult,
    Health,
    NormalizeResult,
    RepairLog,
    ResetResult,
    Session,
    SessionPage,
    StopResult,
    TranscriptPage,
    TranscriptRow,
    TurnResult,
    UserErasure,
)
from flowmem.memory import AsyncMemory
from flowmem.results import (
    BufferResult,
    PopResult,
    ReadResult,
    WriteResult,
)
from flowmem.scope import ExecutionContext

T = TypeVar("T")
R = TypeVar("R")


class AsyncClient(AsyncCompactionCalls, AsyncVectorCalls):
    """A flowmem server's API; implements ``flowmem.memory.AsyncMemory``.

    ``base_url`` defaults to ``$FLOWMEM_URL`` (else ``http://127.0.0.1:8765``) and
    ``token`` to ``$FLOWMEM_TOKEN``. ``timeout`` bounds each attempt in seconds
    (connecting at most 10 s); ``retry`` says which failures are tried again and how
    long to wait (``RetryPolicy``; ``RetryPolicy.never()`` for none); one connection
    pool of ``max_connections`` serves every call. ``transport`` replaces httpx's
    (tests, proxies). Use it as a context manager (``async with``), or ``await close()`` it.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings(base_url, token, timeout, retry, max_connections, headers)
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url,
            headers=self.settings.headers,
            timeout=self.settings.timeout,
            limits=self.settings.limits,
            transport=transport,
        )
        self._user: str | None = None

    # --- lifecycle ---------------------------------------------------------------------
    async def close(self) -> None:
        """Close the connection pool (the client cannot be used afterwards)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    async def call(self, call: Call[T], *, idempotency_key: str | None = None) -> T:
        """Send ``call``, retrying under the policy; return its answer or raise its error.

        A write is sent with ``idempotency_key`` (checked before anything is sent), else
        with a fresh random key; every retry of it carries the same key.
        """
        request = request_of(call, idempotency_key)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(
                    request.method,
                    request.path,
                    params=request.params,
                    headers=request.headers,
                    content=request.content,
                )
            except httpx.TransportError as exc:
                wait = wait_after(self.settings.retry, attempt, exc)
                if wait is None:
                    raise unreachable(exc, attempt, self.settings, request) from exc
                await asyncio.sleep(wait)
                continue
            answer = read_answer(call, response)
            if not isinstance(answer, Refused):
                return answer
            wait = wait_after(self.settings.retry, attempt, answer)
            if wait is None:
                raise explained(answer.error, self.settings, request)
            await asyncio.sleep(wait)

    # --- health ------------------------------------------------------------------------
    async def health(self) -> Health:
        """Liveness (``GET /health``; no token needed)."""
        return await self.call(calls.health())

    async def store_health(self) -> Health:
        """Readiness (``GET /health/store``): the store took a write and read it back."""
        return await self.call(calls.store_health())

    # --- sessions ----------------------------------------------------------------------
    async def create_session(
        self,
        name: str = "",
        agent: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Session:
        """Create a session owned by the token's user (needs ``sessions:create``)."""
        return await self.call(calls.create_session(name, agent, metadata), idempotency_key=idempotency_key)

    async def list_sessions(self, limit: int = 20, offset: int = 0) -> SessionPage:
        """One page of the sessions the token may view, newest first."""
        return await self.call(calls.list_sessions(limit, offset))

    async def iter_sessions(self, page_size: int = 100) -> AsyncIterator[Session]:
        """Every session the token may view, newest first, fetched a page at a time."""
        offset = 0
        while True:
            page = await self.list_sessions(page_size, offset)
            # sync: yield from page.data
            for item in page.data:
                yield item
            if not page.has_more or not page.data:
                return
            offset += len(page.data)

    async def get_session(self, session_id: str) -> Session:
        """One session (NotFoundError unless the token may view it)."""
        return await self.call(calls.get_session(session_id))

    async def delete_session(self, session_id: str, *, idempotency_key: str | None = None) -> None:
        """Delete a session with its transcript and ``session`` scope (owner or admin)."""
        await self.call(calls.delete_session(session_id), idempotency_key=idempotency_key)

    async def send_turn(
        self, session_id: str, content: str, *, wait: bool = False, idempotency_key: str | None = None
    ) -> TurnResult:
        """Send a user turn (a drive action); with ``wait`` return once it has finished."""
        return await self.call(calls.send_turn(session_id, content, wait), idempotency_key=idempotency_key)

    async def stop_session(self, session_id: str, *, idempotency_key: str | None = None) -> StopResult:
        """Stop the session's running turn."""
        return await self.call(calls.stop_session(session_id), idempotency_key=idempotency_key)

    async def reset_session(self, session_id: str, *, idempotency_key: str | None = None) -> ResetResult:
        """Clear the session's conversation buffer (ConflictError while a turn runs)."""
        return await self.call(calls.reset_session(session_id), idempotency_key=idempotency_key)

    async def messages(
        self,
        session_id: str,
        *,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> TranscriptPage:
        """Poll a session's transcript by sequence cursor."""
        return await self.call(calls.messages(session_id, since, before, limit, newest_first))

    async def iter_messages(
        self, session_id: str, *, since: int = 0, page_size: int = 100
    ) -> AsyncIterator[TranscriptRow]:
        """Every transcript message after ``since``, oldest first, a page at a time."""
        cursor: int | None = since
        while True:
            page = await self.messages(session_id, since=cursor, limit=page_size)
            # sync: yield from page.data
            for item in page.data:
                yield item
            if not page.has_more or page.next_since is None:
                return
            cursor = page.next_since

    async def edit_message(
        self, session_id: str, seq: int, message: dict[str, Any], *, idempotency_key: str | None = None
    ) -> TranscriptRow:
        """Replace one transcript message (admin only, MEM-15)."""
        return await self.call(calls.edit_message(session_id, seq, message), idempotency_key=idempotency_key)

    async def delete_message(self, session_id: str, seq: int, *, idempotency_key: str | None = None) -> None:
        """Delete one transcript message (admin only, MEM-15)."""
        await self.call(calls.delete_message(session_id, seq), idempotency_key=idempotency_key)

    # --- buffers and records, addressed as the API addresses them ----------------------
    # ``**ids``: the scope ids, ``session_id=`` for scope ``session``, ``workflow_id=``,
    # ``pipeline_id=``, ``execution_id=`` for the shared scopes (``calls.ScopeIds``)
    async def append_buffer(
        self,
        scope: str,
        key: str,
        messages: Any,
        *,
        max_messages: int = 0,
        return_messages: bool = False,
        format: str = "rows",
        system: Any = None,
        idempotency_key: str | None = None,
        **ids: Unpack[ScopeIds],
    ) -> BufferResult:
        """Append one message or a list (rows, or a provider's ``format``) to a buffer."""
        call = calls.append_buffer(scope, key, messages, Where(**ids), max_messages, return_messages, format, system)
        return await self.call(call, idempotency_key=idempotency_key)

    async def load_buffer(
        self,
        scope: str,
        key: str,
        *,
        last: int | None = None,
        before: int | None = None,
        format: str = "rows",
        max_tokens: int | None = None,
        **ids: Unpack[ScopeIds],
    ) -> BufferRead:
        """Load a buffer: all of it, its ``last`` N, older than cursor ``before``; in ``format``.

        ``max_tokens``: the longest sendable suffix within that many tokens (``window``
        says what was cut; ``window_too_small`` when the newest turn alone is larger).
        """
        return await self.call(calls.load_buffer(scope, key, Where(**ids), last, before, format, max_tokens))

    async def clear_buffer(
        self, scope: str, key: str, *, idempotency_key: str | None = None, **ids: Unpack[ScopeIds]
    ) -> WriteResult:
        """Delete every message of a buffer."""
        return await self.call(calls.clear_buffer(scope, key, Where(**ids)), idempotency_key=idempotency_key)

    async def pop_buffer(
        self, scope: str, key: str, *, idempotency_key: str | None = None, **ids: Unpack[ScopeIds]
    ) -> PopResult:
        """Remove and return a buffer's last message (``message`` None when empty)."""
        return await self.call(calls.pop_buffer(scope, key, Where(**ids)), idempotency_key=idempotency_key)

    async def repairs(
        self, scope: str, key: str, *, before: int | None = None, limit: int | None = None, **ids: Unpack[ScopeIds]
    ) -> RepairLog:
        """A page of a buffer's repair log, newest first (``before``: the older page's cursor)."""
        return await self.call(calls.repairs(scope, key, Where(**ids), before, limit))

    async def read_record(self, scope: str, key: str, *, default: Any = None, **ids: Unpack[ScopeIds]) -> ReadResult:
        """Read a memory record; ``default`` (``found=False``) when absent, expired or refused."""
        return await self.call(calls.read_record(scope, key, Where(**ids), default))

    async def write_record(
        self,
        scope: str,
        key: str,
        value: Any,
        *,
        ttl: float | None = None,
        idempotency_key: str | None = None,
        **ids: Unpack[ScopeIds],
    ) -> WriteResult:
        """Write a memory record (any JSON value), expiring after ``ttl`` seconds when given."""
        call = calls.write_record(scope, key, value, Where(**ids), ttl)
        return await self.call(call, idempotency_key=idempotency_key)

    async def delete_record(
        self, scope: str, key: str, *, idempotency_key: str | None = None, **ids: Unpack[ScopeIds]
    ) -> WriteResult:
        """Delete a memory record (``removed`` is 1 when one existed)."""
        return await self.call(calls.delete_record(scope, key, Where(**ids)), idempotency_key=idempotency_key)

    # --- users and the stateless functions ---------------------------------------------
    async def erase_user(self, user_id: str, *, idempotency_key: str | None = None) -> UserErasure:
        """Erase everything stored for a user (admin only)."""
        return await self.call(calls.erase_user(user_id), idempotency_key=idempotency_key)

    async def normalize(
        self, payload: Any, *, format: str | None = None, to: str | None = None
    ) -> NormalizeResult:
        """Normalize a history (a message list or a request body) so a provider accepts it."""
        return await self.call(calls.normalize(payload, format, to))

    async def check(self, payload: Any, *, format: str | None = None) -> CheckResult:
        """What a provider would reject in a history."""
        return await self.call(calls.check(payload, format))

    # --- the Memory protocol (flowmem.memory): the service's signatures ----------------
    # each is ``_memory``: its scope planned, a refusal answered with the neutral result
    async def read(
        self, scope: str, key: str, context: ExecutionContext | None, default: Any = None
    ) -> ReadResult:
        """Read a memory record as ``MemoryService.read`` does; a refusal returns ``default``."""
        read = partial(calls.read_record, scope, key, default=default)
        absent = partial(_not_found, default)
        return await self._memory("read", scope, key, context, read, partial(ReadResult, value=default), absent)

    async def write(
        self,
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> WriteResult:
        """Write a record as ``MemoryService.write`` does; a refusal reports failure."""
        write = partial(calls.write_record, scope, key, value, ttl=ttl)
        return await self._memory("write", scope, key, context, write, WriteResult, idempotency_key=idempotency_key)

    async def delete(
        self, scope: str, key: str, context: ExecutionContext | None, *, idempotency_key: str | None = None
    ) -> WriteResult:
        """Delete a record as ``MemoryService.delete`` does; a refusal deletes nothing."""
        delete = partial(calls.delete_record, scope, key)
        return await self._memory("delete", scope, key, context, delete, WriteResult, _nothing_removed, idempotency_key)

    async def append(
        self,
        scope: str,
        key: str,
        messages: object,
        context: ExecutionContext | None,
        max_messages: int = 0,
        *,
        return_messages: bool = False,
        idempotency_key: str | None = None,
    ) -> BufferResult:
        """Append rows as ``MemoryService.append`` does; a refusal writes nothing (MEM-14)."""
        append = partial(calls.append_buffer, scope, key, messages, max_messages=max_messages, return_messages=return_messages)
        return await self._memory("append", scope, key, context, append, BufferResult, idempotency_key=idempotency_key)

    async def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
        include_archived: bool = False,
    ) -> BufferResult:
        """Load a buffer as ``MemoryService.load`` does; a refusal is the empty buffer.

        ``include_archived``: the rows compactions archived first (the first
        ``len(messages) - count``), then the live rows.
        """
        load = partial(calls.load_buffer, scope, key, last=last, max_tokens=max_tokens, archived=include_archived)
        read = await self._memory("load", scope, key, context, load, BufferResult, _no_rows)
        return read if isinstance(read, BufferResult) else read.as_result()

    async def clear(
        self, scope: str, key: str, context: ExecutionContext | None, *, idempotency_key: str | None = None
    ) -> WriteResult:
        """Clear a buffer as ``MemoryService.clear`` does; a refusal clears nothing."""
        clear = partial(calls.clear_buffer, scope, key)
        return await self._memory("clear", scope, key, context, clear, WriteResult, _nothing_removed, idempotency_key)

    async def pop_last(
        self, scope: str, key: str, context: ExecutionContext | None, *, idempotency_key: str | None = None
    ) -> PopResult:
        """Remove a buffer's last row as ``MemoryService.pop_last`` does."""
        pop = partial(calls.pop_buffer, scope, key)
        return await self._memory("pop", scope, key, context, pop, PopResult, _nothing_popped, idempotency_key)


def _not_found(default: Any, session_id: str) -> ReadResult:
    """A read in a session no write has created yet: ``default``, not found."""
    return ReadResult(value=default, found=False, resolved_scope_id=session_id)


def _no_rows(session_id: str) -> BufferResult:
    """A load of a session no write has created yet: the empty buffer."""
    return BufferResult(resolved_scope_id=session_id)


def _nothing_popped(session_id: str) -> PopResult:
    """A pop in a session no write has created yet: done, no row."""
    return PopResult(success=True, resolved_scope_id=session_id)


def _nothing_removed(session_id: str) -> WriteResult:
    """A delete or clear in a session no write has created yet: done, nothing removed."""
    return WriteResult(success=True, resolved_scope_id=session_id)


if TYPE_CHECKING:  # mypy checks that ``AsyncClient`` has every operation of ``AsyncMemory``
    _implements_the_protocol: type[AsyncMemory] = AsyncClient
