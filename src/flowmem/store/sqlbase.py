"""``SqlStore``: the ``Store`` methods both SQL backends share, written once.

``SqliteStore`` and ``PostgresStore`` differ in how they lend a connection, open
a write transaction, serialize on a buffer address and recognise a duplicate key;
everything around that (input checks, JSON text, row → record conversion,
records, sessions, transcripts, tokens, ``load``/``count``/``clear``/``pop_last``)
lives here against a few hooks, which ``SqlEngineBase`` (``store/sqlengine.py``)
declares beside the public ``SqlEngine`` the kinds of data use. This module holds no
SQL text (DESIGN.md §6): every statement is named and looked up in the backend's
``SQL`` dict.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar, Protocol, TypeVar

from flowmem.core import AppendOutcome, Message, Repair, apply_append
from flowmem.errors import (
    BufferChangedError,
    ConflictError,
    DatabaseNotFoundError,
    IdempotencyKeyInFlightError,
    SchemaTooNewError,
    StoreError,
)
from flowmem.store import tail
from flowmem.store.base import (
    PAGE_CHARS,
    PAGE_ROWS,
    PURGE_BATCH,
    SESSION_SCOPE,
    TAIL_BATCH,
    USER_SCOPE,
    Address,
    BodyPage,
    Erasure,
    Idempotency,
    Quotas,
    SessionRecord,
    StoredAnswer,
    Tail,
    TokenRecord,
    TranscriptMessage,
    WriteGuard,
)
from flowmem.store.editor import SqlBufferEditor, SqlRunner, load_rows
from flowmem.store.engine import LAST_MAX, C, DbConnection
from flowmem.store.rows import (
    check_address,
    check_batch,
    check_buffer_bytes,
    check_last,
    check_none_running,
    check_not_running,
    check_page,
    check_texts,
    decode_rows,
    dump_json,
    ensure_form,
    guard_form,
    session_from_row,
    stored_json,
    to_json,
    token_from_row,
)
from flowmem.store.sqlengine import SqlEngineBase, StatementRunner

T = TypeVar("T")

SEQ_MAX = 9223372036854775807  # the largest transcript sequence number (64-bit)
LOAD_BATCH = 1000  # rows a whole-buffer ``load`` fetches and parses at a time


class RepairLog(Protocol):
    """What an append tells the repair log (``flowmem.store.repairs.sql.SqlRepairs``)."""

    def record(self, db: SqlRunner, buffer_id: int, repairs: Sequence[Repair], freed: int = 0) -> None:
        """Log a write's repairs inside its transaction (nothing when there are none); ``freed``: bytes it freed."""
        ...


def no_database(where: str) -> DatabaseNotFoundError:
    """The refusal to open ``where``, which holds no flowmem database, without creating one."""
    return DatabaseNotFoundError(
        f"no flowmem database at {where}: check --database or $FLOWMEM_DATABASE_URL "
        "(`flowmem serve` creates a new one; nothing was created)"
    )


class SqlStore(SqlEngineBase[C]):
    """The ``Store`` methods common to the SQL backends, over driver-specific hooks.

    A backend sets ``SQL`` (its statements, by name) and ``MIGRATIONS``, and implements
    the hooks ``SqlEngineBase`` declares: ``_connection``, ``_write``,
    ``_write_serialized`` and ``_is_unique_violation``; it may override
    ``_hold_buffer``, ``_reading``, ``_load_last``, ``_stream_batches`` and
    ``_check_session_id``.
    """

    MIGRATIONS: ClassVar[tuple[tuple[str, ...], ...]]  # the backend's schema versions, in order
    create: bool = True  # False: a database without flowmem's schema is refused, not created
    _quotas: Quotas = Quotas()  # what the quota triggers enforce (``set_quotas``)
    repairs: RepairLog  # the buffers' repair logs (``store.repairs``, issue 37 §2)

    def record_repairs(self, conn: C, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Log ``repairs`` in the buffer's repair log inside the caller's write (``store.repairs``)."""
        self.repairs.record(self._runner(conn), buffer_id, repairs)

    # --- shared helpers -----------------------------------------------------------------
    def _apply_append(
        self,
        conn: C,
        address: Address,
        rows: list[Message],
        max_messages: int,
        snapshot: bool,
        max_bytes: int = 0,
    ) -> AppendOutcome:
        """Run the core append rules inside the caller's open transaction (no commit).

        BufferFullError (the caller rolls back: nothing written) when the append grew
        the buffer past ``max_bytes`` (0 = no limit); the header keeps the size.
        """
        editor = SqlBufferEditor(self._runner(conn), address)
        return self._run_append(conn, editor, rows, max_messages, snapshot, max_bytes)

    def _run_append(
        self,
        conn: C,
        editor: SqlBufferEditor,
        rows: list[Message],
        max_messages: int,
        snapshot: bool,
        max_bytes: int = 0,
    ) -> AppendOutcome:
        """Run the core append rules on ``editor`` (inside the caller's open transaction)."""
        address = editor.address
        outcome = apply_append(editor, rows, max_messages)
        check_buffer_bytes(address, editor.bytes_before, editor.bytes, max_bytes)
        editor.flush()
        if outcome.logged:  # the repair log, in this transaction (issue 37 §2)
            freed = editor.bytes_before - editor.bytes
            self.repairs.record(self._runner(conn), editor.buffer_id, outcome.logged, freed)
        if snapshot:
            found = conn.execute(self.SQL["load_all"], tuple(address)).fetchall()
            outcome = replace(outcome, rows=load_rows(found))
        return outcome

    def _record_key(self, conn: C, idempotency: Idempotency | None, outcome: Any) -> None:
        """Insert the write's idempotency key with its answer, in the caller's transaction.

        IdempotencyKeyInFlightError (the caller rolls back: nothing written) when the
        owner's key is recorded already; on PostgreSQL the insert first waits for a
        transaction in flight that recorded it.
        """
        if idempotency is None:
            return
        status, body = idempotency.answer(outcome)
        params = (idempotency.owner, idempotency.key, idempotency.fingerprint, status, body)
        try:
            conn.execute(self.SQL["idem_insert"], (*params, idempotency.expires_at))
        except Exception as exc:
            if self._is_unique_violation(exc):
                raise IdempotencyKeyInFlightError("this idempotency key is recorded already") from None
            raise

    def _changed(self, name: str, params: Sequence[Any]) -> bool:
        """Run one named write in autocommit; True when it touched a row."""
        with self._connection() as conn:
            return bool(conn.execute(self.SQL[name], params).rowcount > 0)

    def _insert_new(
        self,
        name: str,
        params: Sequence[Any],
        what: str,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
        outcome: Any = None,
    ) -> None:
        """Run one named insert; ConflictError naming ``what`` when its key exists.

        With ``guard`` the insert is the statement ``name@kind`` that checks it (the
        guard's error when it inserted nothing). With ``idempotency`` the insert and
        the key (answering ``outcome``) are one transaction.
        """
        kind, checks = guard_form(guard)

        def work(conn: C) -> None:
            if not kind:
                conn.execute(self.SQL[name], params)
            elif conn.execute(self.SQL[f"{name}@{kind}"], (*params, *checks)).rowcount == 0:
                raise self._guard_error(conn, guard)
            self._record_key(conn, idempotency, outcome)

        try:
            if idempotency is None:
                with self._connection() as conn:
                    work(conn)
            else:
                self._write(work)
        except StoreError as exc:
            if self._is_unique_violation(exc.__cause__):
                raise ConflictError(f"{what} already exists") from exc
            raise

    # --- schema --------------------------------------------------------------------------
    def _upgrade(self, conn: C, where: str) -> None:
        """Apply the migrations the database lacks, inside the caller's write transaction.

        SchemaTooNewError (naming ``where``) when the database is newer than this flowmem.
        """
        conn.execute(self.SQL["schema_table"])
        row = conn.execute(self.SQL["schema_version"]).fetchone()
        current = int(row[0]) if row else 0
        if current == 0 and not self.create:  # the caller's transaction rolls back
            raise no_database(where)
        known = len(self.MIGRATIONS)
        if current > known:
            raise SchemaTooNewError(
                f"{where} has schema version {current}, but this flowmem knows only up to "
                f"{known}: upgrade flowmem to open it",
                found=current,
                supported=known,
            )
        for version in range(current + 1, known + 1):
            for statement in self.MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute(self.SQL["schema_insert"], (version, time.time()))

    def schema_version(self) -> int:
        """Return the schema version recorded in the database."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["schema_version"]).fetchone()
            return int(row[0]) if row else 0

    # --- memory records ------------------------------------------------------------------
    def get_record(self, address: Address, now: float) -> tuple[bool, Any]:
        """Return (found, value); an expired record is not found."""
        check_address(address)
        with self._connection() as conn:
            row = conn.execute(self.SQL["record_get"], tuple(address)).fetchone()
        if row is None or (row[1] is not None and row[1] <= now):
            return False, None
        return True, stored_json(row[0])

    def put_record(
        self,
        address: Address,
        value: Any,
        expires_at: float | None,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> None:
        """Store a JSON value (NotSerializableError, nothing written, otherwise).

        With ``guard`` the guard is part of the one statement that writes (it writes
        nothing when the guard fails; then the guard's error). With ``idempotency``
        the write and its key are one transaction.
        """
        check_address(address)
        text = to_json(value)
        kind, checks = guard_form(guard)
        claims = ensure_form(guard) is not None
        params = (*address, text, expires_at, *checks)
        if idempotency is not None:

            def keyed(conn: C) -> None:
                if claims:
                    self._ensure_session(conn, guard)
                if not kind:
                    conn.execute(self.SQL["record_put"], (*address, text, expires_at))
                elif conn.execute(self.SQL[f"record_put@{kind}"], params).rowcount == 0:
                    raise self._guard_error(conn, guard)
                self._record_key(conn, idempotency, None)

            self._write(keyed)
            return
        with self._connection() as conn:
            if not kind:
                conn.execute(self.SQL["record_put"], (*address, text, expires_at))
                return
            # a claim that may create its session first tries the one statement that
            # writes when the session exists already (the usual case: one round trip)
            done = conn.execute(self.SQL[f"record_put@{kind}"], params)
            if done.rowcount == 0 and not claims:
                raise self._guard_error(conn, guard)
        if done.rowcount == 0:  # create the session: two statements, one transaction
            self._put_claimed(params, kind, guard)

    def _put_claimed(self, params: tuple[Any, ...], kind: str, guard: WriteGuard | None) -> None:
        """Store a record whose guard creates its session: the session insert, then the guarded upsert.

        One write transaction; the guard's error (nothing written, no session) when
        the upsert wrote nothing.
        """

        def claimed(conn: C) -> None:
            self._ensure_session(conn, guard)
            if conn.execute(self.SQL[f"record_put@{kind}"], params).rowcount == 0:
                raise self._guard_error(conn, guard)

        self._write(claimed)

    def delete_record(self, address: Address, idempotency: Idempotency | None = None) -> bool:
        """Delete a record; True when one existed (with ``idempotency``: one transaction with its key)."""
        check_address(address)
        if idempotency is None:
            return self._changed("record_delete", tuple(address))

        def work(conn: C) -> bool:
            existed = bool(conn.execute(self.SQL["record_delete"], tuple(address)).rowcount > 0)
            self._record_key(conn, idempotency, existed)
            return existed

        return self._write(work)

    def purge_expired(self, now: float, limit: int = PURGE_BATCH) -> int:
        """Delete at most ``limit`` records and ``limit`` keys expired at ``now``; return how many.

        Each kind in its own short transaction.
        """
        check_page(limit)
        with self._connection() as conn:
            records = int(conn.execute(self.SQL["records_purge"], (now, now, limit)).rowcount)
            keys = int(conn.execute(self.SQL["idem_purge"], (now, now, limit)).rowcount)
        return records + keys

    # --- conversation buffers (the append itself is per backend: MEM-12) ------------------
    def pop_last(self, address: Address, guard_session: str | None = None) -> Message | None:
        """Remove and return the buffer's last row (None when empty), serialized like an append.

        ConflictError, nothing removed, while ``guard_session`` runs a turn.
        """
        check_address(address)

        def work(conn: C) -> Message | None:
            if guard_session is not None:
                found = conn.execute(self.SQL["session_status_guard"], (guard_session,)).fetchone()
                check_not_running(guard_session, None if found is None else str(found[0]))
            editor = SqlBufferEditor(self._runner(conn), address)
            last = editor.newest()
            if last is None:
                return None
            editor.delete(last.position)
            editor.flush()
            return last.row

        return self._write_serialized(address, work)

    def load(self, address: Address, last: int | None = None) -> list[Message]:
        """Return the buffer's rows in order; only the last ``last`` (indexed reads) when given."""
        check_address(address)
        check_last(last)
        if last == 0:
            return []
        with self._connection() as conn:
            if last is None:
                # batch by batch: the fetched texts of one batch at a time, never all of them
                rows: list[Message] = []
                for chunk in self._body_batches(conn, address, LOAD_BATCH):
                    rows += decode_rows([body for (body,) in chunk])
                return rows
            found = self._load_last(conn, address, min(last, LAST_MAX))
        return decode_rows([body for (body,) in found])

    def iter_rows(self, address: Address, batch: int = LOAD_BATCH) -> Iterator[Message]:
        """Yield the buffer's rows in order, reading and parsing ``batch`` rows at a time.

        The rows are one snapshot (one statement). A connection is held until the
        iterator is exhausted or closed: close it (``with contextlib.closing(...)``)
        when stopping early.
        """
        check_address(address)
        check_batch(batch)
        return self._iter_rows(address, batch)

    def _iter_rows(self, address: Address, batch: int) -> Iterator[Message]:
        with self._reading() as conn:
            for chunk in self._stream_batches(conn, address, batch):
                yield from decode_rows([body for (body,) in chunk])

    def load_bodies(
        self, address: Address, last: int | None = None, before: int | None = None
    ) -> list[tuple[int, str]]:
        """Return ``(cursor, JSON text)`` of the buffer's rows in order, unparsed.

        Only rows whose cursor (the row's stored position) is below ``before``, and of
        those only the last ``last``, when given.
        """
        check_address(address)
        check_last(last)
        check_last(before)
        if last == 0:
            return []
        high = LAST_MAX if before is None else before
        with self._connection() as conn:
            if last is None:
                found = conn.execute(self.SQL["bodies_before"], (*address, high)).fetchall()
            else:
                found = self._bodies_last(conn, address, high, min(last, LAST_MAX))
        return [(int(pos), str(body)) for pos, body in found]

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
        """One page of a paged read (``Store.page_bodies``), read in one snapshot.

        The rows come one at a time from the statement: a page past ``chars``
        characters stops reading, so no more than the page (and one row) is fetched.
        """
        check_address(address)
        for value in (after, before, last):
            check_last(value)
        check_batch(rows)
        check_batch(chars)
        high = LAST_MAX if before is None else min(before, LAST_MAX)
        with self._snapshot() as conn:
            # (buffer id, a number no other buffer had, header version, count)
            head = conn.execute(self.SQL["page_head"], tuple(address)).fetchone()
            found = None if head is None else (int(head[1]), int(head[2]))
            if version is not None and found != version:
                raise BufferChangedError(
                    f"buffer {address.scope}/{address.scope_id}/{address.key} was written "
                    "since the first page of this read: read it again"
                )
            if head is None or found is None:
                return BodyPage(None, 0)
            low, older = -1 if after is None else after, False
            if last is not None:
                if last == 0:
                    return BodyPage(found, int(head[3]))
                floor = conn.execute(
                    self.SQL["page_floor"], (int(head[0]), high, min(last, LAST_MAX))
                ).fetchone()
                if floor is not None:
                    low, older = max(low, int(floor[0])), True
            cursor = conn.execute(self.SQL["page_rows"], (int(head[0]), low, high, rows + 1))
            bodies: list[tuple[int, str]] = []
            size, more = 0, False
            for pos, body in cursor:
                if len(bodies) >= rows or size >= chars:
                    more = True
                    break
                bodies.append((int(pos), str(body)))
                size += len(body)
            return BodyPage(found, int(head[3]), bodies, older, more)

    def read_tail(self, address: Address, batch: int = TAIL_BATCH, budget: int = 0) -> Tail:
        """Read the buffer from its end (``BufferStore.read_tail``): a statement per batch."""
        check_address(address)
        check_batch(batch)

        def run(name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            with self._connection() as conn:
                found: list[tuple[Any, ...]] = conn.execute(self.SQL[name], params).fetchall()
                return found

        check_last(budget)
        return tail.read_tail(run, address, batch, budget)

    def _snapshot(self) -> AbstractContextManager[C]:
        """Lend a connection whose reads are one snapshot (default: ``_reading``)."""
        return self._reading()

    def count(self, address: Address) -> int:
        """Return the number of rows (from the buffer header)."""
        check_address(address)
        with self._connection() as conn:
            row = conn.execute(self.SQL["count"], tuple(address)).fetchone()
        return int(row[0]) if row else 0

    def clear(
        self,
        address: Address,
        guard_session: str | None = None,
        idempotency: Idempotency | None = None,
    ) -> int:
        """Delete every row of the buffer, serialized like an append; return how many were removed.

        With ``guard_session``: ConflictError, nothing deleted, when that session is
        running a turn. The status is read inside the clearing transaction (SQLite:
        the write lock; PostgreSQL: the session row share-locked before the buffer's
        advisory lock, the order session deletion and erasure take them), so a turn's
        compare-and-set to ``running`` happens wholly before or wholly after it.
        """
        check_address(address)

        def work(conn: C) -> int:
            if guard_session is not None:
                found = conn.execute(self.SQL["session_status_guard"], (guard_session,)).fetchone()
                check_not_running(guard_session, None if found is None else str(found[0]))
            self._hold_buffer(conn, address)
            head = conn.execute(self.SQL["header_get"], tuple(address)).fetchone()
            removed = 0 if head is None else int(head[1])
            self._record_key(conn, idempotency, removed)
            if head is not None:
                self._drop_buffer(conn, int(head[0]))
            return removed

        return self._write_serialized(address, work, hold=False)  # work holds it, after the guard

    # --- sessions ---------------------------------------------------------------------------
    def create_session(
        self,
        session: SessionRecord,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> SessionRecord:
        """Insert a new session (ConflictError when the id exists; ``guard`` checked by the insert)."""
        check_texts(id=session.id, name=session.name, owner=session.owner, agent=session.agent)
        metadata = dump_json(dict(session.metadata), "session metadata")
        params = (
            session.id,
            session.name,
            session.owner,
            session.status,
            session.agent,
            metadata,
            session.created_at,
            session.updated_at,
        )
        what = f"session {session.id}"
        self._insert_new("session_insert", params, what, guard, idempotency, session)
        return session

    def get_session(self, session_id: str) -> SessionRecord | None:
        """Return the session or None."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["session_get"], (session_id,)).fetchone()
        return None if row is None else session_from_row(row)

    def list_sessions(
        self, owner: str | None, include_all: bool, limit: int, offset: int
    ) -> tuple[list[SessionRecord], int]:
        """Return a page of sessions (newest first) and the total under the same filter."""
        check_page(limit, offset)
        if not include_all and owner is None:
            return [], 0
        with self._reading() as conn:
            if include_all:
                rows = conn.execute(self.SQL["sessions_all"], (limit, offset)).fetchall()
                total = conn.execute(self.SQL["sessions_all_count"]).fetchone()
            else:
                rows = conn.execute(self.SQL["sessions_owned"], (owner, limit, offset)).fetchall()
                total = conn.execute(self.SQL["sessions_owned_count"], (owner,)).fetchone()
        return [session_from_row(r) for r in rows], int(total[0]) if total else 0

    def delete_session(self, session_id: str) -> bool:
        """Delete a session, its transcript and its whole session scope in one transaction.

        True when it existed; an unknown id changes nothing.
        """

        def work(conn: C) -> bool:
            return self._delete_session(conn, session_id) is not None

        return self._write(work)

    def erase_user(self, user_id: str) -> Erasure:
        """Delete the user's sessions, ``user`` scope and tokens in one transaction.

        The tokens go first: a guarded write of one of them in flight (it holds
        the token row) commits before, so its rows are found and deleted below, and
        one not yet at its guard finds the token gone (docs/decisions/0014).
        """

        def work(conn: C) -> Erasure:
            tokens = conn.execute(self.SQL["tokens_of_user_delete"], (user_id,)).rowcount
            owned = conn.execute(self.SQL["sessions_of_owner"], (user_id,)).fetchall()
            check_none_running(owned)
            buffers = records = 0
            for session_id, _ in owned:
                dropped = self._delete_session(conn, session_id) or (0, 0)
                buffers, records = buffers + dropped[0], records + dropped[1]
            dropped = self._drop_scope(conn, USER_SCOPE, user_id)
            conn.execute(self.SQL["idem_of_owner_delete"], (f"user:{user_id}",))
            conn.execute(self.SQL["adk_user_states_drop"], (user_id,))  # ADK's user state
            conn.execute(self.SQL["usage_delete"], (user_id,))  # nothing of theirs is left
            return Erasure(len(owned), buffers + dropped[0], records + dropped[1], tokens)

        return self._write(work)

    def _delete_session(self, conn: C, session_id: str) -> tuple[int, int] | None:
        """Delete a session, its transcript and its scope; (buffers, records) dropped, None if absent.

        ConflictError (the caller's transaction rolls back) when the session is running.
        Deleting the row first waits for guarded writes holding it, so what they
        wrote is deleted below (docs/decisions/0014).
        """
        deleted = conn.execute(self.SQL["session_delete"], (session_id,)).fetchone()
        if deleted is None:
            return None
        check_not_running(session_id, deleted[0])
        # remembered: a write in flight, or a later one, must not create it again
        conn.execute(self.SQL["session_remember_deleted"], (session_id, time.time()))
        conn.execute(self.SQL["transcript_delete_all"], (session_id,))
        conn.execute(self.SQL["transcript_seq_delete"], (session_id,))
        for name in ("cp_drop_thread", "blob_drop_thread", "writes_drop_thread"):
            conn.execute(self.SQL[name], (session_id,))  # a LangGraph thread is the session
        for name in ("pa_drop", "pa_entries_drop"):
            conn.execute(self.SQL[name], (session_id,))  # so is a pydantic-ai conversation
        conn.execute(self.SQL["adk_session_drop"], (session_id,))  # an ADK session is the session
        return self._drop_scope(conn, SESSION_SCOPE, session_id)

    def _drop_scope(self, conn: C, scope: str, scope_id: str) -> tuple[int, int]:
        """Delete every buffer and record of one scope id; return (buffers, records) deleted."""
        found = conn.execute(self.SQL["scope_buffers"], (scope, scope_id)).fetchall()
        for buffer_id, key in found:
            self._hold_buffer(conn, Address(scope, scope_id, key))
            self._drop_buffer(conn, int(buffer_id))
        records = conn.execute(self.SQL["scope_records_delete"], (scope, scope_id)).rowcount
        return len(found), int(records)

    # --- transcripts -------------------------------------------------------------------------
    def add_transcript(
        self, session_id: str, row: Message, guard: WriteGuard | None = None
    ) -> TranscriptMessage:
        """Append a row with the next sequence number (never reused) while the session exists.

        NotFoundError (AuthenticationError for ``guard``'s token) and nothing written
        otherwise: the check is part of the statement that takes the number.
        """
        body = dump_json(row, "transcript row")
        self._check_session_id(session_id)
        kind, checks = guard_form(
            WriteGuard(None if guard is None else guard.token_id, session_id)
        )

        def work(conn: C) -> int:
            found = conn.execute(
                self.SQL[f"transcript_seq_next@{kind}"], (session_id, *checks)
            ).fetchone()
            if found is None:
                raise self._guard_error(conn, guard)
            seq = int(found[0])
            conn.execute(self.SQL["transcript_insert"], (session_id, seq, body))
            return seq

        seq = self._write(work)
        return TranscriptMessage(session_id, seq, stored_json(body))

    def list_transcript(
        self,
        session_id: str,
        since: int | None = None,
        before: int | None = None,
        limit: int = 20,
        newest_first: bool = False,
    ) -> tuple[list[TranscriptMessage], bool]:
        """Return a page of transcript rows by sequence cursor and whether more exist."""
        check_page(limit)
        low = -1 if since is None else since
        high = SEQ_MAX if before is None else before
        name = "transcript_page_desc" if newest_first else "transcript_page_asc"
        with self._connection() as conn:
            rows = conn.execute(self.SQL[name], (session_id, low, high, limit + 1)).fetchall()
        items = [TranscriptMessage(session_id, int(s), stored_json(b)) for s, b in rows[:limit]]
        return items, len(rows) > limit

    def edit_transcript(self, session_id: str, seq: int, row: Message) -> bool:
        """Replace one transcript row (administrative tier); True if it existed."""
        body = dump_json(row, "transcript row")
        return self._changed("transcript_update", (body, session_id, seq))

    def delete_transcript(self, session_id: str, seq: int) -> bool:
        """Delete one transcript row (administrative tier); True if it existed."""
        return self._changed("transcript_delete", (session_id, seq))

    # --- idempotency keys ---------------------------------------------------------------------
    def get_idempotency(self, owner: str, key: str, now: float) -> StoredAnswer | None:
        """Return the owner's live key; None when absent or expired (an expired one is deleted)."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["idem_get"], (owner, key)).fetchone()
            if row is None:
                return None
            if row[3] is not None and row[3] <= now:
                conn.execute(self.SQL["idem_drop_expired"], (owner, key, now))
                return None
        return StoredAnswer(str(row[0]), int(row[1]), str(row[2]), row[3])

    def claim_idempotency(self, idempotency: Idempotency, now: float) -> StoredAnswer | None:
        """Record the key as claimed (status 0, one transaction); None when free, else the live key."""
        params = (idempotency.owner, idempotency.key, idempotency.fingerprint)

        def work(conn: C) -> StoredAnswer | None:
            claimed = conn.execute(
                self.SQL["idem_claim"], (*params, idempotency.expires_at, now)
            ).rowcount
            if claimed:
                return None
            row = conn.execute(self.SQL["idem_get"], params[:2]).fetchone()
            if row is None:  # pragma: no cover - the conflicting key is locked until commit
                raise IdempotencyKeyInFlightError("this idempotency key is being recorded")
            return StoredAnswer(str(row[0]), int(row[1]), str(row[2]), row[3])

        return self._write(work)

    def answer_idempotency(self, owner: str, key: str, status: int, body: str) -> None:
        """Record the answer of a claimed key (no change when it is no longer claimed)."""
        self._changed("idem_answer", (status, body, owner, key))

    def release_idempotency(self, owner: str, key: str) -> None:
        """Delete a claimed key whose request failed (an answered key is kept)."""
        self._changed("idem_release", (owner, key))

    # --- tokens ------------------------------------------------------------------------------
    def create_token(self, token: TokenRecord) -> None:
        """Store a token record (its hash only); ConflictError on a duplicate id or hash."""
        check_texts(id=token.id, user_id=token.user_id, label=token.label)
        params = (
            token.id,
            token.token_hash,
            token.user_id,
            json.dumps(sorted(token.permissions)),
            token.created_at,
            token.revoked,  # a bool binds as BOOLEAN (PostgreSQL) and as 0/1 (SQLite)
            token.label,
        )
        self._insert_new("token_insert", params, f"token {token.id}")

    def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        """Return the token with this hash, revoked or not."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["token_by_hash"], (token_hash,)).fetchone()
        return None if row is None else token_from_row(row)

    def list_tokens(self) -> list[TokenRecord]:
        """Return every token record, oldest first."""
        with self._connection() as conn:
            rows = conn.execute(self.SQL["tokens_all"]).fetchall()
        return [token_from_row(r) for r in rows]

    def revoke_token(self, token_id: str) -> bool:
        """Mark a token revoked; True when it existed."""
        return self._changed("token_revoke", (token_id,))


__all__ = ["LAST_MAX", "SEQ_MAX", "DbConnection", "SqlStore", "StatementRunner"]
