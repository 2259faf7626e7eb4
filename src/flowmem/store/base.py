"""The storage protocol every backend implements, and the records it stores.

Two backends implement ``Store``: ``SqliteStore`` (``sqlite/``, and ``memory://``'s
``MemoryStore``, SQLite on a private database in RAM, decision 0138) and
``PostgresStore`` (``postgres/``); they share
``SqlStore`` (``sqlbase.py``) and ``SqlBufferEditor`` (``editor.py``), and every
backend the row checks of ``rows.py``. SQL text lives only in ``sqlite.py`` and
``postgres.py``, and in the capabilities that have tables or queries of their own,
each with a module per backend: ``checkpoints/`` (LangGraph's checkpoints,
``store.checkpoints``) and ``listing/`` (records listed by key prefix). The rules live only in ``flowmem.core``: an append runs
``flowmem.core.apply_append`` over a ``flowmem.core.BufferEditor`` (indexed SQL
queries) inside one transaction
serialized per address, and the core decides.

``Store`` is about data only. How a caller may run a store's calls is a separate,
declared capability: ``LocalCalls`` (``SqliteStore``, ``MemoryStore``), a store
whose calls are local and short and whose deferred writes become durable at a
barrier. A caller that runs store calls off its event loop decides by it (a
store pool may run such calls inline); backends without it (``PostgresStore``)
run in threads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from flowmem.core import AppendOutcome, Message
from flowmem.limits import Quotas as Quotas  # re-exported: the stores take it from here
from flowmem.store.values import (
    DEFAULT_LOCK_TIMEOUT,
    PAGE_CHARS,
    PAGE_ROWS,
    PURGE_BATCH,
    SESSION_SCOPE,
    SESSION_STATUSES,
    TAIL_BATCH,
    TAIL_BATCH_MAX,
    TAIL_FIRST_MAX,
    USER_SCOPE,
    Address,
    BodyPage,
    Erasure,
    Idempotency,
    SessionClaim,
    SessionRecord,
    StoredAnswer,
    Tail,
    TailRow,
    TokenRecord,
    TranscriptMessage,
    Usage,
    WriteGuard,
    capability,
    idempotency_owner,
    quota_owner,
)


class RecordStore(Protocol):
    """Memory records by address, with their expiry."""

    def get_record(self, address: Address, now: float) -> tuple[bool, Any]:
        """Return (found, value); an expired record is not found."""
        ...

    def put_record(
        self,
        address: Address,
        value: Any,
        expires_at: float | None,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> None:
        """Store a JSON-serializable value; raise NotSerializableError and write nothing otherwise.

        With ``guard``, the value is stored only if the guard holds at that moment
        (checked in the same transaction); otherwise its error, nothing written.
        With ``idempotency``, its key and answer (outcome None) are recorded in the
        same transaction (every write method that takes it does likewise).
        """
        ...

    def delete_record(self, address: Address, idempotency: Idempotency | None = None) -> bool:
        """Delete a record; return True when one existed (the outcome ``idempotency`` answers)."""
        ...

    def purge_expired(self, now: float, limit: int = PURGE_BATCH) -> int:
        """Delete at most ``limit`` records and ``limit`` idempotency keys expired at ``now``.

        Returns how many went in all. Reads already treat an expired record or key
        as absent; this reclaims its space.
        """
        ...


class BufferStore(Protocol):
    """Conversation buffers: the rules' appends (MEM-1..3, 10, 12, 14) and the reads."""

    def append(
        self,
        address: Address,
        rows: list[Message],
        max_messages: int = 0,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        snapshot: bool = False,
        guard: WriteGuard | None = None,
        max_bytes: int = 0,
        idempotency: Idempotency | None = None,
    ) -> AppendOutcome:
        """Run ``core.apply_append`` on this buffer in one transaction, serialized per address (MEM-12).

        With ``snapshot`` the outcome's ``rows`` is the whole buffer read in the same
        transaction, so it agrees with ``count`` even under concurrent writers. With
        ``guard``, that transaction first checks it; a failed guard appends nothing.
        BufferFullError, nothing written, when the append grew the buffer's rows
        (their UTF-8 JSON bodies) past ``max_bytes`` (0 = no limit).
        """
        ...

    def load(self, address: Address, last: int | None = None) -> list[Message]:
        """Return the buffer's rows in order (only the last ``last`` when given)."""
        ...

    def iter_rows(self, address: Address, batch: int = 1000) -> Iterator[Message]:
        """Yield the buffer's rows in order, reading ``batch`` rows at a time.

        For buffers too large to hold as one list: at most one batch is read ahead.
        The rows are one snapshot of the buffer. The iterator may hold a connection
        (SQL backends) until it is exhausted or closed. InvalidInputError for a
        ``batch`` that is not an integer >= 1 (raised by the call, before iterating).
        """
        ...

    def load_bodies(
        self, address: Address, last: int | None = None, before: int | None = None
    ) -> list[tuple[int, str]]:
        """Return ``(cursor, compact JSON text)`` of the buffer's rows in order, unparsed.

        Only rows whose cursor is below ``before``, and of those the last ``last``,
        when given. A cursor is an integer that grows with a row's place in the
        buffer (its stored position, stable while the row lives).
        """
        ...

    def page_bodies(
        self,
        address: Address,
        *,
        after: int | None = None,
        before: int | None = None,
        last: int | None = None,
        version: tuple[int, int] | None = None,
        rows: int = PAGE_ROWS,
        chars: int = PAGE_CHARS,
    ) -> BodyPage:
        """Read one page of a buffer's rows, unparsed: those with ``after < cursor < before``, in order.

        ``last`` (a first page): only the last ``last`` of them are read, and
        ``older`` says whether rows exist below. A page holds at most ``rows`` rows
        and ends once it holds ``chars`` characters (at least one row), so a reader
        holds one page whatever the buffer's size. Each call is one snapshot; the
        next page passes the first one's ``version`` and the last cursor read as
        ``after``: BufferChangedError, nothing returned, when the buffer was written
        since (the pages would not be one snapshot; read again).
        """
        ...

    def count(self, address: Address) -> int:
        """Return the number of rows in the buffer."""
        ...

    def read_tail(self, address: Address, batch: int = TAIL_BATCH, budget: int = 0) -> Tail:
        """Read the buffer from its end: its size and tokens, its system rows, its rows newest first.

        The rows come in batches (``batch`` rows, then twice as many each time up to
        ``TAIL_BATCH_MAX``), so a caller that stops after k rows read O(k) rows and no
        row bodies besides the system rows. With ``budget`` (tokens), the first batch
        holds the rows that many tokens make at the buffer's average count per row, an
        eighth more and 8 (at least ``batch``, at most ``TAIL_FIRST_MAX``), the next
        half as many, and each later one twice the last. Every batch is one snapshot with the first:
        BufferChangedError from the iterator when the buffer was written in between
        (read again). InvalidInputError for a ``batch`` that is not an integer >= 1.
        """
        ...

    def clear(
        self,
        address: Address,
        guard_session: str | None = None,
        idempotency: Idempotency | None = None,
    ) -> int:
        """Delete every row of the buffer; return how many were removed.

        With ``guard_session``, ConflictError (nothing deleted) when that session is
        running a turn, checked inside the transaction that clears, so a turn can
        neither start between the check and the clear nor be missed by it.
        """
        ...


class SessionStore(Protocol):
    """Sessions, their owners and status, their transcripts, and a user's erasure."""

    def create_session(
        self,
        session: SessionRecord,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> SessionRecord:
        """Insert a new session; with ``guard``, only if it holds (checked by the insert)."""
        ...

    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the session or None."""
        ...

    def list_sessions(
        self, owner: str | None, include_all: bool, limit: int, offset: int
    ) -> tuple[list[SessionRecord], int]:
        """Return a page of sessions (newest first) and the total under the same filter.

        ``include_all`` lists every session; otherwise only those owned by ``owner``
        (none at all when ``owner`` is None: an absent identity owns nothing).
        """
        ...

    def set_session_status(
        self, session_id: str, status: str, expected: frozenset[str] | None = None
    ) -> bool:
        """Set the status (compare-and-set when ``expected`` is given); return True if changed."""
        ...

    def delete_session(self, session_id: str) -> bool:
        """Delete a session with everything stored for it, in one transaction; True when it existed.

        That is its transcript and its whole session scope: every buffer and memory
        record addressed ``(SESSION_SCOPE, session_id, key)`` (the conversation
        buffer, other buffers, records, the runtime's lease and call journal). An
        unknown session id changes nothing. ConflictError, with nothing deleted,
        while the session is running a turn (checked in the same transaction).
        """
        ...

    def erase_user(self, user_id: str) -> Erasure:
        """Delete everything stored for a user, in one transaction; return what went.

        That is every session the user owns (each as ``delete_session`` deletes it),
        every buffer and memory record in the ``user`` scope of ``user_id``, the
        user's tokens and the user's idempotency keys. ConflictError, with nothing deleted, while one of the user's
        sessions is running a turn.
        """
        ...

    # --- transcripts -------------------------------------------------------------
    def add_transcript(
        self, session_id: str, row: Message, guard: WriteGuard | None = None
    ) -> TranscriptMessage:
        """Append a row to a session's transcript with the next sequence number.

        The session must exist when the row is written (checked in the same
        transaction): NotFoundError and nothing written otherwise. ``guard`` adds
        its token check (AuthenticationError).
        """
        ...

    def list_transcript(
        self,
        session_id: str,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> tuple[list[TranscriptMessage], bool]:
        """Return a page of transcript rows by sequence cursor and whether more exist."""
        ...

    def edit_transcript(self, session_id: str, seq: int, row: Message) -> bool:
        """Replace one transcript row (the administrative tier only); True if it existed."""
        ...

    def delete_transcript(self, session_id: str, seq: int) -> bool:
        """Delete one transcript row (the administrative tier only); True if it existed."""
        ...


class IdempotencyStore(Protocol):
    """Idempotency keys and the answers they repeat (docs/decisions/0031)."""

    def get_idempotency(self, owner: str, key: str, now: float) -> StoredAnswer | None:
        """Return the owner's live key; None when absent or expired (an expired one is deleted)."""
        ...

    def claim_idempotency(self, idempotency: Idempotency, now: float) -> StoredAnswer | None:
        """Record the key as claimed (status 0, its own transaction); None when it was free.

        Otherwise the live key found (nothing changed); an expired one is replaced.
        """
        ...

    def answer_idempotency(self, owner: str, key: str, status: int, body: str) -> None:
        """Record the answer of a claimed key (no change when it is no longer claimed)."""
        ...

    def release_idempotency(self, owner: str, key: str) -> None:
        """Delete a claimed key whose request failed (an answered key is kept)."""
        ...


class QuotaStore(Protocol):
    """Per-user quotas, counted by the store across processes (docs/decisions/0044)."""

    def set_quotas(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` on every later write through this store object (default ``Quotas()``)."""
        ...

    def usage(self, user_id: str) -> Usage:
        """Return what is counted for ``user_id`` (zeros for a user with nothing stored)."""
        ...


class TokenStore(Protocol):
    """API tokens, stored by their hash."""

    def create_token(self, token: TokenRecord) -> None:
        """Store a token record (its hash, never the token)."""
        ...

    def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        """Return the token with this hash, revoked or not."""
        ...

    def list_tokens(self) -> list[TokenRecord]:
        """Return every token record."""
        ...

    def revoke_token(self, token_id: str) -> bool:
        """Mark a token revoked; True when it existed."""
        ...


class Store(RecordStore, BufferStore, SessionStore, IdempotencyStore, QuotaStore, TokenStore, Protocol):
    """The one storage protocol: the intersection of the small ones above.

    A caller that needs one part names that part (``RecordStore``, ``BufferStore`` …);
    every backend implements all of them.
    """

    url: str

    def close(self) -> None:
        """Release connections and files."""
        ...


@runtime_checkable
class LocalCalls(Protocol):
    """A capability: calls are local and short, and deferred writes become durable at a barrier.

    Such a store's calls take no network round trip, so an event loop may make
    them itself, inside ``deferred()``. There a call that would wait for a lock
    raises ``locks.WouldBlock`` before it changed anything (the caller runs it
    again in a thread, where it waits as usual: MEM-12), and a write it makes is
    *not* durable when it returns: it is once ``sync()`` has returned a count at
    least the ``sync_barrier()`` read after it. Outside ``deferred()`` every write
    is durable when it returns. docs/decisions/0027.
    """

    def deferred(self) -> AbstractContextManager[None]:
        """On this thread: calls never wait for a lock, and writes wait for ``sync``."""
        ...

    def sync_barrier(self) -> int | None:
        """The count of deferred writes ``sync`` must reach; None when every write is durable."""
        ...

    def sync(self) -> int:
        """Make every deferred write counted so far durable (blocking); return that count."""
        ...


@runtime_checkable
class SupportsPopLast(Protocol):
    """A buffer capability: remove the last row (the Agents SDK's ``pop_item``).

    Every backend of today has it (``SqliteStore``, ``MemoryStore`` among them, and
    ``PostgresStore``, through ``SqlStore``); it is a protocol of its own so that a
    store written outside flowmem may leave it out, and callers check for it.
    """

    def pop_last(self, address: Address, guard_session: str | None = None) -> Message | None:
        """Remove and return the buffer's last row, or None when the buffer is empty.

        With ``guard_session``: ConflictError, nothing removed, while that session runs
        a turn (its question is the last row; checked in the removing transaction).
        """
        ...


@runtime_checkable
class SupportsBackup(Protocol):
    """An optional capability: copy the live database to a new file (``SqliteStore``)."""

    def backup(self, destination: str | os.PathLike[str]) -> int:
        """Write a consistent copy to ``destination`` (never overwritten); return its size."""
        ...


__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "PAGE_CHARS",
    "PAGE_ROWS",
    "PURGE_BATCH",
    "SESSION_SCOPE",
    "SESSION_STATUSES",
    "TAIL_BATCH",
    "TAIL_BATCH_MAX",
    "TAIL_FIRST_MAX",
    "USER_SCOPE",
    "Address",
    "BodyPage",
    "BufferStore",
    "Erasure",
    "Idempotency",
    "IdempotencyStore",
    "LocalCalls",
    "QuotaStore",
    "Quotas",
    "RecordStore",
    "SessionClaim",
    "SessionRecord",
    "SessionStore",
    "Store",
    "StoredAnswer",
    "SupportsBackup",
    "SupportsPopLast",
    "Tail",
    "TailRow",
    "TokenRecord",
    "TokenStore",
    "TranscriptMessage",
    "Usage",
    "WriteGuard",
    "capability",
    "idempotency_owner",
    "quota_owner",
]
