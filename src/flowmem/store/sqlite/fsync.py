"""The WAL fsync of one SQLite file, in its two modes (docs/decisions/0006, 0027, 0029).

Both modes commit a write without its own fsync (the connection runs it at
``synchronous=NORMAL``) and make it durable with one ``fdatasync`` of the
write-ahead log that covers many writes. Which mode a write on this thread is in
is held in one thread-local (``_modes``), read on every connection loan.

``DeferredSync`` (the HTTP app's, decision 0027): ``SqliteStore`` composes one. A
write made inside ``DeferredSync.deferring()`` (entered only by
``SqliteStore.deferred()``, the ``LocalCalls`` capability that the HTTP app's store
pool calls by name) commits without its own fsync when the file is ``FULL`` or
``EXTRA`` (and never checkpoints) and is counted here. Such a write is *not* durable
when it returns: it is durable once ``sync`` has reached the ``barrier`` seen after
it. Every other write is durable when it returns. ``sync`` fsyncs the write-ahead
log once for every write counted so far, and every ``CHECKPOINT_EVERY`` deferred
writes runs a passive checkpoint after it (docs/decisions/0006, 0007, 0027).

``SharedSync`` (threads that may wait, decision 0029): a write made inside
``SharedSync.commit()`` gives its turn to the next writer at once; on leaving the
block the thread waits for one fsync of the write-ahead log that began after its
commit. The first thread to wait makes that fsync (the leader); the threads that
committed meanwhile wait for it and share the next one. So an append is on disk when
it returns, exactly as with ``FULL``, but the disk's fsync is no longer made while
the file's write lock is held, and N writers queued behind one another wait for
about one fsync instead of N in a row. Its fsync is ``DeferredSync.sync`` (through
``SqliteStore.sync``). A block whose writes changed nothing (a duplicate append,
decision 0071) waits for no fsync unless another thread is in a block of its own.

A failed fsync (docs/decisions/0019): the writes it covered stay committed and
visible, so they are settled (answered as done), and nothing is deferred or shared
again until a write has synced by itself (``DeferredSync.failed``;
``synced_by_itself`` clears it). ``SharedSync`` logs the failure as an ERROR.
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

# which mode this thread's writes are in: the DeferredSyncs it is deferring for
# (``deferring``) and the SharedSyncs it is inside the commit block of (``sharing``)
_modes = threading.local()


def _active(mode: str) -> set[object]:
    """This thread's set of the syncs in ``mode`` (``deferring`` or ``sharing``)."""
    active: set[object] | None = getattr(_modes, mode, None)
    if active is None:
        active = set()
        setattr(_modes, mode, active)
    return active


def os_error(exc: OSError, what: str) -> StoreError:
    """Return the typed ``StoreError`` of a failed file operation (ENOSPC, EDQUOT, EROFS...)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError(f"{what}: the disk is full: {exc}")
    if exc.errno == errno.EROFS:
        return StoreReadOnlyError(f"{what}: the file system is read-only: {exc}")
    return StoreUnavailableError(f"{what}: {exc}")


class DeferredSync:
    """The deferred writes of one SQLite file: their count, the fsync that covers them, checkpoints."""

    def __init__(self, path: str, synchronous: str) -> None:
        """``path`` is the database file; only a ``FULL`` or ``EXTRA`` file defers (others never fsync)."""
        self.path = path
        self.enabled = synchronous in ("FULL", "EXTRA")
        self.failed = False  # the last fsync failed: defer no write until one syncs by itself
        self._lock = threading.Lock()
        self._written = 0  # deferred writes counted
        self._synced = 0  # of those, known durable (or settled after a failed fsync)
        self._checkpointed = 0  # the count at the last checkpoint ``sync`` made

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """On this thread, let this file's writes wait for ``sync`` instead of fsyncing at commit."""
        active = _active("deferring")
        if self in active:
            yield
            return
        active.add(self)
        try:
            yield
        finally:
            active.discard(self)

    def deferred(self) -> bool:
        """True when a write made now on this thread is deferred (counted, not fsynced at commit)."""
        return self.enabled and self in _active("deferring")

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


class SharedSync:
    """Writers that committed without an fsync share one, leader and followers."""

    def __init__(self, sync: Callable[[], object]) -> None:
        self._sync = sync
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()  # a forked child starts afresh: its parent's leader is not in it
        self._cond = threading.Condition(threading.Lock())
        self._started = 0  # fsyncs begun
        self._done = 0  # fsyncs finished: every commit made before the last begun is durable
        self._leading = False
        self._inside = 0  # threads in a commit block, until their wait is over

    def alone(self) -> bool:
        """True when this thread is the only one in a commit block (no commit is waiting for an fsync)."""
        with self._cond:
            return self._inside == 1 and self in _active("sharing")

    def joined(self) -> bool:
        """True inside ``commit()`` on this thread: a write commits without its own fsync."""
        return self in _active("sharing")

    def changed(self) -> None:
        """Note that a write of this thread's commit block changed the database."""
        _active("changed").add(self)

    def settled(self, alone: bool) -> None:
        """Note whether this thread's latest write in its block commits with its own fsync, alone.

        Nothing such a write reads can be another thread's commit still waiting for an
        fsync (none was in a block then), so the block waits for none unless a write of
        it notes a change; a later write that is not alone unsettles it (decision 0095).
        """
        if alone:
            _active("settled").add(self)
        else:
            _active("settled").discard(self)

    @contextmanager
    def commit(self) -> Iterator[None]:
        """Writes in the block commit without an fsync; on leaving, wait for a shared one.

        Nested blocks are one: only the outermost waits. A block that raises does
        not wait (its write did not commit). A block that changed nothing (``changed``
        never called: a duplicate append) waits for no fsync, unless another thread
        is in a block of its own: its commit, which this one may have read, is not
        yet known to be on disk.
        """
        active = _active("sharing")
        if self in active:
            yield
            return
        if self._pid != os.getpid():
            self._reset()
        active.add(self)
        changed, settled = _active("changed"), _active("settled")
        changed.discard(self)
        settled.discard(self)
        with self._cond:
            self._inside += 1
        try:
            try:
                yield
            finally:
                active.discard(self)
            with self._cond:
                alone = self._inside == 1
            if self in changed or not (alone or self in settled):
                self.wait()
        finally:
            changed.discard(self)
            settled.discard(self)
            with self._cond:
                self._inside -= 1

    def wait(self) -> None:
        """Return once an fsync that began after this call has finished (made here or by another thread)."""
        if self._pid != os.getpid():
            self._reset()
        with self._cond:
            target = self._started + 1  # one in flight may have begun before this commit
            while self._done < target:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                self._started += 1
                mine = self._started
                self._cond.release()
                try:
                    self._lead()
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._done = mine
                    self._cond.notify_all()

    def _lead(self) -> None:
        """Make the shared fsync; a failure is logged, not raised (the writes committed)."""
        try:
            self._sync()
        except StoreError as exc:
            log.error(
                "fsync of committed writes failed (%s): those writes are visible and were "
                "answered as done, but may not survive a power loss; later writes sync "
                "with their own commit until the disk takes them again",
                exc,
            )


__all__ = ["AUTO_CHECKPOINT", "CHECKPOINT_EVERY", "DeferredSync", "SharedSync", "os_error"]
