"""``SqlStore``: the ``Store`` methods both SQL backends share, written once.

``SqliteStore`` and ``PostgresStore`` differ in how they lend a connection, open
a write transaction, serialize on a buffer address and recognise a duplicate key;
everything around that (input checks, JSON text, row → record conversion,
records, the schema's upgrade, ``load``/``count``/``clear``/``pop_last`` and the
append's rules in its transaction) lives here against a few hooks, which
``SqlEngineBase`` (``store/sqlengine.py``) declares beside the public ``SqlEngine``
the kinds of data use. Sessions, transcripts and erasure are ``SqlSessions``
(``sqlsessions.py``); idempotency keys and tokens are ``sqltables.py``'s bases. This module holds no
SQL text (DESIGN.md §6): every statement is named and looked up in the backend's
``SQL`` dict.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar, NamedTuple, Protocol, TypeVar

from flowmem.core import AppendOutcome, Message, Repair, apply_append
from flowmem.errors import (
    DatabaseNotFoundError,
    SchemaTooNewError,
)
from flowmem.store import tail
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    PAGE_CHARS,
    PAGE_ROWS,
    PURGE_BATCH,
    TAIL_BATCH,
    Address,
    BodyPage,
    Idempotency,
    Quotas,
    Tail,
    Usage,
    WriteGuard,
)
from flowmem.store.editor import SqlBufferEditor, SqlRunner, load_rows
from flowmem.store.engine import LAST_MAX, C, DbConnection
from flowmem.store.paging import PageAsk, check_version
from flowmem.store.rows import (
    check_address,
    check_batch,
    check_buffer_bytes,
    check_last,
    check_lock_timeout,
    check_not_running,
    check_page,
    check_rows,
    decode_rows,
    ensure_form,
    guard_form,
    stored_json,
    to_json,
)
from flowmem.store.sqlengine import StatementRunner
from flowmem.store.sqlsessions import SEQ_MAX, SqlSessions
from flowmem.store.sqltables import SqlIdempotencyKeys, SqlTokens

T = TypeVar("T")

LOAD_BATCH = 1000  # rows a whole-buffer ``load`` fetches and parses at a time


class AppendAsk(NamedTuple):
    """An append as ``SqlStore.append`` checked it: what the back-end's ``_append`` runs.

    A tuple, not a frozen dataclass: made on every append, where that costs a third as much.
    """

    address: Address
    rows: list[Message]
    max_messages: int
    lock_timeout: float  # how long the append waits to be serialized (MEM-12)
    snapshot: bool
    guard: WriteGuard | None
    max_bytes: int
    idempotency: Idempotency | None


class RepairLog(Protocol):
    """What an append tells the repair log (``flowmem.store.repairs.sql.SqlRepairs``)."""

    def record(
        self, db: SqlRunner, buffer_id: int, repairs: Sequence[Repair], header: bool = False
    ) -> tuple[object, ...]:
        """Log a write's repairs inside its transaction (nothing when there are none).

        With ``header``: what the caller's header update must add (``SqlBufferEditor.flush``):
        the entries' bytes (decision 0135) and the entries themselves (decision 0148).
        """
        ...


def no_database(where: str) -> DatabaseNotFoundError:
    """The refusal to open ``where``, which holds no flowmem database, without creating one."""
    return DatabaseNotFoundError(
        f"no flowmem database at {where}: check --database or $FLOWMEM_DATABASE_URL "
        "(`flowmem serve` creates a new one; nothing was created)"
    )


class SqlStore(SqlSessions[C], SqlIdempotencyKeys[C], SqlTokens[C]):
    """The ``Store`` methods common to the SQL backends, over driver-specific hooks.

    A backend sets ``SQL`` (its statements, by name) and ``MIGRATIONS``, and implements
    the hooks ``SqlEngineBase`` declares: ``_connection``, ``_write``,
    ``_write_serialized``, ``_is_unique_violation`` and ``_append``; it may override
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

    def set_quotas(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` on every later write through this store (its connections are told)."""
        self._quotas = quotas

    def usage(self, user_id: str) -> Usage:
        """Return what the triggers counted for ``user_id``."""
        with self._connection() as conn:
            row = conn.execute(self.SQL["usage_get"], (user_id,)).fetchone()
        return Usage() if row is None else Usage(int(row[0]), int(row[1]), int(row[2]))

    # --- conversation buffers -----------------------------------------------------------
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
        """Run the core append rules on the stored buffer in one transaction (``Store.append``).

        The arguments are checked here; the back-end's ``_append`` serializes the
        append per address and runs it (MEM-12).
        """
        check_address(address)
        rows = self._rows_ahead(rows)
        check_rows(rows)
        bound = check_lock_timeout(lock_timeout)
        return self._append(AppendAsk(address, rows, max_messages, bound, snapshot, guard, max_bytes, idempotency))

    def _rows_ahead(self, rows: Any) -> Any:
        """The rows as the back-end takes them, before the checks and the lock (here: as given)."""
        return rows

    @abstractmethod
    def _append(self, ask: AppendAsk) -> AppendOutcome:
        """Run a checked append in one transaction, serialized per address (MEM-12)."""

    def _append_in(self, conn: C, ask: AppendAsk) -> AppendOutcome:
        """An append inside the caller's open transaction: its guard, the rules, its key (no commit)."""
        self._check_guard(conn, ask.guard)
        outcome = self._apply_append(conn, ask.address, ask.rows, ask.max_messages, ask.snapshot, ask.max_bytes)
        self._record_key(conn, ask.idempotency, outcome)
        return outcome

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
        logged: tuple[object, ...] = ()  # the repair log, in this transaction (issue 37 §2): into the header (0148)
        if outcome.logged:
            logged = self.repairs.record(self._runner(conn), editor.buffer_id, outcome.logged, header=True)
        editor.flush(logged)
        if snapshot:
            found = conn.execute(self.SQL["load_all"], tuple(address)).fetchall()
            outcome = replace(outcome, rows=load_rows(found))
        return outcome

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
        """One page of a paged read (``Store.page_bodies``): the arguments checked (``PageAsk``), then ``_page``."""
        check_address(address)
        return self._page(address, PageAsk(after, before, last, version, rows, chars))

    def _page(self, address: Address, ask: PageAsk) -> BodyPage:
        """One page of a paged read (``Store.page_bodies``), read in one snapshot.

        The rows come one at a time from the statement: a page past ``chars``
        characters stops reading, so no more than the page (and one row) is fetched.
        """
        after, before, last, rows, chars = ask.after, ask.before, ask.last, ask.rows, ask.chars
        high = LAST_MAX if before is None else min(before, LAST_MAX)
        with self._snapshot() as conn:
            # (buffer id, a number no other buffer had, header version, count)
            head = conn.execute(self.SQL["page_head"], tuple(address)).fetchone()
            found = None if head is None else (int(head[1]), int(head[2]))
            check_version(address, found, ask.version)
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


__all__ = ["LAST_MAX", "SEQ_MAX", "DbConnection", "SqlStore", "StatementRunner"]
