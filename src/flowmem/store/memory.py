"""``MemoryStore``: the in-process reference backend (``memory://``).

It keeps every buffer as a list and runs the core's ``ListEditor`` on it, so it is
the pure ``append`` with a lock around it. Data lives as long as the object.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import replace
from itertools import islice
from typing import Any

from flowmem.core import AppendOutcome, Message, apply_append
from flowmem.core.tokens import estimate_tokens
from flowmem.errors import (
    ConflictError,
    IdempotencyKeyInFlightError,
)
from flowmem.store.adk.memory import MemoryAdkSessions
from flowmem.store.archive.memory import MemoryArchive
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    PURGE_BATCH,
    SESSION_SCOPE,
    TAIL_BATCH,
    USER_SCOPE,
    Address,
    Erasure,
    Idempotency,
    Quotas,
    SessionRecord,
    StoredAnswer,
    Tail,
    TailRow,
    TokenRecord,
    TranscriptMessage,
    Usage,
    WriteGuard,
)
from flowmem.store.checkpoints.memory import MemoryCheckpoints
from flowmem.store.conversations.memory import MemoryConversations
from flowmem.store.editor import row_bytes
from flowmem.store.engine import MemoryTables
from flowmem.store.locks import AddressLocks, no_wait
from flowmem.store.memengine import MemoryEngineParts
from flowmem.store.memtables import BufferReads, IdempotencyKeys, Tokens
from flowmem.store.repairs.memory import MemoryRepairs
from flowmem.store.rows import (
    check_address,
    check_batch,
    check_buffer_bytes,
    check_last,
    check_lock_timeout,
    check_none_running,
    check_not_running,
    check_page,
    check_rows,
    check_texts,
    dump_json,
    to_json,
    utf8_size,
)
from flowmem.store.transcripts import TranscriptPages
from flowmem.store.vectors.memory import MemoryVectors


class MemoryStore(MemoryEngineParts, BufferReads, IdempotencyKeys, Tokens, TranscriptPages):
    """The reference ``Store``: everything in dicts, guarded by locks.

    It has the ``LocalCalls`` capability with nothing to sync: its data lives in
    this process only, so a write is as durable as it will ever be when it returns.
    """

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.RLock()
        self._locks = AddressLocks()
        # the tables the engine lends its kinds of data (MemoryEngine); the names below alias them
        self._tables = MemoryTables()
        self._records = self._tables.records
        self._buffers = self._tables.buffers
        # each buffer's call index as its last append left it (an append does not
        # index every row again); dropped by every other change of the rows
        self._indexes = self._tables.indexes
        self._sizes = self._tables.sizes  # UTF-8 bytes of each buffer's rows as JSON
        # each buffer's rows' default token counts, in order (absent: counted when read)
        self._counts: dict[Address, list[int]] = {}
        self._evicted: dict[Address, tuple[str, ...]] = {}  # call ids of evicted turns (MEM-1, 2)
        self._sessions = self._tables.sessions
        self._transcripts: dict[str, list[TranscriptMessage]] = {}
        self._next_seq: dict[str, int] = {}
        self._tokens: dict[str, TokenRecord] = {}
        self._keys: dict[tuple[str, str], StoredAnswer] = {}  # (owner, key) -> idempotency key
        self._deleted: dict[str, float] = {}  # deleted session ids: never created again
        self._versions = self._tables.versions  # a buffer's last change (paged reads)
        self._changes = itertools.count(1)
        self._buffer_owners: dict[Address, str | None] = {}  # whose quota a buffer counts
        self._record_owners: dict[Address, str | None] = {}  # whose quota a record counts
        self._usage: dict[str, Usage] = {}
        self._quotas = Quotas()
        self.checkpoints = MemoryCheckpoints(self)  # LangGraph's checkpoints (decision 0040)
        self.conversations = MemoryConversations(self)  # pydantic-ai's (decision 0051)
        self.adk = MemoryAdkSessions(self)  # Google ADK's sessions and states (decision 0053)
        self.archive: MemoryArchive = MemoryArchive(self)  # what compactions archived (decision 0083)
        self.repairs: MemoryRepairs = MemoryRepairs(self)  # what the append rules repaired (issue 37 §2)
        self.vectors: MemoryVectors = MemoryVectors(self, self)  # the records' embeddings (issue 40)

    # --- memory records -------------------------------------------------------
    def get_record(self, address: Address, now: float) -> tuple[bool, Any]:
        """Return (found, value); an expired record is not found."""
        check_address(address)
        with self._lock:
            stored = self._records.get(address)
        if stored is None:
            return False, None
        text, expires_at = stored
        if expires_at is not None and expires_at <= now:
            return False, None
        return True, json.loads(text)

    def _check_key(self, idempotency: Idempotency | None) -> None:
        """IdempotencyKeyInFlightError when the write's key is recorded already (lock held)."""
        if idempotency is not None and (idempotency.owner, idempotency.key) in self._keys:
            raise IdempotencyKeyInFlightError("this idempotency key is recorded already")

    def _record_key(self, idempotency: Idempotency | None, outcome: Any) -> None:
        """Record the write's key with its answer (lock held, after ``_check_key``)."""
        if idempotency is not None:
            status, body = idempotency.answer(outcome)
            self._keys[(idempotency.owner, idempotency.key)] = StoredAnswer(
                idempotency.fingerprint, status, body, idempotency.expires_at
            )

    # --- what every change of a buffer or record goes through (the lock held) -------
    def _set_record(
        self,
        address: Address,
        text: str,
        expires_at: float | None,
        created: SessionRecord | None = None,
    ) -> None:
        """Store a record, counted against its owner's quotas (the last step)."""
        old = self._records.get(address)
        owner = self._owner(address, created, record=True)
        before = 0 if old is None else utf8_size(old[0])
        # another value: the vectors made from the old one go (issue 40)
        vectors = self.vectors.held(address) if old is not None and old[0] != text else 0
        self.charge(self._tables, owner, utf8_size(text) - before - vectors, 0, int(old is None))
        if vectors:
            self.vectors.drop(address)
        self._records[address] = (text, expires_at)
        self._record_owners[address] = owner

    def _drop_record(self, address: Address) -> None:
        """Delete a record (counted off its owner's usage)."""
        old = self._records.pop(address, None)
        if old is not None:
            vectors = self.vectors.drop(address)  # and its vectors (issue 40)
            self.charge(self._tables, self._record_owners.pop(address, None), -utf8_size(old[0]) - vectors, 0, -1)

    def set_quotas(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` on every later write."""
        with self._lock:
            self._quotas = quotas

    def usage(self, user_id: str) -> Usage:
        """Return what is counted for ``user_id``."""
        with self._lock:
            return self._usage.get(user_id, Usage())

    def put_record(
        self,
        address: Address,
        value: Any,
        expires_at: float | None,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> None:
        """Store a JSON value (NotSerializableError, nothing written, otherwise).

        With ``guard``, only if it holds (checked under the lock the write takes);
        with ``idempotency``, its key is recorded under that lock too.
        """
        check_address(address)
        text = to_json(value)
        with self._lock:
            created = self._check_guard(guard)
            self._check_key(idempotency)
            self._set_record(address, text, expires_at, created)
            self._record_key(idempotency, None)
            self._store_session(created)

    def purge_expired(self, now: float, limit: int = PURGE_BATCH) -> int:
        """Delete at most ``limit`` records expired at ``now``; return how many."""
        check_page(limit)
        with self._lock:
            expired = list(
                islice(
                    (
                        address
                        for address, (_, expires_at) in self._records.items()
                        if expires_at is not None and expires_at <= now
                    ),
                    limit,
                )
            )
            for address in expired:
                self._drop_record(address)
            keys = list(
                islice(
                    (
                        name
                        for name, stored in self._keys.items()
                        if stored.expires_at is not None and stored.expires_at <= now
                    ),
                    limit,
                )
            )
            for name in keys:
                del self._keys[name]
        return len(expired) + len(keys)

    def delete_record(self, address: Address, idempotency: Idempotency | None = None) -> bool:
        """Delete a record; True when one existed."""
        check_address(address)
        with self._lock:
            self._check_key(idempotency)
            existed = address in self._records
            self._record_key(idempotency, existed)
            self._drop_record(address)
            return existed

    # --- conversation buffers ------------------------------------------------
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
        """Apply the core append rules to the buffer, serialized per address.

        Implements MEM-12 in one process: a lock per address with a bounded wait
        (``AddressLocks``); past it the append proceeds after one WARNING.

        Rows must be JSON like on every backend: NotSerializableError, nothing written;
        BufferFullError, nothing written, past ``max_bytes``. The buffer is read,
        changed and written back under the store lock, with the guard checked there,
        so a delete or erasure happens wholly before or after.
        """
        check_address(address)
        check_rows(rows)
        lock_timeout = check_lock_timeout(lock_timeout)
        for row in rows:
            to_json(row)
        with self._locks.hold(address, lock_timeout), self._lock:
            created = self._check_guard(guard)
            self._check_key(idempotency)
            size = self._sizes.get(address, 0)
            # the editor works on its own list of the stored rows (ListEditor copies it)
            # and its own copy of their call index; the rows themselves are shared: the
            # rules never change a row in place
            editor = self.archive.editor(
                address,
                self._buffers.get(address, []),
                size,
                self._evicted.get(address, ()),
                list(self._counts_of(address)),
                self._indexes.get(address),
            )
            outcome = apply_append(editor, copy.deepcopy(rows), max_messages)
            check_buffer_bytes(address, size, editor.bytes, max_bytes)
            logged = self.repairs.entries(outcome.logged)  # issue 37 §2
            if logged:  # the log's growth checked against the quota with the rows'
                grown = self.repairs.growth(address, logged)
                new = int(address not in self._buffers)
                owner = self._owner(address, created)
                self.charge(self._tables, owner, editor.bytes - size + grown, new, 0, count=False)
            if snapshot:
                outcome = replace(outcome, rows=copy.deepcopy(editor.rows))
            self._set_buffer(address, editor.rows, editor.bytes, created)
            if logged:  # nothing can fail from here: the buffer and its log are one step
                self.charge(self._tables, self._buffer_owners.get(address), grown, 0, 0, check=False)  # checked above
                self.repairs.add(address, logged)
            self._indexes[address] = editor.call_index()
            if editor.tokens is not None:
                self._counts[address] = editor.tokens
            self._record_key(idempotency, outcome)
            if editor.evicted:
                self._evicted[address] = tuple(editor.evicted)
            self._store_session(created)
            return outcome

    def _counts_of(self, address: Address) -> list[int]:
        """The default token counts of a buffer's rows (under the lock), counted once when missing."""
        counts = self._counts.get(address)
        rows = self._buffers.get(address, [])
        if counts is None or len(counts) != len(rows):
            counts = self._counts[address] = [estimate_tokens(row) for row in rows]
        return counts

    def read_tail(self, address: Address, batch: int = TAIL_BATCH, budget: int = 0) -> Tail:
        """Read the buffer from its end (``BufferStore.read_tail``); cursors are row indexes."""
        check_address(address)
        check_batch(batch)
        check_last(budget)
        with self._lock:
            stored = self._buffers.get(address)
            rows = list(stored or [])  # rows are never changed in place
            counts = list(self._counts_of(address)) if rows else []
            version = None if stored is None else (0, self._versions.get(address, 0))
        systems = [
            TailRow(i, copy.deepcopy(row), counts[i])
            for i, row in enumerate(rows)
            if row.get("role") == "system"
        ]
        newest = (
            TailRow(i, copy.deepcopy(rows[i]), counts[i]) for i in range(len(rows) - 1, -1, -1)
        )
        return Tail(len(rows), sum(counts), systems, newest, version)

    def count(self, address: Address) -> int:
        """Return the number of rows."""
        check_address(address)
        with self._lock:
            return len(self._buffers.get(address, []))

    def clear(
        self,
        address: Address,
        guard_session: str | None = None,
        idempotency: Idempotency | None = None,
    ) -> int:
        """Delete every row of the buffer (ConflictError while ``guard_session`` runs a turn)."""
        with self._locks.hold(address, DEFAULT_LOCK_TIMEOUT), self._lock:
            if guard_session is not None:
                session = self._sessions.get(guard_session)
                check_not_running(guard_session, None if session is None else session.status)
            self._check_key(idempotency)
            removed = len(self._buffers.get(address, []))
            self._record_key(idempotency, removed)
            self._drop_buffer(address)
            return removed

    def pop_last(self, address: Address, guard_session: str | None = None) -> Message | None:
        """Remove and return the buffer's last row (None when empty), serialized per address.

        ConflictError, nothing removed, while ``guard_session`` runs a turn.
        """
        with self._locks.hold(address, DEFAULT_LOCK_TIMEOUT), self._lock:
            if guard_session is not None:
                session = self._sessions.get(guard_session)
                check_not_running(guard_session, None if session is None else session.status)
            rows = self._buffers.get(address)
            if not rows:
                return None
            if len(rows) == 1:
                self._drop_buffer(address)
                return rows[0]
            row = rows[-1]
            counts = self._counts_of(address)[:-1]
            self._set_buffer(address, rows[:-1], self._sizes.get(address, 0) - row_bytes(row))
            self._counts[address] = counts
            return row

    # --- sessions ---------------------------------------------------------------
    def create_session(
        self,
        session: SessionRecord,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> SessionRecord:
        """Insert a new session (ConflictError when the id exists; ``guard`` checked first)."""
        check_texts(id=session.id, name=session.name, owner=session.owner, agent=session.agent)
        dump_json(dict(session.metadata), "session metadata")
        with self._lock:
            self._check_guard(guard)
            if session.id in self._sessions:
                raise ConflictError(f"session {session.id} already exists")
            self._check_key(idempotency)
            self._record_key(idempotency, session)
            self._sessions[session.id] = session
            self._transcripts.setdefault(session.id, [])
            return session

    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the session or None."""
        with self._lock:
            return self._sessions.get(session_id)

    def list_sessions(
        self, owner: str | None, include_all: bool, limit: int, offset: int
    ) -> tuple[list[SessionRecord], int]:
        """Return a page of sessions, newest first, and the total under the filter."""
        check_page(limit, offset)
        with self._lock:
            chosen = [
                s
                for s in self._sessions.values()
                if include_all or (owner is not None and s.owner == owner)
            ]
        chosen.sort(key=lambda s: (s.created_at, s.id), reverse=True)
        return chosen[offset : offset + limit], len(chosen)

    def set_session_status(
        self, session_id: str, status: str, expected: frozenset[str] | None = None
    ) -> bool:
        """Set the status, compare-and-set when ``expected`` is given."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or (expected is not None and session.status not in expected):
                return False
            self._sessions[session_id] = replace(session, status=status)
            return True

    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its transcript and its whole session scope; True when it existed.

        ConflictError, nothing deleted, while it is running a turn.
        """
        with self._lock:
            session = self._sessions.get(session_id)
            check_not_running(session_id, None if session is None else session.status)
            return self._delete_session(session_id) is not None

    def erase_user(self, user_id: str) -> Erasure:
        """Delete the user's sessions, ``user`` scope and tokens at once (ConflictError while running)."""
        with self._lock:
            owned = sorted(s.id for s in self._sessions.values() if s.owner == user_id)
            check_none_running((sid, self._sessions[sid].status) for sid in owned)
            buffers = records = 0
            for session_id in owned:
                dropped = self._delete_session(session_id) or (0, 0)
                buffers, records = buffers + dropped[0], records + dropped[1]
            dropped = self._drop_scope(USER_SCOPE, user_id)
            self.adk.drop_user(user_id)  # ADK's user state
            tokens = [t.id for t in self._tokens.values() if t.user_id == user_id]
            for token_id in tokens:
                del self._tokens[token_id]
            for name in [name for name in self._keys if name[0] == f"user:{user_id}"]:
                del self._keys[name]
            return Erasure(len(owned), buffers + dropped[0], records + dropped[1], len(tokens))

    def _delete_session(self, session_id: str) -> tuple[int, int] | None:
        """Delete a session, its transcript and its scope (lock held); None when absent."""
        if self._sessions.pop(session_id, None) is None:
            return None
        self._deleted[session_id] = time.time()
        self._transcripts.pop(session_id, None)
        self._next_seq.pop(session_id, None)
        self.checkpoints.drop_thread(session_id)  # a LangGraph thread is the session
        self.conversations.drop(session_id)  # so is a pydantic-ai conversation
        self.adk.drop_session(session_id)  # an ADK session is the session
        return self._drop_scope(SESSION_SCOPE, session_id)

    def _drop_scope(self, scope: str, scope_id: str) -> tuple[int, int]:
        """Delete every buffer and record of one scope id (lock held); return (buffers, records)."""
        buffers = [a for a in self._buffers if a[:2] == (scope, scope_id)]
        for address in buffers:
            self._drop_buffer(address)
        records = [a for a in self._records if a[:2] == (scope, scope_id)]
        for address in records:
            self._drop_record(address)
        return len(buffers), len(records)

    # --- transcripts -------------------------------------------------------------
    def add_transcript(
        self, session_id: str, row: Message, guard: WriteGuard | None = None
    ) -> TranscriptMessage:
        """Append a transcript row with the next sequence number while the session exists."""
        dump_json(row, "transcript row")
        with self._lock:
            self._check_guard(WriteGuard(None if guard is None else guard.token_id, session_id))
            seq = self._next_seq.get(session_id, 0) + 1
            self._next_seq[session_id] = seq
            item = TranscriptMessage(session_id, seq, copy.deepcopy(row))
            self._transcripts.setdefault(session_id, []).append(item)
            return item

    def _transcript_page(
        self, session_id: str, low: int, high: int, limit: int, newest_first: bool
    ) -> tuple[list[TranscriptMessage], bool]:
        """A page of transcript rows (``TranscriptPages.list_transcript``), copies."""
        with self._lock:
            rows = [m for m in self._transcripts.get(session_id, []) if low < m.seq < high]
        if newest_first:
            rows.reverse()
        return copy.deepcopy(rows[:limit]), len(rows) > limit

    def _transcript_index(self, session_id: str, seq: int) -> int | None:
        for index, item in enumerate(self._transcripts.get(session_id, [])):
            if item.seq == seq:
                return index
        return None

    def edit_transcript(self, session_id: str, seq: int, row: Message) -> bool:
        """Replace one transcript row."""
        dump_json(row, "transcript row")
        with self._lock:
            index = self._transcript_index(session_id, seq)
            if index is None:
                return False
            self._transcripts[session_id][index] = TranscriptMessage(
                session_id, seq, copy.deepcopy(row)
            )
            return True

    def delete_transcript(self, session_id: str, seq: int) -> bool:
        """Delete one transcript row."""
        with self._lock:
            index = self._transcript_index(session_id, seq)
            if index is None:
                return False
            del self._transcripts[session_id][index]
            return True

    # --- LocalCalls: nothing is ever left to sync ---------------------------------------
    def deferred(self) -> AbstractContextManager[None]:
        """On this thread, make calls raise ``WouldBlock`` instead of waiting for a lock."""
        return no_wait()

    def sync_barrier(self) -> int | None:
        """None: every write is as durable as it gets (in this process) when it returns."""
        return None

    def sync(self) -> int:
        """Nothing to sync: 0."""
        return 0

    def close(self) -> None:
        """Nothing to release."""
