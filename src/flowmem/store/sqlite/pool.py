"""``SqlitePool``: ``SqliteStore``'s pool of connections and their generations.

A base of ``flowmem.store.sqlite.store.SqliteStore``, which holds the state declared
here: opening a connection (WAL, the quota function; its loan sets ``synchronous``),
lending and giving it back, and retiring every connection of a generation when the
files are sealed or writable again (decisions/0046), plus the pragmas a loan sets.
The loan itself (``SqliteStore._connection``) stays with the store.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from functools import partial

from flowmem.errors import StoreError, StoreReadOnlyError, StoreUnavailableError
from flowmem.store.base import DEFAULT_LOCK_TIMEOUT, Quotas
from flowmem.store.locks import WouldBlock, waiting_allowed
from flowmem.store.sqlite.driver import _close, _Connection, add_quota_function
from flowmem.store.sqlite.fileguard import FileGuard

log = logging.getLogger("flowmem")

Mode = tuple[int, str, int]
"""A loan's pragmas: ``busy_timeout`` (ms), ``synchronous``, ``wal_autocheckpoint`` (``SqlitePool._mode_of``)."""

MODE_POOL = 3
"""A loan in a mode no idle connection is in opens a new one while the pool holds fewer (decision 0186)."""


def _quotas_of(current: weakref.WeakMethod[Callable[[], Quotas]]) -> Quotas:
    """The quotas of the pool's store; none once it is gone (a connection holds only a weak reference).

    A strong one would keep every store never closed alive: its connections' quota
    function would hold it (``memory://`` stores in tests, decision 0138).
    """
    found = current()
    return Quotas() if found is None else found()


class SqlitePool:
    """Connections to one SQLite file: a pool per generation, retired when the files change."""

    path: str
    synchronous: str
    _quotas: Quotas
    _closed: bool
    _idle: list[sqlite3.Connection]
    _pool_lock: threading.Lock
    _drained: threading.Condition  # a retirement's last loan came back
    _files: FileGuard
    _sealed: str | None  # while it names a file, the store takes only reads
    _generation: int
    _lent: int  # connections of this generation on loan
    _draining: int  # connections of an earlier generation on loan
    lends_by_mode: bool = True
    """The seam of decision 0186: lend an idle connection already in the loan's mode (or a new one
    while the pool is small) so its pragmas need no change; False: the plain path, the last one given back."""

    def _connect(self) -> sqlite3.Connection:
        """A new connection in WAL mode with the default wait; its loan sets its ``synchronous`` (``_sync_mode``)."""
        conn = sqlite3.connect(
            self.path,
            timeout=DEFAULT_LOCK_TIMEOUT,
            isolation_level=None,
            check_same_thread=False,
            factory=_Connection,
        )
        self._busy_timeout(conn, DEFAULT_LOCK_TIMEOUT)
        add_quota_function(conn, partial(_quotas_of, weakref.WeakMethod(self._current_quotas)))
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            conn.close()
            raise StoreError(f"cannot put {self.path} in WAL mode (got {mode!r})")
        return conn

    def _current_quotas(self) -> Quotas:
        return self._quotas

    def _watch_files(self, sealed: str | None) -> None:
        """Before a loan: act on ``-shm`` found sealed (or writable again), or wait for a retirement.

        Sealed, the store takes only reads: its connections close (under the readers'
        lock, so the last one does not checkpoint into the mapped ``-shm``) and new
        ones open it read-only. Writable again, they close and reopen read-write.
        Connections still on loan close when they come back; no new one opens before.
        """
        with self._pool_lock:
            if (sealed is None) != (self._sealed is None):
                self._retire(sealed)
            if not self._draining:
                return
            if not waiting_allowed():
                raise WouldBlock(f"connections to {self.path} are being reopened")
            deadline = time.monotonic() + DEFAULT_LOCK_TIMEOUT
            while self._draining:
                if not self._drained.wait(max(deadline - time.monotonic(), 0.0)):
                    raise StoreUnavailableError(
                        f"{self.path}: connections opened before its files changed are still in use"
                    )

    def _retire(self, sealed: str | None) -> None:
        """Start a new generation of connections (the pool lock held); close the idle ones."""
        if sealed is not None and not self._files.hold_readers():
            raise StoreReadOnlyError(f"{sealed} is immutable or append-only; retrying")
        self._sealed = sealed
        self._generation += 1
        self._draining += self._lent
        self._lent = 0
        idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)
        if sealed is not None:
            log.warning(
                "%s is immutable or append-only: %s takes only reads until it is writable again",
                sealed,
                self.path,
            )
        else:
            log.warning("the files of %s are writable again: it takes writes", self.path)
        self._settled()

    def _settled(self) -> None:
        """Once no connection of an earlier generation is open (the pool lock held)."""
        if self._draining:
            return
        if self._sealed is None:
            self._files.release_readers()

    def _give_back(self, conn: sqlite3.Connection | None, generation: int) -> None:
        """Return a loaned connection to the pool, or close it (closed store, earlier generation)."""
        with self._pool_lock:
            current = generation == self._generation
            if current:
                self._lent -= 1
                if conn is not None and not self._closed:
                    self._idle.append(conn)
                    return
            if conn is not None:
                _close(conn)  # under the readers' lock when sealed: no checkpoint
            if not current:
                self._draining -= 1
                self._settled()
                self._drained.notify_all()
            if self._closed and not self._lent and not self._draining:
                self._files.release_readers()

    def _take_idle(self, mode: Mode) -> sqlite3.Connection | None:
        """An idle connection for a loan in ``mode`` (the pool lock held), popped; None: open a new one.

        Plain: the last one given back. By mode (``lends_by_mode``): the last one given back
        in ``mode``; when none is, a new one while the pool holds fewer than ``MODE_POOL``
        connections, else the last one given back (its pragmas are set again, as plain).
        The pragmas a loan runs with are the same either way; only how many statements set them.
        """
        idle = self._idle
        if not idle:
            return None
        if self.lends_by_mode:
            for at in range(len(idle) - 1, -1, -1):
                if _mode_of(idle[at]) == mode:
                    return idle.pop(at)
            if self._lent + len(idle) < MODE_POOL:
                return None
        return idle.pop()

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    @staticmethod
    def _pragma(conn: sqlite3.Connection, name: str, value: int | str) -> None:
        """Set ``PRAGMA name = value`` on ``conn``, only when it changes (a pooled connection remembers)."""
        known = conn.pragmas if isinstance(conn, _Connection) else {}
        if known.get(name) != value:
            conn.execute(f"PRAGMA {name} = {value}")
            known[name] = value

    @classmethod
    def _busy_timeout(cls, conn: sqlite3.Connection, seconds: float) -> None:
        """Set how long SQLite waits for a lock on ``conn`` (0 in no-wait mode)."""
        cls._pragma(conn, "busy_timeout", max(int(seconds * 1000), 0) if waiting_allowed() else 0)


def _mode_of(conn: sqlite3.Connection) -> tuple[int | str | None, ...] | None:
    """The mode a pooled connection's pragmas were last set to (None where one is unknown)."""
    if not isinstance(conn, _Connection):
        return None
    known = conn.pragmas
    return known.get("busy_timeout"), known.get("synchronous"), known.get("wal_autocheckpoint")


__all__ = ["MODE_POOL", "Mode", "SqlitePool"]
