"""The API's routes as client methods, each declared once for ``Client`` and ``AsyncClient``.

Each method is declared as a function of its parameters (no ``self``) that returns
the ``Call`` it sends (``flowmem.client.calls``), or, for a listing, the ``Pages`` it
reads (``flowmem.client.binding``: an ``async def`` on ``AsyncClient``, a ``def`` on
``Client``). The ``Memory`` protocol's methods and the compaction are in
``flowmem.client.memory_methods``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from flowmem.client import calls
from flowmem.client.binding import Declared, Paged
from flowmem.client.calls import Call, FlowIds, ScopeIds, Where
from flowmem.client.steps import Pages
from flowmem.client.types import (
    BufferRead,
    CheckResult,
    Health,
    NormalizeResult,
    RepairLog,
    ResetResult,
    SearchResult,
    Session,
    SessionPage,
    StopResult,
    TranscriptPage,
    TranscriptRow,
    TurnResult,
    UserErasure,
)
from flowmem.results import BufferResult, PopResult, ReadResult, WriteResult


def _next_offset(limit: int) -> Any:
    """The call of the sessions page after ``page`` (None after the last)."""

    def after(page: SessionPage) -> Call[SessionPage] | None:
        done = not page.has_more or not page.data
        return None if done else calls.list_sessions(limit, page.offset + len(page.data))

    return after


def _next_since(session_id: str, limit: int) -> Any:
    """The call of the transcript page after ``page``, by its ``next_since`` cursor (None after the last)."""

    def after(page: TranscriptPage) -> Call[TranscriptPage] | None:
        done = not page.has_more or page.next_since is None
        return None if done else calls.messages(session_id, since=page.next_since, limit=limit)

    return after


class ApiMethods:
    """Every route of the API as a method of both clients (``Client`` and ``AsyncClient`` inherit it)."""

    # --- health ------------------------------------------------------------------------
    @Declared
    def health() -> Call[Health]:
        """Liveness (``GET /health``; no token needed)."""
        return calls.health()

    @Declared
    def store_health() -> Call[Health]:
        """Readiness (``GET /health/store``): the store took a write and read it back."""
        return calls.store_health()

    # --- sessions ----------------------------------------------------------------------
    @Declared
    def create_session(
        name: str = "",
        agent: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Call[Session]:
        """Create a session owned by the token's user (needs ``sessions:create``)."""
        return calls.create_session(name, agent, metadata).keyed(idempotency_key)

    @Declared
    def list_sessions(limit: int = 20, offset: int = 0) -> Call[SessionPage]:
        """One page of the sessions the token may view, newest first."""
        return calls.list_sessions(limit, offset)

    @Paged
    def iter_sessions(page_size: int = 100) -> Pages[Session]:
        """Every session the token may view, newest first, fetched a page at a time."""
        return Pages(calls.list_sessions(page_size, 0), _next_offset(page_size))

    @Declared
    def get_session(session_id: str) -> Call[Session]:
        """One session (NotFoundError unless the token may view it)."""
        return calls.get_session(session_id)

    @Declared
    def delete_session(session_id: str, *, idempotency_key: str | None = None) -> Call[None]:
        """Delete a session with its transcript and ``session`` scope (owner or admin)."""
        return calls.delete_session(session_id).keyed(idempotency_key)

    @Declared
    def send_turn(
        session_id: str, content: str, *, wait: bool = False, idempotency_key: str | None = None
    ) -> Call[TurnResult]:
        """Send a user turn (a drive action); with ``wait`` return once it has finished."""
        return calls.send_turn(session_id, content, wait).keyed(idempotency_key)

    @Declared
    def stop_session(session_id: str, *, idempotency_key: str | None = None) -> Call[StopResult]:
        """Stop the session's running turn."""
        return calls.stop_session(session_id).keyed(idempotency_key)

    @Declared
    def reset_session(session_id: str, *, idempotency_key: str | None = None) -> Call[ResetResult]:
        """Clear the session's conversation buffer (ConflictError while a turn runs)."""
        return calls.reset_session(session_id).keyed(idempotency_key)

    @Declared
    def messages(
        session_id: str,
        *,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> Call[TranscriptPage]:
        """Poll a session's transcript by sequence cursor."""
        return calls.messages(session_id, since, before, limit, newest_first)

    @Paged
    def iter_messages(session_id: str, *, since: int = 0, page_size: int = 100) -> Pages[TranscriptRow]:
        """Every transcript message after ``since``, oldest first, a page at a time."""
        first = calls.messages(session_id, since=since, limit=page_size)
        return Pages(first, _next_since(session_id, page_size))

    @Declared
    def edit_message(
        session_id: str, seq: int, message: dict[str, Any], *, idempotency_key: str | None = None
    ) -> Call[TranscriptRow]:
        """Replace one transcript message (admin only, MEM-15)."""
        return calls.edit_message(session_id, seq, message).keyed(idempotency_key)

    @Declared
    def delete_message(session_id: str, seq: int, *, idempotency_key: str | None = None) -> Call[None]:
        """Delete one transcript message (admin only, MEM-15)."""
        return calls.delete_message(session_id, seq).keyed(idempotency_key)

    # --- buffers and records, addressed as the API addresses them ----------------------
    # ``**ids``: the scope ids, ``session_id=`` for scope ``session``, ``workflow_id=``,
    # ``pipeline_id=``, ``execution_id=`` for the shared scopes (``calls.ScopeIds``)
    @Declared
    def append_buffer(
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
    ) -> Call[BufferResult]:
        """Append one message or a list (rows, or a provider's ``format``) to a buffer."""
        call = calls.append_buffer(scope, key, messages, Where(**ids), max_messages, return_messages, format, system)
        return call.keyed(idempotency_key)

    @Declared
    def load_buffer(
        scope: str,
        key: str,
        *,
        last: int | None = None,
        before: int | None = None,
        format: str = "rows",
        max_tokens: int | None = None,
        **ids: Unpack[ScopeIds],
    ) -> Call[BufferRead]:
        """Load a buffer: all of it, its ``last`` N, older than cursor ``before``; in ``format``.

        ``max_tokens``: the longest sendable suffix within that many tokens (``window``
        says what was cut; ``window_too_small`` when the newest turn alone is larger).
        """
        return calls.load_buffer(scope, key, Where(**ids), last, before, format, max_tokens)

    @Declared
    def clear_buffer(
        scope: str, key: str, *, idempotency_key: str | None = None, **ids: Unpack[ScopeIds]
    ) -> Call[WriteResult]:
        """Delete every message of a buffer."""
        return calls.clear_buffer(scope, key, Where(**ids)).keyed(idempotency_key)

    @Declared
    def pop_buffer(
        scope: str, key: str, *, idempotency_key: str | None = None, **ids: Unpack[ScopeIds]
    ) -> Call[PopResult]:
        """Remove and return a buffer's last message (``message`` None when empty)."""
        return calls.pop_buffer(scope, key, Where(**ids)).keyed(idempotency_key)

    @Declared
    def repairs(
        scope: str, key: str, *, before: int | None = None, limit: int | None = None, **ids: Unpack[ScopeIds]
    ) -> Call[RepairLog]:
        """A page of a buffer's repair log, newest first (``before``: the older page's cursor)."""
        return calls.repairs(scope, key, Where(**ids), before, limit)

    @Declared
    def read_record(scope: str, key: str, *, default: Any = None, **ids: Unpack[ScopeIds]) -> Call[ReadResult]:
        """Read a memory record; ``default`` (``found=False``) when absent, expired or refused."""
        return calls.read_record(scope, key, Where(**ids), default)

    @Declared
    def write_record(
        scope: str,
        key: str,
        value: Any,
        *,
        ttl: float | None = None,
        idempotency_key: str | None = None,
        **ids: Unpack[ScopeIds],
    ) -> Call[WriteResult]:
        """Write a memory record (any JSON value), expiring after ``ttl`` seconds when given."""
        return calls.write_record(scope, key, value, Where(**ids), ttl).keyed(idempotency_key)

    @Declared
    def delete_record(
        scope: str, key: str, *, idempotency_key: str | None = None, **ids: Unpack[ScopeIds]
    ) -> Call[WriteResult]:
        """Delete a memory record (``removed`` is 1 when one existed)."""
        return calls.delete_record(scope, key, Where(**ids)).keyed(idempotency_key)

    # --- vectors: the caller embeds, the server holds no model (decision 0125) ---------
    # ``Where(None, **ids)``: a session_id= keyword is a TypeError (vectors are kept for
    # the user and shared scopes)
    @Declared
    def write_vectors(
        scope: str,
        key: str,
        value: object,
        *,
        space: tuple[str, int],
        vectors: Sequence[tuple[str, Sequence[float]]],
        ttl: float | None = None,
        **ids: Unpack[FlowIds],
    ) -> Call[WriteResult]:
        """Write a record with its vectors in one transaction: ``space`` is (name, dims), ``vectors`` (field, numbers).

        The record's vectors are replaced; another space than the store's raises
        ``EmbeddingSpaceError`` (409), nothing changed.
        """
        return calls.write_vectors(scope, key, value, Where(None, **ids), space, vectors, ttl)

    @Declared
    def search_records(
        scope: str,
        vector: Sequence[float],
        *,
        space: tuple[str, int],
        distance: str = "cosine",
        prefix: str = "",
        limit: int = 10,
        offset: int = 0,
        **ids: Unpack[FlowIds],
    ) -> Call[SearchResult]:
        """The caller's records of ``scope`` under ``prefix`` ranked by their vectors against ``vector``, best first."""
        where = Where(None, **ids)
        return calls.search_records(
            scope, where, space, vector, distance=distance, prefix=prefix, limit=limit, offset=offset
        )

    # --- users and the stateless functions ---------------------------------------------
    @Declared
    def erase_user(user_id: str, *, idempotency_key: str | None = None) -> Call[UserErasure]:
        """Erase everything stored for a user (admin only)."""
        return calls.erase_user(user_id).keyed(idempotency_key)

    @Declared
    def normalize(payload: Any, *, format: str | None = None, to: str | None = None) -> Call[NormalizeResult]:
        """Normalize a history (a message list or a request body) so a provider accepts it."""
        return calls.normalize(payload, format, to)

    @Declared
    def check(payload: Any, *, format: str | None = None) -> Call[CheckResult]:
        """What a provider would reject in a history."""
        return calls.check(payload, format)


__all__ = ["ApiMethods"]
