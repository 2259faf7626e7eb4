"""Group commit for the threads of one process writing one SQLite file (docs/decisions/0029).

A write made inside ``CommitGroup.commit()`` commits without its own fsync (the
store runs it at ``synchronous=NORMAL``) and gives its turn to the next writer at
once; on leaving the block the thread waits for one fsync of the write-ahead log
that began after its commit. The first thread to wait makes that fsync (the
leader); the threads that committed meanwhile wait for it and share the next one.
So an append is on disk when it returns, exactly as with ``FULL``, but the disk's
fsync is no longer made while the file's write lock is held, and N writers queued
behind one another wait for about one fsync instead of N in a row.

The fsync itself is the store's (``SqliteStore.sync``: an ``fdatasync`` of the
WAL, the one the HTTP app's group commit uses). If it fails, the writes are
committed and visible, so they are answered as done and the failure is logged as
an ERROR (docs/decisions/0019); the store then stops grouping until a write has
synced by itself.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from flowmem.errors import StoreError

log = logging.getLogger("flowmem")


class CommitGroup:
    """Writers that committed without an fsync share one, leader and followers."""

    def __init__(self, sync: Callable[[], object]) -> None:
        self._sync = sync
        self._member = threading.local()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()  # a forked child starts afresh: its parent's leader is not in it
        self._cond = threading.Condition(threading.Lock())
        self._started = 0  # fsyncs begun
        self._done = 0  # fsyncs finished: every commit made before the last begun is durable
        self._leading = False

    def joined(self) -> bool:
        """True inside ``commit()`` on this thread: a write commits without its own fsync."""
        return getattr(self._member, "inside", False)

    @contextmanager
    def commit(self) -> Iterator[None]:
        """Writes in the block commit without an fsync; on leaving, wait for a shared one.

        Nested blocks are one: only the outermost waits. A block that raises does
        not wait (its write did not commit).
        """
        if self.joined():
            yield
            return
        self._member.inside = True
        try:
            yield
        finally:
            self._member.inside = False
        self.wait()

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


__all__ = ["CommitGroup"]
