"""``PostgresStore``: the ``Store`` protocol on PostgreSQL, through a ``psycopg_pool`` pool."""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from flowmem import metrics
from flowmem.core import Answer, AppendOutcome, Message, apply_append, call_ids, result_id
from flowmem.errors import (
    BufferChangedError,
    ConfigurationError,
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
from flowmem.limits import quota_exceeded
from flowmem.store.adk.sql import SqlAdkSessions
from flowmem.store.archive.sql import SqlArchive
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    PAGE_CHARS,
    PAGE_ROWS,
    Address,
    BodyPage,
    Idempotency,
    Quotas,
    Store,
    Usage,
    WriteGuard,
)
from flowmem.store.checkpoints.sql import SqlCheckpoints
from flowmem.store.conversations.sql import SqlConversations
from flowmem.store.editor import SqlBufferEditor, SqlRunner, load_rows
from flowmem.store.known import (
    DEFAULT_KNOWN_BUFFERS,
    MAX_KNOWN_OPEN,
    Known,
    KnownBuffers,
    Unforeseen,
    foresee,
)
from flowmem.store.postgres.after import known_after
from flowmem.store.postgres.pipeline import QUOTAS, Pipeline, in_transaction
from flowmem.store.postgres.queries import SQL
from flowmem.store.postgres.schema import MIGRATION_LOCK, MIGRATIONS
from flowmem.store.repairs.sql import SqlRepairs
from flowmem.store.rows import (
    check_address,
    check_batch,
    check_buffer_bytes,
    check_last,
    check_lock_timeout,
    check_rows,
    ensure_form,
    guard_form,
)
from flowmem.store.sqlbase import LAST_MAX, SqlStore

log = logging.getLogger("flowmem")

T = TypeVar("T")

UNSERIALIZED_ATTEMPTS = 20  # retries of an unserialized append that collided with another
POOL_PARAMS = ("pool_min", "pool_max", "connect_timeout_s", "known_buffers")

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


def parse_url(url: str) -> tuple[str, dict[str, float]]:
    """Split flowmem's own parameters off a URL (``pool_min``, ``pool_max``,
    ``connect_timeout_s``, ``known_buffers``: how many buffers' facts a store
    remembers for one-round-trip appends, 0 = off, decision 0039)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigurationError(f"not a postgresql URL: {url!r}")
    kept: list[tuple[str, str]] = []
    options: dict[str, float] = {
        "pool_min": 1,
        "pool_max": 10,
        "connect_timeout_s": 10.0,
        "known_buffers": DEFAULT_KNOWN_BUFFERS,
    }
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in POOL_PARAMS:
            try:
                options[name] = float(value)
            except ValueError as exc:
                raise ConfigurationError(f"{name} must be a number, got {value!r}") from exc
        else:
            kept.append((name, value))
    if options["pool_min"] < 0 or options["pool_max"] < max(1, options["pool_min"]):
        raise ConfigurationError("need 0 <= pool_min <= pool_max and pool_max >= 1")
    if options["known_buffers"] < 0 or options["known_buffers"] != int(options["known_buffers"]):
        raise ConfigurationError("known_buffers must be a whole number >= 0 (0: off)")
    # quote, not quote_plus: libpq reads "+" literally (options=-ca%3D1%20-cb%3D2 must keep its space)
    query = urlencode(kept, quote_via=quote)
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, query, parts.fragment))
    return conninfo, options


def connect_options(conninfo: str, timeout: float) -> dict[str, Any]:
    """libpq's ``connect_timeout`` from ``connect_timeout_s`` (whole seconds, at least 2), unless the URL sets it.

    Without it libpq waits for the operating system's TCP timeout (minutes) on a
    host that does not answer.
    """
    if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(conninfo):
        return {}
    return {"connect_timeout": max(2, math.ceil(timeout))}


def probe_server(conninfo: str, connect: dict[str, Any], url: str) -> None:
    """Connect once before the pool opens: an unreachable server is one ``StoreUnavailableError`` at once.

    The pool would retry in the background, logging each failure, until its
    ``connect_timeout_s`` (10 s) ran out; a closed port or a wrong password is
    known from the first attempt.
    """
    try:
        conn = psycopg.connect(conninfo, autocommit=True, **connect)
    except psycopg.Error as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise StoreUnavailableError(
            f"cannot connect to PostgreSQL at {_safe(url)}: {reason}"
        ) from None
    try:
        settings = {
            name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        }
    except psycopg.Error:  # a server that hides its settings: nothing to say
        settings = {}
    finally:
        conn.close()
    for warning in durability_warnings(settings):
        log.warning("PostgreSQL at %s: %s", _safe(url), warning)


def durability_warnings(settings: dict[str, str]) -> list[str]:
    """What the server's settings lose on a power loss or an OS crash (issue 38 §5; docs/security.md)."""
    found = []
    if settings.get("fsync") == "off":
        found.append(
            "fsync=off: a power loss or OS crash can leave the database damaged beyond "
            "recovery; turn it on (postgresql.conf) unless the data is disposable"
        )
    if settings.get("full_page_writes") == "off":
        found.append(
            "full_page_writes=off: a power loss during a page write can leave a torn page "
            "(a damaged table); turn it on unless the file system cannot tear pages"
        )
    if settings.get("synchronous_commit") == "off":
        found.append(
            "synchronous_commit=off: the writes of the last moments before a crash "
            "(up to three times wal_writer_delay) are lost though they were acknowledged"
        )
    return found


class PostgresStore(SqlStore[psycopg.Connection[Any]]):
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
        probe_server(conninfo, connect, url)  # one clean error, at once, when it cannot be reached
        self._pool = ConnectionPool(
            conninfo,
            min_size=int(options["pool_min"]),
            max_size=int(options["pool_max"]),
            kwargs={"autocommit": True, **connect},
            open=False,
            timeout=options["connect_timeout_s"],
            name="flowmem",
        )
        try:
            self._pool.open(wait=True, timeout=options["connect_timeout_s"])
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailableError(f"cannot connect to PostgreSQL at {_safe(url)}") from exc
        self._known = KnownBuffers(int(options["known_buffers"]))
        self.checkpoints = SqlCheckpoints(self)  # LangGraph's tables (docs/decisions/0040)
        self.conversations = SqlConversations(self)  # pydantic-ai's (docs/decisions/0051)
        self.archive = SqlArchive(self)  # what compactions archived (docs/decisions/0083)
        self.repairs = SqlRepairs(self)  # what the append rules repaired (issue 37 §2)
        self.adk = SqlAdkSessions(self)  # Google ADK's sessions and states (decision 0053)
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

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
                if conn.__dict__.get(QUOTAS) != self._quotas:
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

    def _send_quotas(self, conn: psycopg.Connection[Any]) -> None:
        """Give the connection this store's quotas (session settings the quota triggers read)."""
        quotas = self._quotas
        sizes = (str(quotas.bytes), str(quotas.buffers), str(quotas.records))
        conn.execute(SQL["quotas_set"], sizes)
        conn.__dict__[QUOTAS] = quotas

    def set_quotas(self, quotas: Quotas) -> None:
        """Enforce ``quotas`` on every later write through this store (each connection is told once)."""
        self._quotas = quotas

    def usage(self, user_id: str) -> Usage:
        """Return what the triggers counted for ``user_id``."""
        with self._connection() as conn:
            row = conn.execute(SQL["usage_get"], (user_id,)).fetchone()
        return Usage() if row is None else Usage(int(row[0]), int(row[1]), int(row[2]))

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

    @contextmanager
    def _reading(self) -> Iterator[psycopg.Connection[Any]]:
        """Lend a connection inside one transaction, so several reads see one snapshot."""
        with self._connection() as conn, conn.transaction():
            yield conn

    def _stream_batches(
        self, conn: psycopg.Connection[Any], address: Address, batch: int
    ) -> Iterator[list[tuple[str]]]:
        """Yield bodies through a server-side cursor: the server sends ``batch`` rows at a time."""
        with conn.cursor(name="flowmem_iter_rows") as cursor:
            cursor.execute(SQL["load_all"], tuple(address))
            while chunk := cursor.fetchmany(batch):
                yield chunk

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
        """One page of a paged read in one statement: one snapshot, one round trip.

        The server cuts the page at ``chars`` bytes (``octet_length``), so only the
        page crosses the network.
        """
        check_address(address)
        for value in (after, before, last):
            check_last(value)
        check_batch(rows)
        check_batch(chars)
        high = LAST_MAX if before is None else min(before, LAST_MAX)
        low = -1 if after is None else after
        limit = 0 if last == 0 else rows + 1
        page = (high, limit, rows, chars, *address)
        with self._connection() as conn:
            if last is None or last == 0:
                found = conn.execute(SQL["page_read"], (low, *page)).fetchall()
            else:
                params = (high, min(last, LAST_MAX), low, *page)
                found = conn.execute(SQL["page_read_last"], params).fetchall()
        head = (int(found[0][0]), int(found[0][1])) if found else None
        if version is not None and head != version:
            raise BufferChangedError(
                f"buffer {address.scope}/{address.scope_id}/{address.key} was written "
                "since the first page of this read: read it again"
            )
        if not found or head is None:
            return BodyPage(None, 0)
        bodies = [(int(r[4]), str(r[5])) for r in found if r[4] is not None]
        fetched = int(found[0][6] or 0)
        older = last is not None and last > 0 and found[0][3] is not None
        return BodyPage(head, int(found[0][2]), bodies, older, fetched > len(bodies))

    def _load_last(
        self, conn: psycopg.Connection[Any], address: Address, last: int
    ) -> list[tuple[str]]:
        """Return the last ``last`` bodies: the buffer id first, then an unprepared indexed read."""
        head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
        if head is None:
            return []
        found: list[tuple[str]] = conn.execute(
            SQL["load_last"], (head[0], last), prepare=False
        ).fetchall()
        return found

    def _bodies_last(
        self, conn: psycopg.Connection[Any], address: Address, before: int, last: int
    ) -> list[tuple[int, str]]:
        """Return the last ``last`` (pos, body) below ``before``: the buffer id first, unprepared."""
        head = conn.execute(SQL["header_get"], tuple(address)).fetchone()
        if head is None:
            return []
        found: list[tuple[int, str]] = conn.execute(
            SQL["bodies_last_before"], (head[0], before, last), prepare=False
        ).fetchall()
        return found

    @staticmethod
    def _is_unique_violation(exc: BaseException | None) -> bool:
        """Return True for a duplicate primary or unique key."""
        return isinstance(exc, psycopg.errors.UniqueViolation)

    def _check_session_id(self, session_id: str) -> None:
        """Refuse a session id with a NUL character (PostgreSQL text cannot hold one)."""
        if "\x00" in session_id:
            raise InvalidInputError("session ids must not contain NUL characters")

    # --- schema ------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Apply missing migrations in one transaction under an advisory lock; refuse a newer schema."""

        def work(conn: psycopg.Connection[Any]) -> None:
            conn.execute(SQL["advisory_lock"], (MIGRATION_LOCK,))
            self._upgrade(conn, f"the database at {_safe(self.url)}")

        self._write(work)

    # --- conversation buffers --------------------------------------------------------------
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
        """Run the core append rules on the stored buffer in one transaction.

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
        check_address(address)
        check_rows(rows)
        lock_timeout = check_lock_timeout(lock_timeout)
        timeout = f"{max(int(lock_timeout * 1000), 1)}ms"
        remember = idempotency is None and self._known.size > 0
        with self._connection() as conn:
            try:
                for attempt in range(2):
                    try:
                        if remember and not snapshot:
                            known = self._known_append(
                                conn, address, rows, max_messages, max_bytes, timeout, guard
                            )
                            if known is not None:
                                return known
                        return self._pipelined(
                            conn,
                            address,
                            rows,
                            max_messages,
                            snapshot,
                            max_bytes,
                            guard,
                            timeout,
                            idempotency,
                            remember,
                        )
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
                    *address,
                    lock_timeout,
                )
            for attempt in range(UNSERIALIZED_ATTEMPTS):
                try:
                    with conn.transaction():
                        self._check_guard(conn, guard)
                        outcome = self._apply_append(
                            conn, address, rows, max_messages, snapshot, max_bytes
                        )
                        self._record_key(conn, idempotency, outcome)
                        return outcome
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
                if in_transaction(conn):
                    conn.execute(SQL["rollback"])
                raise

    def _pipelined(
        self,
        conn: psycopg.Connection[Any],
        address: Address,
        rows: list[Message],
        max_messages: int,
        snapshot: bool,
        max_bytes: int,
        guard: WriteGuard | None,
        timeout: str,
        idempotency: Idempotency | None = None,
        remember: bool = False,
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
        kind, checks = guard_form(guard)
        ensure = ensure_form(guard)
        lock = f"timed_lock@{kind}" if kind else "timed_lock"
        ids, want_open = _asked(rows)
        try:
            with Pipeline(conn, SQL) as db:
                if ensure is not None:  # a claimed session (decision 0032), before the lock
                    db.send(*ensure)
                locked = db.send(lock, (advisory_key(address), timeout, *checks))
                shape = ("@ids" if ids else "@") + ("+open" if want_open else "")
                facts = db.send(
                    "append_facts" + {"@": "", "@+open": "@open"}.get(shape, shape),
                    (ids, *address) if ids else tuple(address),
                )
                found = db.result(facts)
                if not db.has_rows(locked):
                    raise _GuardFailed
                editor = _editor(db, address, found[0] if found else None, ids, want_open)
                outcome = apply_append(editor, rows, max_messages)
                check_buffer_bytes(address, editor.bytes_before, editor.bytes, max_bytes)
                editor.flush()
                if outcome.logged:  # the repair log, in this transaction (issue 37 §2)
                    freed = editor.bytes_before - editor.bytes
                    self.repairs.record(db, editor.buffer_id, outcome.logged, freed)
                whole = db.send("load_all", tuple(address)) if snapshot else None
                if idempotency is not None:  # the key and its answer, before the commit (0031)
                    if whole is not None:  # the answer holds the buffer: one more round trip
                        outcome = replace(outcome, rows=load_rows(db.result(whole)))
                        whole = None
                    status, body = idempotency.answer(outcome)
                    db.send(
                        "idem_insert",
                        (
                            idempotency.owner,
                            idempotency.key,
                            idempotency.fingerprint,
                            status,
                            body,
                            idempotency.expires_at,
                        ),
                    )
                after = db.send("buffer_known", tuple(address)) if remember else None
                db.finish()
                if after is not None:
                    self._known.remember(address, _known(db.result(after)))
                if whole is not None:
                    outcome = replace(outcome, rows=load_rows(db.result(whole)))
            return outcome
        except BaseException as exc:
            if in_transaction(conn):
                conn.execute(SQL["rollback"])
            if isinstance(exc, _GuardFailed):
                raise self._guard_error(conn, guard) from None
            raise

    def _known_append(
        self,
        conn: psycopg.Connection[Any],
        address: Address,
        rows: list[Message],
        max_messages: int,
        max_bytes: int,
        timeout: str,
        guard: WriteGuard | None = None,
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
        """
        known = self._known.get(address)
        if known is None:
            return None
        ids, heals = _asked(rows)
        try:
            foreseen = foresee(known, address, rows, ids, heals, max_messages, max_bytes)
        except Unforeseen:
            return None
        try:
            kind, checks = guard_form(guard)
            lock, check = ("timed_lock_known@" + kind, "append_known@guarded") if kind else _PLAIN
            ensure = ensure_form(guard)
            with Pipeline(conn, SQL) as db:
                if ensure is not None:  # a claimed session (decision 0032), before the lock
                    db.send(*ensure)
                locked = db.send(lock, (advisory_key(address), timeout, *checks))
                bid = known.buffer_id
                head = (known.version, known.count, known.last_major, known.bytes)
                held = db.send(check, (bid, *head, bid, bid, bid, foreseen.fresh))
                for name, params in foreseen.writes:
                    db.run(f"{name}?", params)
                db.finish()
                if kind and not db.has_rows(locked):  # nothing was written
                    raise self._guard_error(conn, guard)
                if db.result(held) == [("true",)]:
                    self._known.remember(address, known_after(known, foreseen.writes))
                    return foreseen.outcome
                self._known.remember(address, None)
        except BaseException:
            self._known.remember(address, None)
            if in_transaction(conn):
                conn.execute(SQL["rollback"])
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


def _quota_refused(exc: psycopg.errors.RaiseException) -> QuotaExceededError | None:
    """The QuotaExceededError a quota trigger raised (``flowmem_quota_check``), or None."""
    if exc.diag.message_primary != "flowmem_quota":
        return None
    quota, _, limit = (exc.diag.message_detail or "").partition(" ")
    return quota_exceeded(quota, exc.diag.message_hint or "", int(limit or 0))


def _known(found: list[tuple[Any, ...]]) -> Known | None:
    """What ``buffer_known`` read (None: no buffer there, or more open calls than are kept)."""
    if not found:
        return None
    bid, version, count, last_major, size, open_ids = found[0]
    if open_ids is not None and len(open_ids) > MAX_KNOWN_OPEN:
        return None
    head = (int(bid), int(version), int(count), int(last_major), int(size))
    return Known(*head, frozenset(open_ids or ()))


_PLAIN = ("timed_lock", "append_known")  # an unguarded append's lock and facts' check


class _GuardFailed(Exception):
    """The append's guard did not hold (its error is found after the rollback)."""


def _asked(rows: list[Message]) -> tuple[list[str], bool]:
    """The call ids the incoming rows name, and whether one is a user turn (it heals).

    What the append's one facts query fetches ahead; a question it did not foresee
    is asked by the editor as before, so this guesses cost, never results.
    """
    ids: dict[str, None] = {}
    want_open = False
    for row in rows:
        for cid in call_ids(row):
            ids[cid] = None
        rid = result_id(row)
        if rid is not None:
            ids[rid] = None
        want_open = want_open or row.get("role") == "user"
    return list(ids), want_open


def _editor(
    db: SqlRunner,
    address: Address,
    facts: tuple[Any, ...] | None,
    ids: list[str],
    want_open: bool = False,
) -> SqlBufferEditor:
    """The append's editor, seeded with the row of ``append_facts`` (None: no buffer yet).

    ``want_open``: the facts hold the open calls (NULL there is none open).
    """
    if facts is None:
        editor = SqlBufferEditor(db, address, None)
        editor.know(dict.fromkeys(ids, False), dict.fromkeys(ids), [], evicted=dict.fromkeys(ids, False))
        return editor
    editor = SqlBufferEditor(db, address, facts[:4])
    declared = dict.fromkeys(ids, False)
    answers: dict[str, Answer | None] = dict.fromkeys(ids)
    evicted = dict.fromkeys(ids, False)
    for cid, is_declared, pos, healed, was_evicted in facts[4] or ():
        declared[cid] = bool(is_declared)
        evicted[cid] = bool(was_evicted)
        if pos is not None:
            answers[cid] = Answer(int(pos), bool(healed))
    open_calls = None
    following: dict[int, int | None] = {}
    if want_open:  # grouped by declaring turn: (its ids, its position, run end, next row)
        found = facts[5] or ()
        open_calls = [(str(cid), int(pos), int(end)) for ids, pos, end, _ in found for cid in ids]
        following = {int(end): None if n is None else int(n) for _, _, end, n in found}
    editor.know(declared, answers, open_calls, following, evicted)
    return editor


def _safe(url: str) -> str:
    """Return ``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


if TYPE_CHECKING:

    def _conforms(store: PostgresStore) -> Store:
        """Let mypy prove that ``PostgresStore`` implements the ``Store`` protocol."""
        return store
