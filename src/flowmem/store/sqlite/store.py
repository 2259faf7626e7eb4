"""``SqliteStore``: the ``Store`` protocol on one SQLite file, its connections and errors.

A small pool of connections, each in WAL mode at the URL's ``synchronous``; writes
take turns in the file's writer queue (``writers``), their fsync is ``fsync``'s, and
``fileguard`` is asked before every loan whether the files were sealed. The package
docstring (``flowmem.store.sqlite``) says what the backend promises.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from flowmem import metrics
from flowmem.core import AppendOutcome
from flowmem.errors import (
    InvalidInputError,
    StoreError,
    StoreUnavailableError,
)
from flowmem.limits import quota_exceeded
from flowmem.store import tail
from flowmem.store.adk.sql import SqlAdkSessions
from flowmem.store.archive.sql import SqlArchive
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    TAIL_BATCH,
    Address,
    LocalCalls,
    Store,
    WriteGuard,
)
from flowmem.store.checkpoints.sql import SqlCheckpoints
from flowmem.store.conversations.sql import SqlConversations
from flowmem.store.locks import AddressLocks, WouldBlock, no_wait, waiting_allowed
from flowmem.store.repairs.sql import SqlRepairs
from flowmem.store.rows import (
    check_address,
    check_batch,
    check_last,
    guard_form,
)
from flowmem.store.sqlbase import AppendAsk, SqlStore, no_database
from flowmem.store.sqlite.backup import backup_to
from flowmem.store.sqlite.driver import (
    _close,
    _Connection,
    _is_busy,
    _left,
    _locked,
    add_quota_function,
    driver_error,
    parse_url,
)
from flowmem.store.sqlite.fileguard import FileGuard
from flowmem.store.sqlite.fsync import AUTO_CHECKPOINT, DeferredSync, SharedSync
from flowmem.store.sqlite.pool import Mode, SqlitePool
from flowmem.store.sqlite.queries import SQL
from flowmem.store.sqlite.schema import MIGRATIONS
from flowmem.store.sqlite.walroom import WalRoom
from flowmem.store.sqlite.writers import release_writer_queue, writer_queue

log = logging.getLogger("flowmem")

T = TypeVar("T")

class SqliteStore(SqlitePool, SqlStore[sqlite3.Connection]):
    """The ``Store`` protocol on one SQLite file."""

    SQL = SQL
    MIGRATIONS = MIGRATIONS

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Open the SQLite file of ``url``, creating it (and its directory) unless ``create`` is False.

        ``create=False``: a file that does not exist, or holds no flowmem schema, is
        ``DatabaseNotFoundError`` and nothing is created (the read-only CLI commands).
        """
        self.url = url
        self.path, self.synchronous = parse_url(url)
        self.create = create
        if not create and not Path(self.path).is_file():
            raise no_database(self.path)
        self._idle: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._drained = threading.Condition(self._pool_lock)  # a retirement's last loan came back
        self._locks = AddressLocks()
        self._closed = False
        # files made immutable under the store (decisions/0046): while ``_sealed`` names
        # one, the store takes only reads. Each change retires every connection: a
        # generation per pool, and loans of an earlier one draining before a new opens
        self._files = FileGuard(self.path)
        self._sealed: str | None = None
        self._generation = 0
        self._lent = 0  # connections of this generation on loan
        self._draining = 0  # connections of an earlier generation on loan
        self.group_commit = DeferredSync(self.path, self.synchronous)  # decisions/0027
        self._commits = SharedSync(self.sync)  # threads' writes share an fsync (decisions/0029)
        # room made ahead in the WAL, so a commit's fsync does not grow it (decision 0154)
        self.wal_room = WalRoom(self.path, self.group_commit.enabled, AUTO_CHECKPOINT)
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory of {self.path}: {exc}") from exc
        self._queue = writer_queue(self.path)  # writers of the file take turns (decisions/0026)
        self._queue_released = False
        self.checkpoints = SqlCheckpoints(self)  # LangGraph's tables (docs/decisions/0040)
        self.conversations = SqlConversations(self)  # pydantic-ai's (docs/decisions/0051)
        self.archive = SqlArchive(self)  # what compactions archived (docs/decisions/0083)
        self.repairs = SqlRepairs(self)  # what the append rules repaired (issue 37 §2)
        self.adk = SqlAdkSessions(self)  # Google ADK's sessions and states (decision 0053)
        try:
            with self._connection() as conn:
                self._migrate(conn)
                if self.wal_room.enabled:
                    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
                    self.wal_room.set_page_size(page, AUTO_CHECKPOINT)
        except BaseException:
            self.close()
            raise

    # --- connections (the pool's own: ``SqlitePool``) ----------------------------------
    def _driver_error(self, conn: sqlite3.Connection, exc: sqlite3.Error) -> Exception:
        """The flowmem error of a driver error: a quota trigger's abort, else ``driver_error``."""
        if isinstance(conn, _Connection) and conn.quota_refused is not None:
            refused, conn.quota_refused = conn.quota_refused, None
            if isinstance(exc, sqlite3.IntegrityError) and "flowmem_quota" in str(exc):
                return quota_exceeded(*refused)
        return driver_error(exc, self.path, database=self.path)

    def read_tail_facts(self, address: Address, batch: int = TAIL_BATCH, budget: int = 0) -> tail.FactsTail:
        """``read_tail``'s rows as a window's facts, most from stored columns (``tail.read_tail_facts``)."""
        check_address(address)
        check_batch(batch)
        check_last(budget)

        def run(name: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
            with self._connection() as conn:
                found: list[tuple[Any, ...]] = conn.execute(SQL[name], params).fetchall()
                return found

        return tail.read_tail_facts(run, address, batch, budget)

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """Lend a connection inside one read transaction: its reads are one snapshot (WAL)."""
        with self._connection() as conn:
            conn.execute(SQL["read_begin"])
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute(SQL["read_end"])  # a read: nothing to keep or undo

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """Lend a pooled connection; translate driver errors to ``StoreError``.

        Four concerns, each its own method: whether a loan may start (``_may_lend``),
        the pool (``_borrow``), how the loan's commits reach the disk (``_sync_mode``),
        and what a driver error becomes (``_failed``); ``_returned`` settles the loan.
        """
        deferred = self._may_lend()
        own_fsync, mode = self._loan_mode(deferred)
        conn, generation = self._borrow(mode)
        self._sync_mode(conn, own_fsync, mode)
        changes = conn.total_changes
        try:
            yield conn
            if self.group_commit.failed and own_fsync and conn.total_changes != changes:
                self.group_commit.synced_by_itself()  # committed with SQLite's own fsync: the disk syncs
        except (sqlite3.Error, OverflowError) as exc:
            self._rollback(conn)
            raise self._failed(conn, exc) from exc
        except BaseException:
            self._rollback(conn)
            raise
        finally:
            self._returned(conn, generation, conn.total_changes != changes, deferred, own_fsync)

    def _may_lend(self) -> bool:
        """Refuse a loan of a closed store, or a deferred one after a failed fsync; True: deferred.

        The files are asked first whether they were sealed (SIGBUS otherwise: decisions/0046).
        """
        if self._closed:
            raise StoreError("the store is closed")
        deferred = self.group_commit.deferred()
        if deferred and self.group_commit.failed:
            # a write here would be answered before an fsync that is known to fail
            raise WouldBlock(f"the last fsync of {self.path} failed: writes sync by themselves")
        sealed = self._files.sealed()
        if (sealed is None) != (self._sealed is None) or self._draining:
            self._watch_files(sealed)
        return deferred

    def _borrow(self, mode: Mode) -> tuple[sqlite3.Connection, int]:
        """A pooled connection for a loan in ``mode`` (``_take_idle``) and the pool generation it is of."""
        with self._pool_lock:
            conn = self._take_idle(mode)
            generation = self._generation
            self._lent += 1
        try:
            return (self._connect() if conn is None else conn), generation
        except sqlite3.Error as exc:
            self._give_back(None, generation)
            if _is_busy(exc) and not waiting_allowed():
                raise WouldBlock(f"{self.path} is locked") from exc
            raise driver_error(exc, f"cannot open {self.path}", StoreUnavailableError, self.path) from exc
        except BaseException:
            self._give_back(None, generation)
            raise

    def _loan_mode(self, deferred: bool) -> tuple[bool, Mode]:
        """A loan's pragmas, known before it borrows; with True when its commits fsync themselves.

        Every loan starts from the default wait (0 in no-wait mode): a pooled connection
        must not keep the timeout its previous borrower set. Else an fsync after commit,
        shared with the threads that committed meanwhile; a writer alone in its process
        and its process alone on the file has no one to share with: SQLite's own fsync
        at commit saves the shared one's work (decision 0095).
        """
        own_fsync = not deferred and (not self._commits.joined() or self._alone_writer())
        timeout = max(int(DEFAULT_LOCK_TIMEOUT * 1000), 0) if waiting_allowed() else 0
        synchronous = self.synchronous if own_fsync else "NORMAL"
        return own_fsync, (timeout, synchronous, 0 if deferred else AUTO_CHECKPOINT)

    def _sync_mode(self, conn: sqlite3.Connection, own_fsync: bool, mode: Mode) -> None:
        """Set the loan's wait and durability pragmas (``_loan_mode``'s), only those that change."""
        timeout, synchronous, checkpoint = mode
        if self._commits.joined():
            self._commits.settled(own_fsync)
        self._pragma(conn, "busy_timeout", timeout)
        self._pragma(conn, "synchronous", synchronous)
        self._pragma(conn, "wal_autocheckpoint", checkpoint)

    def _failed(self, conn: sqlite3.Connection, exc: sqlite3.Error | OverflowError) -> Exception:
        """The flowmem error of a loan's driver error (its transaction already rolled back)."""
        if isinstance(exc, OverflowError):  # an integer SQLite cannot hold (64-bit)
            return InvalidInputError(f"a number is out of range: {exc}")
        if _is_busy(exc):
            if not waiting_allowed():
                return WouldBlock(f"{self.path} is locked")
            return _locked(self.path, DEFAULT_LOCK_TIMEOUT)
        return self._driver_error(conn, exc)

    def _returned(
        self, conn: sqlite3.Connection, generation: int, changed: bool, deferred: bool, own_fsync: bool
    ) -> None:
        """Give the connection back; a loan that changed the file makes its fsync due."""
        if changed:
            if deferred:
                self.group_commit.wrote()
            elif not own_fsync:
                self._commits.changed()  # its shared fsync is due (a duplicate's is not)
        self._give_back(conn, generation)

    # --- group commit (LocalCalls) ---------------------------------------------------------
    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Make this thread's calls short: never wait for a lock, and defer each write's fsync.

        Inside, a call that would wait raises ``WouldBlock`` before it changed
        anything, and a write is durable only once ``sync`` reached ``sync_barrier``.
        """
        with no_wait(), self.group_commit.deferring():
            yield

    def sync_barrier(self) -> int | None:
        """The count of deferred writes a response must wait to be synced; None when all are."""
        return self.group_commit.barrier()

    def sync(self) -> int:
        """Fsync the write-ahead log (blocking), checkpointing when due; return the count now durable."""
        return self.group_commit.sync(self.checkpoint)

    def _alone_writer(self) -> bool:
        """True when this thread's write has no other writer to share an fsync with."""
        return self._queue.held_alone() and self._commits.alone()

    def _grouped(self) -> bool:
        """Whether a write on this thread commits without an fsync and shares one after (0029).

        Not for a deferred write (the HTTP pool's, synced by its own barrier) nor on the
        event loop (no-wait mode must never block on a disk).
        """
        commits = self.group_commit
        return commits.enabled and not commits.failed and not commits.deferred() and waiting_allowed()

    def checkpoint(self) -> tuple[int, int, int]:
        """Run a passive WAL checkpoint; return SQLite's (busy, log frames, checkpointed frames)."""
        with self._connection() as conn:
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one immediate write transaction, in the file's writer queue.

        The queue and SQLite's busy timeout share the default bound; past it
        ``StoreLockedError`` (another process holds the file's write lock).
        """
        started = time.monotonic()
        with (
            self._commits.commit() if self._grouped() else nullcontext(),
            self._queue.hold(DEFAULT_LOCK_TIMEOUT),
            self._connection() as conn,
        ):
            self._busy_timeout(conn, _left(DEFAULT_LOCK_TIMEOUT, started))
            conn.execute("BEGIN IMMEDIATE")
            changes = conn.total_changes
            result = work(conn)
            if conn.total_changes != changes:  # a commit that writes frames (decision 0169)
                self.wal_room.make()  # the WAL's write lock is held
            conn.execute("COMMIT")
            return result

    def _write_serialized(
        self, address: Address, work: Callable[[sqlite3.Connection], T], hold: bool = True
    ) -> T:
        """Run ``work`` in one write transaction under the address's in-process lock.

        ``hold`` changes nothing here: the write transaction excludes every other writer.
        """
        with self._locks.hold(address, DEFAULT_LOCK_TIMEOUT):
            return self._write(work)

    @staticmethod
    def _is_unique_violation(exc: BaseException | None) -> bool:
        """Return True for a duplicate key (SQLite reports every constraint as IntegrityError)."""
        return isinstance(exc, sqlite3.IntegrityError)

    # --- schema ------------------------------------------------------------------------
    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Apply missing migrations in one transaction; refuse a newer schema.

        An up-to-date file is only read, so opening never waits for a writer.
        """
        if self._recorded_version(conn) == len(MIGRATIONS):
            return
        conn.execute("BEGIN IMMEDIATE")
        self._upgrade(conn, self.path)  # a refusal rolls back in _connection
        conn.execute("COMMIT")

    @staticmethod
    def _recorded_version(conn: sqlite3.Connection) -> int:
        try:
            row = conn.execute(SQL["schema_version"]).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        return int(row[0]) if row else 0

    # --- conversation buffers --------------------------------------------------------------
    def _append(self, ask: AppendAsk) -> AppendOutcome:
        """Run the core append rules on the stored buffer in one transaction (``SqlStore.append``).

        With ``snapshot`` the whole buffer is read back inside that transaction; with
        ``guard`` the transaction checks it first (its error, nothing appended); with
        ``idempotency`` its key is inserted last, before the commit.

        Implements MEM-12: serialized per address by the in-process lock, then in
        the file's fair writer queue (threads and processes in arrival order:
        docs/decisions/0026), together bounded by ``lock_timeout``; past it the
        append proceeds unserialized (a plain ``BEGIN`` transaction retried on busy,
        for at most ``lock_timeout`` more) after exactly one WARNING. The file's own
        write lock is the storage, not the serialization: held by another process
        past what is left of the bound, the append is refused (``StoreLockedError``,
        nothing written), as it cannot go ahead without it (decisions/0046). Nothing
        is ever half-written: the rules run inside the transaction and any error
        rolls it back. An append that stored nothing (every message a duplicate)
        rolls back and waits for no fsync (decision 0071).
        """
        started = time.monotonic()
        with self._locks.hold(ask.address, ask.lock_timeout) as taken:
            if not taken:  # AddressLocks warned
                with self._connection() as conn:
                    return self._append_unserialized(conn, ask)
            # on disk (a shared fsync: decisions/0029) before the address is let go
            with self._commits.commit() if self._grouped() else nullcontext():
                return self._append_in_turn(ask, started)

    def _append_in_turn(self, ask: AppendAsk, started: float) -> AppendOutcome:
        """The rest of ``_append`` once the address is held: the file's turn, then its write lock."""
        bound = ask.lock_timeout
        with self._queue.hold(_left(bound, started)) as turn, self._connection() as conn:
            if not turn:
                metrics.lock_timed_out("sqlite")
                log.warning(
                    "append to %s/%s/%s waited %.1fs for its turn to write %s; "
                    "proceeding unserialized",
                    *ask.address,
                    bound,
                    self.path,
                )
            else:
                # the file lock gets what the queues left of the bound (the whole bound
                # when they were free at once, so the timeout stays cached); another
                # writer holds it only when it does not queue (an older flowmem, a tool)
                self._busy_timeout(conn, _left(bound, started))
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
                    if not waiting_allowed():
                        raise WouldBlock(f"{self.path} is locked") from exc
                    # the turn is ours: the lock's holder is outside the queue (another
                    # process), and without that lock nothing can be written
                    raise _locked(self.path, bound) from exc
                changes = conn.total_changes
                outcome = self._append_in(conn, ask)
                # an append that stored nothing (every message a duplicate) commits nothing,
                # and makes no room: it writes nothing (decisions 0071, 0169)
                if conn.total_changes == changes:
                    conn.execute("ROLLBACK")
                    return outcome
                self.wal_room.make()  # the WAL's write lock is held
                conn.execute("COMMIT")
                return outcome
            return self._append_unserialized(conn, ask)

    def _check_guard(self, conn: sqlite3.Connection, guard: WriteGuard | None) -> None:
        """The guard checked first; a claimed session created only when the check fails.

        The speed twin of ``SqlStore._check_guard`` (create, then check), which
        tests/store/sqlite/test_guard_first.py keeps as its oracle: one statement per
        append to an existing session instead of two. Equal because SQLite's write
        transaction excludes every other writer, and a guard that holds names a
        session that exists, in which case the create inserts nothing.
        """
        kind, params = guard_form(guard)
        if kind and conn.execute(SQL[f"guard@{kind}"], params).fetchone() is not None:
            return
        super()._check_guard(conn, guard)

    def _append_unserialized(self, conn: sqlite3.Connection, ask: AppendAsk) -> AppendOutcome:
        """Retry a plain ``BEGIN`` transaction on busy until it commits, for at most the append's bound.

        Past it ``StoreLockedError``, nothing written. The guard is read in the same
        transaction: SQLite refuses to commit a transaction that read before another
        writer committed (busy, retried).
        """
        give_up = time.monotonic() + ask.lock_timeout
        self._busy_timeout(conn, 0.05)
        while True:
            try:
                conn.execute("BEGIN")
                outcome = self._append_in(conn, ask)
                conn.execute("COMMIT")
                return outcome
            except sqlite3.Error as exc:
                self._rollback(conn)
                if not _is_busy(exc):
                    raise
                if time.monotonic() > give_up:
                    raise _locked(self.path, ask.lock_timeout) from exc
                time.sleep(0.01)

    # --- sessions ---------------------------------------------------------------------------
    def set_session_status(
        self, session_id: str, status: str, expected: frozenset[str] | None = None
    ) -> bool:
        """Set the status (compare-and-set when ``expected`` is given); True if changed."""

        def work(conn: sqlite3.Connection) -> bool:
            row = conn.execute(SQL["session_status_get"], (session_id,)).fetchone()
            if row is None or (expected is not None and row[0] not in expected):
                return False
            conn.execute(SQL["session_status"], (status, session_id))
            return True

        return self._write(work)

    # --- backup -----------------------------------------------------------------------------
    def backup(self, destination: str | os.PathLike[str]) -> int:
        """Copy the database, consistent as of one moment, to a new file; return its size (``backup_to``)."""
        return backup_to(self._connection, self.path, destination)

    def database_bytes(self) -> int:
        """Bytes the database takes on disk: its file, its WAL and its shared-memory file."""
        files = (self.path, f"{self.path}-wal", f"{self.path}-shm")
        return sum(os.path.getsize(name) for name in files if os.path.isfile(name))

    def close(self) -> None:
        """Close every pooled connection (connections on loan close when returned).

        While the files are sealed the readers' lock is held until the last one
        closed, so none checkpoints into the mapped ``-shm`` (decisions/0046).
        """
        self.wal_room.close()  # before the connections: the last one's close deletes the log
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
            release, self._queue_released = not self._queue_released, True
            for conn in idle:
                _close(conn)
            if not self._lent and not self._draining:
                self._files.release_readers()
        if release:
            release_writer_queue(self.path)


if TYPE_CHECKING:

    def _conforms(store: SqliteStore) -> Store:
        """Let mypy prove that ``SqliteStore`` implements the ``Store`` protocol."""
        return store

    def _local(store: SqliteStore) -> LocalCalls:
        """Let mypy prove that ``SqliteStore`` has the ``LocalCalls`` capability."""
        return store


__all__ = ["SqliteStore", "add_quota_function", "driver_error", "parse_url"]
