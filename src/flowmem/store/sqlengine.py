"""``SqlEngineBase``: the SQL back-ends' ``SqlEngine``, over the hooks each one implements.

``SqliteStore`` and ``PostgresStore`` differ in how they lend a connection, open a
write transaction, serialize on a buffer address and recognise a duplicate key: the
hooks below (``_connection``, ``_write``, ``_write_serialized``,
``_is_unique_violation``; ``_hold_buffer``, ``_reading``, ``_load_last``,
``_stream_batches``, ``_check_session_id`` have defaults). The public methods are the
``flowmem.store.engine.SqlEngine`` every kind of data uses; the hooks stay the
back-end's own. This module holds no SQL text: every statement is named and looked up
in the backend's ``SQL`` dict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Generic, TypeVar

from flowmem.errors import ConflictError, IdempotencyKeyInFlightError, StoreError
from flowmem.store.base import Address, Idempotency, SessionRecord, WriteGuard
from flowmem.store.engine import C, DbConnection
from flowmem.store.rows import ensure_form, guard_failed, guard_form

T = TypeVar("T")


class StatementRunner:
    """``SqlRunner`` over one connection and a backend's ``SQL`` dict."""

    def __init__(self, conn: DbConnection, sql: dict[str, str]) -> None:
        self.conn = conn
        self.sql = sql

    def one(self, name: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """Run a named statement; return its first row."""
        row: tuple[Any, ...] | None = self.conn.execute(self.sql[name], params).fetchone()
        return row

    def all(self, name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a named statement; return every row."""
        rows: list[tuple[Any, ...]] = self.conn.execute(self.sql[name], params).fetchall()
        return rows

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Run a named statement for its effect."""
        self.conn.execute(self.sql[name], params)


class SqlEngineBase(ABC, Generic[C]):
    """The engine both SQL back-ends share: public ``SqlEngine`` methods over their hooks."""

    SQL: ClassVar[dict[str, str]]  # the backend's statements, by name

    # --- the engine (flowmem.store.engine.SqlEngine) -------------------------------------
    @property
    def statements(self) -> Mapping[str, str]:
        """The dialect's statements by name (every kind of data's merged in)."""
        return self.SQL

    def connection(self) -> AbstractContextManager[C]:
        """Lend a connection in autocommit (each statement its own transaction)."""
        return self._connection()

    def reading(self) -> AbstractContextManager[C]:
        """Lend a connection for several reads that must agree (one snapshot)."""
        return self._reading()

    def write(self, work: Callable[[C], T]) -> T:
        """Run ``work`` in one write transaction and commit it."""
        return self._write(work)

    def write_at(self, address: Address, work: Callable[[C], T], hold: bool = True) -> T:
        """Run ``work`` in one write transaction serialized with appends to ``address``."""
        return self._write_serialized(address, work, hold)

    def check_guard(self, tx: C, guard: WriteGuard | None) -> SessionRecord | None:
        """Raise the guard's error unless it holds; a claimed session is created in ``tx`` (None)."""
        self._check_guard(tx, guard)
        return None

    def runner(self, conn: C) -> StatementRunner:
        """The ``SqlRunner`` a buffer editor uses on ``conn``."""
        return self._runner(conn)

    def hold_buffer(self, conn: C, address: Address) -> None:
        """Serialize the rest of the caller's write with appends to ``address``."""
        self._hold_buffer(conn, address)

    def drop_buffer(self, conn: C, buffer_id: int) -> None:
        """Delete a buffer and all it holds, inside the caller's write."""
        self._drop_buffer(conn, buffer_id)

    def drop_session(self, conn: C, session_id: str) -> tuple[int, int] | None:
        """Delete a session and its scope inside the caller's write: (buffers, records), or None."""
        return self._delete_session(conn, session_id)

    # --- hooks ----------------------------------------------------------------------------
    @abstractmethod
    def _connection(self) -> AbstractContextManager[C]:
        """Lend a connection (autocommit); translate driver errors to ``StoreError``."""

    @abstractmethod
    def _write(self, work: Callable[[C], T]) -> T:
        """Run ``work`` in one write transaction and commit it."""

    @abstractmethod
    def _write_serialized(self, address: Address, work: Callable[[C], T], hold: bool = True) -> T:
        """Run ``work`` in one write transaction serialized with appends to ``address``.

        ``hold=False``: ``work`` takes the buffer's lock itself (``_hold_buffer``),
        after locks that must come first.
        """

    @staticmethod
    @abstractmethod
    def _is_unique_violation(exc: BaseException | None) -> bool:
        """Return True when a driver error is a duplicate primary or unique key."""

    def _hold_buffer(self, conn: C, address: Address) -> None:
        """Serialize the rest of the caller's write transaction with appends to ``address``.

        The default does nothing: a backend whose write transaction excludes every
        other writer (SQLite) needs no more.
        """

    def _reading(self) -> AbstractContextManager[C]:
        """Lend a connection for several reads that must agree (default: autocommit)."""
        return self._connection()

    def _load_last(self, conn: C, address: Address, last: int) -> list[tuple[str]]:
        """Return the bodies of the buffer's last ``last`` rows, in order."""
        found: list[tuple[str]] = conn.execute(self.SQL["load_last"], (*address, last)).fetchall()
        return found

    def _bodies_last(
        self, conn: C, address: Address, before: int, last: int
    ) -> list[tuple[int, str]]:
        """Return (pos, body) of the last ``last`` rows below ``before``, in order."""
        params = (*address, before, last)
        found: list[tuple[int, str]] = conn.execute(
            self.SQL["bodies_last_before"], params
        ).fetchall()
        return found

    def _body_batches(self, conn: C, address: Address, batch: int) -> Iterator[list[tuple[str]]]:
        """Yield the buffer's bodies in order, ``batch`` rows at a time, from one statement.

        One statement reads one snapshot (SQLite: its read transaction lasts while the
        statement runs), so the batches together are the buffer at one moment.
        """
        cursor = conn.execute(self.SQL["load_all"], tuple(address))
        while chunk := cursor.fetchmany(batch):
            yield chunk

    def _stream_batches(
        self, conn: C, address: Address, batch: int
    ) -> Iterator[list[tuple[str]]]:
        """Yield the bodies ``iter_rows`` parses, ``batch`` at a time (default: ``_body_batches``)."""
        return self._body_batches(conn, address, batch)

    def _check_session_id(self, session_id: str) -> None:
        """Refuse a session id the database cannot store (default: every string fits)."""

    @abstractmethod
    def _delete_session(self, conn: C, session_id: str) -> tuple[int, int] | None:
        """Delete a session, its transcript and its scope inside ``conn``'s transaction."""

    # --- shared helpers -------------------------------------------------------------------
    def _runner(self, conn: C) -> StatementRunner:
        """Return the ``SqlRunner`` the buffer editor uses on ``conn``."""
        return StatementRunner(conn, self.SQL)
    def _check_guard(self, conn: C, guard: WriteGuard | None) -> None:
        """Raise the guard's error unless it holds (inside the caller's write transaction).

        A claim that creates its session inserts it first (``_ensure_session``).
        """
        self._ensure_session(conn, guard)
        kind, params = guard_form(guard)
        if kind and conn.execute(self.SQL[f"guard@{kind}"], params).fetchone() is None:
            raise self._guard_error(conn, guard)

    def _ensure_session(self, conn: C, guard: WriteGuard | None) -> None:
        """Create the guard's claimed session unless it exists (inside the write's transaction).

        Rolled back with the write when the guard then fails (docs/decisions/0032).
        """
        ensure = ensure_form(guard)
        if ensure is not None:
            conn.execute(self.SQL[ensure[0]], ensure[1])

    def _guard_error(self, conn: C, guard: WriteGuard | None) -> Exception:
        """The error of a guard found failing on ``conn``: the token's (401), else the session's."""
        token = None if guard is None else guard.token_id
        valid = token is None or conn.execute(self.SQL["token_valid"], (token,)).fetchone()
        if not valid or guard is None or guard.claim is None or guard.session_id is None:
            return guard_failed(bool(valid))
        found = conn.execute(self.SQL["session_owner"], (guard.session_id,)).fetchone()
        owner = None if found is None else (found[0],)
        if owner is None and conn.execute(self.SQL["session_deleted"], (guard.session_id,)).fetchone():
            return guard_failed(True, guard, None, deleted=True)
        owned = 0
        if found is None and guard.claim.owner is not None:
            counted = conn.execute(
                self.SQL["sessions_owned_count"], (guard.claim.owner,)
            ).fetchone()
            owned = int(counted[0]) if counted else 0
        return guard_failed(True, guard, owner, owned)
    def _drop_buffer(self, conn: C, buffer_id: int) -> None:
        """Delete a buffer's rows, call, answer and evicted index, archive, repair log and header (in the caller's transaction)."""
        names = ("clear_rows", "clear_calls", "clear_answers", "clear_evicted", "archive_drop", "repairs_drop")
        for name in (*names, "clear_header"):
            conn.execute(self.SQL[name], (buffer_id,))

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



__all__ = ["C", "DbConnection", "SqlEngineBase", "StatementRunner"]
