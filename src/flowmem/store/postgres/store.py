"""``PostgresStore``: the ``Store`` protocol on PostgreSQL, through a ``psycopg_pool`` pool."""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg_pool import PoolTimeout

from flowmem import metrics
from flowmem.core import AppendOutcome, apply_append
from flowmem.errors import (
    IdempotencyKeyInFlightError,
    InvalidInputError,
    QuotaExceededError,
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from flowmem.limits import Quotas, quota_exceeded
from flowmem.store.adk.sql import SqlAdkSessions
from flowmem.store.archive.sql import SqlArchive
from flowmem.store.base import (
    Address,
    Idempotency,
    Store,
    WriteGuard,
)
from flowmem.store.conversations.sql import SqlConversations
from flowmem.store.editor import load_rows
from flowmem.store.known import (
    KnownBuffers,
    Unforeseen,
    foresee,
)
from flowmem.store.postgres.after import known_after, room_passed
from flowmem.store.postgres.checkpoints import PostgresCheckpoints
from flowmem.store.postgres.connect import (
    HotPool,
    connect_once,
    connect_options,
    durability_warnings,
    parse_url,
    probe_server,
    safe_url,
)
from flowmem.store.postgres.facts import asked_of, known_of, known_statements, seeded_editor
from flowmem.store.postgres.pipeline import QUOTAS, GuardFailed, Pipeline, roll_back
from flowmem.store.postgres.queries import SQL
from flowmem.store.postgres.reads import PostgresReads
from flowmem.store.postgres.schema import MIGRATION_LOCK, MIGRATIONS
from flowmem.store.repairs.sql import SqlRepairs
from flowmem.store.rows import (
    check_buffer_bytes,
    dumped_ahead,
    ensure_form,
    guard_form,
)
from flowmem.store.sqlbase import AppendAsk

log = logging.getLogger("flowmem")

T = TypeVar("T")

UNSERIALIZED_ATTEMPTS = 20  # retries of an unserialized append that collided with another

# What a store reads at open besides the server's settings, in the same statement on its
# first connection (decision 0202): its quotas given to that connection (``quotas_set``'s
# three columns, its three parameters), whether its transactions are read-only, and the
# schema version last (``schema_version``), so an open on a migrated database is one round
# trip. It fails on a database without ``flowmem_schema``; the store then takes the locked
# path (``PostgresStore._migrate``), as it does on a read-only server (which refuses it)
OPENING = (
    f"{SQL['quotas_set'].removeprefix('SELECT ')}, current_setting('transaction_read_only'),"
    f" ({SQL['schema_version']})"
)

_RETRYABLE = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


@functools.lru_cache(maxsize=4096)  # a hash per append otherwise (decision 0059)
def advisory_key(address: Address) -> int:
    """Return the signed 64-bit advisory lock key of an address (MEM-12)."""
    digest = hashlib.blake2b("\x1f".join(address).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresStore(PostgresReads):
    """The ``Store`` protocol on a PostgreSQL database."""

    SQL = SQL
    MIGRATIONS = MIGRATIONS

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Connect to ``url``; ``create=False``: a database without flowmem's schema is refused.

        (``DatabaseNotFoundError``, nothing created: the read-only CLI commands.)
        """
        self.url = url
        self.create = create
        conninfo, options = parse_url(url)
        connect = connect_options(conninfo, options["connect_timeout_s"])
        # one connection (decision 0202): the probe's, which becomes the pool's first; one
        # clean error, at once, when the server cannot be reached
        first = connect_once(conninfo, connect, url)
        try:
            version = self._probe(first)
            # a loan per statement or transaction, one at hand (decision 0167)
            self._pool = HotPool(
                conninfo,
                first=first,
                min_size=int(options["pool_min"]),
                max_size=int(options["pool_max"]),
                kwargs={"autocommit": True, **connect},
                open=False,
                timeout=options["connect_timeout_s"],
                name="flowmem",
            )
        except BaseException:
            first.close()
            raise
        try:
            self._pool.open(wait=True, timeout=options["connect_timeout_s"])
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailableError(f"cannot connect to PostgreSQL at {safe_url(url)}") from exc
        self._known = KnownBuffers(int(options["known_buffers"]))
        self.conversations = SqlConversations(self)  # pydantic-ai's (docs/decisions/0051)
        self.archive = SqlArchive(self)  # what compactions archived (docs/decisions/0083)
        self.repairs = SqlRepairs(self)  # what the append rules repaired (issue 37 §2)
        # LangGraph's tables (docs/decisions/0040), written in a pipeline (0126)
        self.checkpoints = PostgresCheckpoints(self, self.repairs, advisory_key, self._guard_error)
        self.adk = SqlAdkSessions(self)  # Google ADK's sessions and states (decision 0053)
        try:
            self._migrate(version)
        except BaseException:
            self._pool.close()
            raise

    def _probe(self, conn: psycopg.Connection[Any]) -> int | None:
        """On the first connection, in one statement: the durability settings (warned of), this
        store's quotas given, and the schema version; None when it could not be read (no schema
        yet) or the server takes only reads (its refusal is the locked path's, ``_migrate``).

        The quotas go with the version (``OPENING``), so the connection's first loan sends none.
        """
        quotas = self._quotas
        sizes = (str(quotas.bytes), str(quotas.buffers), str(quotas.records))
        read = probe_server(conn, self.url, OPENING, sizes)
        if read is None:
            return None
        conn.__dict__[QUOTAS] = quotas
        return int(read[-1]) if read[-2] == "off" else None

    # --- connections -------------------------------------------------------------------
    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a pooled connection; translate driver errors to ``StoreError``.

        ``disk_full`` (53100) → ``StoreFullError``, ``read_only_sql_transaction``
        (25006) → ``StoreReadOnlyError``, ``data_corrupted``/``index_corrupted``
        (XX001/XX002) → ``StoreCorruptError``.
        """
        try:
            with self._pool.connection() as conn:
                given = conn.__dict__.get(QUOTAS)  # the same object mostly: no dataclass __eq__
                if given is not self._quotas and given != self._quotas:
                    self._send_quotas(conn)
                yield conn
        except psycopg.errors.RaiseException as exc:
            refused = _quota_refused(exc)
            if refused is None:
                raise StoreError(f"PostgreSQL error: {exc}") from exc
            raise refused from None
        except PoolTimeout as exc:
            raise StoreUnavailableError(f"no PostgreSQL connection available: {exc}") from exc
        except psycopg.errors.DiskFull as exc:
            raise StoreFullError(f"PostgreSQL's disk is full: {exc}") from exc
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise StoreReadOnlyError(f"PostgreSQL takes only reads: {exc}") from exc
        except (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted) as exc:
            raise StoreCorruptError(f"PostgreSQL reports damaged data: {exc}") from exc
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(f"PostgreSQL failed: {exc}") from exc
        except psycopg.DataError as exc:  # a value PostgreSQL cannot hold (NUL, out of range)
            raise InvalidInputError(f"a value cannot be stored: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error: {exc}") from exc

    def set_quotas(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` from now on; what is known of buffers is forgotten.

        A known buffer's room to grow with its header unwritten was read under the quotas
        before (decision 0195: none under a bytes quota).
        """
        super().set_quotas(quotas)
        self._known = KnownBuffers(self._known.size)

    def _send_quotas(self, conn: psycopg.Connection[Any]) -> None:
        """Give the connection this store's quotas (session settings the quota triggers read)."""
        quotas = self._quotas
        sizes = (str(quotas.bytes), str(quotas.buffers), str(quotas.records))
        conn.execute(SQL["quotas_set"], sizes)
        conn.__dict__[QUOTAS] = quotas

    def _write(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` in one transaction."""
        with self._connection() as conn, conn.transaction():
            return work(conn)

    def _write_serialized(
        self, address: Address, work: Callable[[psycopg.Connection[Any]], T], hold: bool = True
    ) -> T:
        """Run ``work`` in one transaction that first takes the address's advisory lock.

        ``hold=False``: ``work`` takes that lock itself.
        """

        def locked(conn: psycopg.Connection[Any]) -> T:
            self._hold_buffer(conn, address)
            return work(conn)

        return self._write(locked if hold else work)

    def _hold_buffer(self, conn: psycopg.Connection[Any], address: Address) -> None:
        """Take the address's advisory lock until the transaction ends (what appends take)."""
        conn.execute(SQL["advisory_lock"], (advisory_key(address),))

    @staticmethod
    def _is_unique_violation(exc: BaseException | None) -> bool:
        """Return True for a duplicate primary or unique key."""
        return isinstance(exc, psycopg.errors.UniqueViolation)

    def _check_session_id(self, session_id: str) -> None:
        """Refuse a session id with a NUL character (PostgreSQL text cannot hold one)."""
        if "\x00" in session_id:
            raise InvalidInputError("session ids must not contain NUL characters")

    # --- schema ------------------------------------------------------------------------
    def _migrate(self, version: int | None = None) -> None:
        """Apply missing migrations in one transaction under an advisory lock; refuse a newer schema.

        ``version``: the schema version read at open, outside that transaction (``_probe``).
        When it is this flowmem's latest (``MIGRATIONS``), nothing is missing and nothing
        newer is there, and no lock or transaction is taken (decision 0202): a version once
        committed is never taken back, and each is committed with its migration's statements.
        Any other (older, newer, none; and on a read-only server, ``_probe``) takes the locked
        path, which decides as before.
        """
        if version == len(self.MIGRATIONS):
            return

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(SQL["advisory_lock"], (MIGRATION_LOCK,))
            self._upgrade(conn, f"the database at {safe_url(self.url)}")

        self._write(work)

    # --- conversation buffers --------------------------------------------------------------
    def _rows_ahead(self, rows: Any) -> Any:
        """Each row serialized once, before the lock (``dumped_ahead``, decision 0163)."""
        return dumped_ahead(rows)

    def _append(self, ask: AppendAsk) -> AppendOutcome:
        """Run the core append rules on the stored buffer in one transaction (``SqlStore.append``).

        With ``snapshot`` the whole buffer is read back inside that transaction.
        With ``guard`` the statement taking the lock checks it first and locks its
        rows (no extra round trip); a failed guard raises its error, nothing appended.
        With ``idempotency`` its key is inserted after the writes, in the same
        pipeline before its commit (one statement, no round trip; one more when the
        answer holds the buffer): a key recorded already fails it, and nothing is
        appended (IdempotencyKeyInFlightError).

        Implements MEM-12: the transaction first takes ``pg_advisory_xact_lock`` on
        the address under ``lock_timeout`` (released at commit or rollback, so also
        when the append raises). Past the bound the append runs without the lock
        after exactly one WARNING, retrying if it collides with another writer.
        Different addresses take different locks and never wait for each other.
        """
        timeout = f"{max(int(ask.lock_timeout * 1000), 1)}ms"
        remember = ask.idempotency is None and self._known.size > 0
        with self._connection() as conn:
            try:
                for attempt in range(2):
                    try:
                        if remember and not ask.snapshot:
                            known = self._known_append(conn, ask, timeout)
                            if known is not None:
                                return known
                        return self._pipelined(conn, ask, timeout, remember)
                    except psycopg.errors.InvalidSqlStatementName:
                        # the server forgot the prepared statements (DISCARD ALL): the
                        # pipeline named them anew for the next attempt (Prepared.forget)
                        if attempt:
                            raise
            except psycopg.errors.UniqueViolation as exc:  # idempotency (0031)
                if exc.diag.table_name == "idempotency_keys":
                    raise IdempotencyKeyInFlightError(
                        "this idempotency key is recorded already"
                    ) from None
                raise
            except psycopg.errors.LockNotAvailable:
                metrics.lock_timed_out("postgres")
                log.warning(
                    "append to %s/%s/%s waited %.1fs for its turn; proceeding unserialized",
                    *ask.address,
                    ask.lock_timeout,
                )
            for attempt in range(UNSERIALIZED_ATTEMPTS):
                try:
                    with conn.transaction():
                        return self._append_in(conn, ask)
                except _RETRYABLE as exc:
                    if attempt == UNSERIALIZED_ATTEMPTS - 1:
                        raise StoreBusyError(
                            f"unserialized append kept colliding with other writers: {exc}"
                        ) from exc
                    time.sleep(0.01 * (attempt + 1))
        raise StoreBusyError("unserialized append did not complete")  # pragma: no cover

    def _put_claimed(self, params: tuple[Any, ...], kind: str, guard: WriteGuard | None) -> None:
        """Store a record whose guard creates its session, in two round trips (a pipeline).

        BEGIN, the session insert and the guarded upsert in one; COMMIT (or ROLLBACK
        when the upsert wrote nothing: the guard's error) in the other.
        """
        ensure = ensure_form(guard)
        with self._connection() as conn:
            try:
                with conn.pipeline() as pipeline:
                    conn.execute(SQL["begin"])
                    if ensure is not None:
                        conn.execute(SQL[ensure[0]], ensure[1])
                    done = conn.execute(SQL[f"record_put@{kind}"], params)
                    pipeline.sync()
                    if done.rowcount == 0:
                        raise self._guard_error(conn, guard)
                    conn.execute(SQL["commit"])
            except BaseException:
                roll_back(conn)
                raise

    def _pipelined(
        self, conn: psycopg.Connection[Any], ask: AppendAsk, timeout: str, remember: bool = False
    ) -> AppendOutcome:
        """The serialized append in two round trips (decisions 0024 and 0028).

        In libpq pipeline mode: the lock (with the guard) and the facts query go in
        one round trip; the rules run; the writes and a Sync go in another. The
        statements between two Syncs are one implicit transaction, committed at
        the Sync, with no ``BEGIN``/``COMMIT`` statements (the advisory lock is held
        until then). On any error the pipeline is ended with ``ROLLBACK`` and drained
        before the error propagates (LockNotAvailable included). With ``remember``
        the writes are followed by ``buffer_known``, for the next append (0039).
        """
        address, guard, idempotency = ask.address, ask.guard, ask.idempotency
        ids, want_open = asked_of(ask.rows)
        try:
            with Pipeline(conn, SQL) as db:
                found = _locked_facts(db, address, guard, timeout, ids, want_open)
                editor = seeded_editor(db, address, found, ids, want_open)
                outcome = apply_append(editor, ask.rows, ask.max_messages)
                check_buffer_bytes(address, editor.bytes_before, editor.bytes, ask.max_bytes)
                # the repair log, in this transaction (issue 37 §2): into the header (0148)
                logged: tuple[object, ...] = ()
                if outcome.logged:
                    logged = self.repairs.record(db, editor.buffer_id, outcome.logged, header=True)
                editor.flush(logged)
                whole = db.send("load_all", tuple(address)) if ask.snapshot else None
                if idempotency is not None:  # the key and its answer, before the commit (0031)
                    outcome, whole = _send_key(db, idempotency, outcome, whole)
                after = db.send("buffer_known", tuple(address)) if remember else None
                db.finish()
                if after is not None:
                    self._known.remember(address, known_of(db.result(after)))
                if whole is not None:
                    outcome = replace(outcome, rows=load_rows(db.result(whole)))
            return outcome
        except BaseException as exc:
            roll_back(conn)
            if isinstance(exc, GuardFailed):
                raise self._guard_error(conn, guard) from None
            raise

    def _known_append(
        self, conn: psycopg.Connection[Any], ask: AppendAsk, timeout: str
    ) -> AppendOutcome | None:
        """The append in one round trip, decided on what this store knows (decision 0039).

        With ``guard`` the lock statement checks it and locks its rows first, after
        the statement creating a claimed session, as on the plain path (decisions
        0014, 0032), and the facts' check fails unless it held (decision 0067); a
        failed guard raises its error, nothing written.

        The rules run first, on the buffer's facts as this store last saw them
        (``flowmem.store.known.foresee``); the lock, the check that those facts
        still hold, the writes (each running only if they do) and the Sync go in
        one send. When the facts held, what the next append may assume is worked
        out from the writes (``known_after``, decision 0066), not read back. None
        when nothing is known, when the rules would ask for more, or when a fact
        no longer held (then nothing was written and nothing is known any more):
        the caller appends as before, reading the facts, which it remembers.

        Since decision 0195 the check compares the header as stored, which an append
        of another writer may have left unwritten: its row holds the position this
        append's first row takes, so the rows' primary key refuses that row (a unique
        violation on ``buffer_rows_pkey``, the transaction rolled back, nothing written)
        — the facts no longer held, not an error (``_taken``).
        """
        address, guard = ask.address, ask.guard
        known = self._known.get(address)
        if known is None:
            return None
        ids, heals = asked_of(ask.rows)
        try:
            foreseen = foresee(
                known, address, ask.rows, ids, heals, ask.max_messages, ask.max_bytes
            )
        except Unforeseen:
            return None
        try:
            kind, checks = guard_form(guard)
            # no id assumed new: the header's check alone (decision 0158); the check
            # folded into the writes' first statement (decision 0165)
            check = "known_check" if foreseen.fresh else "known_check_head"
            check = f"{check}@{kind}" if kind else check
            lock, holds = held_lock(guard)
            ensure = ensure_form(guard)
            bid = known.buffer_id
            head = (known.version, *known.stored())  # the header as stored (decision 0195)
            fresh = (bid, bid, bid, foreseen.fresh) if foreseen.fresh else ()
            statements = known_statements(check, (bid, *head, *fresh, *checks), foreseen.writes)
            with Pipeline(conn, SQL) as db:
                if ensure is not None:  # a claimed session (decision 0032), before the lock
                    db.send(*ensure)
                db.send(lock, (advisory_key(address), timeout, *holds))
                held = db.send(*statements[0])
                for statement in statements[1:]:
                    db.send(*statement)
                # past the room the trigger reserved again: read it back (decision 0199)
                again = room_passed(known, foreseen.writes)
                after = db.send("buffer_known", tuple(address)) if again else None
                db.finish()
                verdict = db.result(held)
                if kind and not verdict[0][1]:  # the guard failed: nothing was written
                    raise self._guard_error(conn, guard)
                if verdict[0][0]:
                    if after is None:
                        self._known.remember(address, known_after(known, foreseen.writes))
                    else:
                        self._known.remember(address, known_of(db.result(after)))
                    return foreseen.outcome
                self._known.remember(address, None)
        except BaseException as exc:
            self._known.remember(address, None)
            roll_back(conn)
            if _taken(exc):
                return None
            raise
        return None

    # --- sessions ---------------------------------------------------------------------------
    def set_session_status(
        self, session_id: str, status: str, expected: frozenset[str] | None = None
    ) -> bool:
        """Set the status (compare-and-set when ``expected`` is given); True if changed."""
        allowed = None if expected is None else sorted(expected)
        with self._connection() as conn:
            cur = conn.execute(SQL["session_status_cas"], (status, session_id, allowed, allowed))
            return cur.rowcount > 0

    def database_bytes(self) -> int:
        """Bytes the database takes on its server (``pg_database_size``)."""
        with self._connection() as conn:
            row = conn.execute(SQL["database_bytes"]).fetchone()
        return int(row[0]) if row else 0

    def check_integrity(self) -> list[str]:
        """What is damaged in this database's flowmem tables (``flowmem doctor``; empty: nothing)."""
        from flowmem.store.postgres.doctor import check_connection

        with self._pool.connection() as conn:
            return check_connection(conn)

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.close()


def _taken(exc: BaseException) -> bool:
    """Whether ``exc`` is the rows' key refusing a position another writer's row holds (decision 0195)."""
    return (
        isinstance(exc, psycopg.errors.UniqueViolation)
        and exc.diag.constraint_name == "buffer_rows_pkey"
    )


def _quota_refused(exc: psycopg.errors.RaiseException) -> QuotaExceededError | None:
    """The QuotaExceededError a quota trigger raised (``flowmem_quota_check``), or None."""
    if exc.diag.message_primary != "flowmem_quota":
        return None
    quota, _, limit = (exc.diag.message_detail or "").partition(" ")
    return quota_exceeded(quota, exc.diag.message_hint or "", int(limit or 0))


def held_lock(guard: WriteGuard | None) -> tuple[str, tuple[Any, ...]]:
    """The append's lock statement and its guard's ids: the token's and the session's keys held shared.

    Decision 0127: the guard is held by advisory locks taken before the buffer's (the
    token first, then the session), checked by the next statement.
    Branches, not a generator over the ids: a guarded append makes no more Python
    calls than a plain one (decision 0182; ``tests/store/postgres/test_append_calls.py``).
    """
    if guard is None:
        return "timed_lock", ()
    token, session = guard.token_id, guard.session_id
    if token is None:
        return ("timed_lock", ()) if session is None else ("timed_lock_held@session", (session,))
    if session is None:
        return "timed_lock_held@token", (token,)
    return "timed_lock_held@both", (token, session)


def _locked_facts(
    db: Pipeline,
    address: Address,
    guard: WriteGuard | None,
    timeout: str,
    ids: list[str],
    want_open: bool,
) -> tuple[Any, ...] | None:
    """The append's first round trip: a claimed session, the lock, then the facts (or None: no header).

    A claimed session (decision 0032) is created before the lock; a guarded append's
    guard is checked by the facts query, under the locks (decision 0127): GuardFailed
    when it did not hold.
    """
    kind, checks = guard_form(guard)
    ensure = ensure_form(guard)
    lock, held = held_lock(guard)
    if ensure is not None:
        db.send(*ensure)
    db.send(lock, (advisory_key(address), timeout, *held))
    shape = ("@ids" if ids else "@") + ("+open" if want_open else "")
    name = "append_facts" + {"@": "", "@+open": "@open"}.get(shape, shape)
    params = (ids, *address) if ids else tuple(address)
    if not kind:
        found = db.result(db.send(name, params))
        return found[0] if found else None
    guarded = db.result(db.send(f"{name}@{kind}", (*checks, *params)))
    if not guarded[0][0]:
        raise GuardFailed
    return guarded[0][1:] if guarded[0][1] is not None else None


def _send_key(
    db: Pipeline, idempotency: Idempotency, outcome: AppendOutcome, whole: Any
) -> tuple[AppendOutcome, Any]:
    """Queue the idempotency key with its answer (decision 0031); the outcome and what is left to read.

    When the answer holds the buffer (``whole``, a snapshot) it is read first: one more round trip.
    """
    if whole is not None:
        outcome = replace(outcome, rows=load_rows(db.result(whole)))
        whole = None
    status, body = idempotency.answer(outcome)
    key = (idempotency.owner, idempotency.key, idempotency.fingerprint, status, body)
    db.send("idem_insert", (*key, idempotency.expires_at))
    return outcome, whole


if TYPE_CHECKING:

    def _conforms(store: PostgresStore) -> Store:
        """Let mypy prove that ``PostgresStore`` implements the ``Store`` protocol."""
        return store


__all__ = ["PostgresStore", "advisory_key", "durability_warnings", "parse_url"]
