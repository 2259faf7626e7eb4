"""Group commit for one SQLite file: deferred writes, the WAL fsync that makes them durable.

``SqliteStore`` composes one ``GroupCommit``. A write made inside
``GroupCommit.deferring()`` (entered only by ``SqliteStore.deferred()``, the
``LocalCalls`` capability that the HTTP app's store pool calls by name) commits
without its own fsync when the file is ``FULL`` or ``EXTRA`` (the connection runs
that write at ``synchronous=NORMAL`` and never checkpoints) and is counted here.
Such a write is *not* durable when it returns: it is durable once ``sync`` has
reached the ``barrier`` seen after it. Every other write is durable when it
returns (SQLite's own fsync at commit). ``sync`` fsyncs the write-ahead log once
for every write counted so far, and every ``CHECKPOINT_EVERY`` deferred writes runs
a passive checkpoint after it (docs/decisions/0006, 0007, 0027).

A failed fsync (docs/decisions/0019): the writes it covered stay committed and
visible, so they are settled (answered as done), and nothing is deferred again
until a write has synced by itself (``failed``; ``synced_by_itself`` clears it).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flowmem.errors import StoreError, StoreFullError, StoreReadOnlyError, StoreUnavailableError

log = logging.getLogger("flowmem")

AUTO_CHECKPOINT = 1000  # SQLite's default: a commit checkpoints once the log has this many pages
CHECKPOINT_EVERY = 256  # deferred writes between two checkpoints made by ``sync`` (about as often)


def os_error(exc: OSError, what: str) -> StoreError:
    """Return the typed ``StoreError`` of a failed file operation (ENOSPC, EDQUOT, EROFS...)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError(f"{what}: the disk is full: {exc}")
    if exc.errno == errno.EROFS:
        return StoreReadOnlyError(f"{what}: the file system is read-only: {exc}")
    return StoreUnavailableError(f"{what}: {exc}")


class GroupCommit:
    """The deferred writes of one SQLite file: their count, the fsync that covers them, checkpoints."""

    def __init__(self, path: str, synchronous: str) -> None:
        """``path`` is the database file; only a ``FULL`` or ``EXTRA`` file defers (others never fsync)."""
        self.path = path
        self.enabled = synchronous in ("FULL", "EXTRA")
        self.failed = False  # the last fsync failed: defer no write until one syncs by itself
        self._lock = threading.Lock()
        self._mode = threading.local()
        self._written = 0  # deferred writes counted
        self._synced = 0  # of those, known durable (or settled after a failed fsync)
        self._checkpointed = 0  # the count at the last checkpoint ``sync`` made

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """On this thread, let this file's writes wait for ``sync`` instead of fsyncing at commit."""
        previous = getattr(self._mode, "on", False)
        self._mode.on = True
        try:
            yield
        finally:
            self._mode.on = previous

    def deferred(self) -> bool:
        """True when a write made now on this thread is deferred (counted, not fsynced at commit)."""
        return self.enabled and getattr(self._mode, "on", False)

    def wrote(self) -> None:
        """Count one deferred write (committed, or rolled back, without an fsync)."""
        with self._lock:
            self._written += 1

    def synced_by_itself(self) -> None:
        """A write committed with SQLite's own fsync: the disk takes writes, defer again."""
        self.failed = False

    def barrier(self) -> int | None:
        """The count of deferred writes a response must wait to be synced; None when all are."""
        with self._lock:
            return self._written if self._written > self._synced else None

    def sync(self, checkpoint: Callable[[], object]) -> int:
        """Fsync the write-ahead log (blocking); return the count of writes now durable.

        A write-ahead log that is gone was checkpointed into the database file, which
        SQLite fsyncs after every checkpoint. Every ``CHECKPOINT_EVERY`` deferred
        writes, ``checkpoint`` runs after the fsync (SQLite copies and fsyncs with
        the GIL released; a passive checkpoint never waits). A failed checkpoint is
        logged and retried at the next due one: the writes are durable already.

        A failed fsync raises a typed ``StoreError`` and settles the writes counted
        so far: they are committed and visible, so they are answered as done
        (docs/decisions/0019), and ``failed`` stops deferring until a write syncs.
        """
        with self._lock:
            upto = self._written
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._failure(exc, upto) from exc
        else:
            try:
                os.fdatasync(fd)  # what SQLite itself uses for the WAL
            except OSError as exc:
                raise self._failure(exc, upto) from exc
            finally:
                os.close(fd)
        with self._lock:
            self._synced = max(self._synced, upto)
            due = upto - self._checkpointed >= CHECKPOINT_EVERY
            if due:
                self._checkpointed = upto
        if due:
            try:
                checkpoint()
            except StoreError as exc:  # the writes are durable already; the next one retries
                log.warning("checkpoint of %s failed (the WAL keeps growing): %s", self.path, exc)
        return upto

    def _failure(self, exc: OSError, upto: int) -> StoreError:
        """Settle the writes up to ``upto`` after a failed fsync, stop deferring; the error to raise."""
        with self._lock:
            self._synced = max(self._synced, upto)
            self.failed = True
        return os_error(exc, f"cannot sync {self.path}-wal")
