"""The writers of one SQLite file take turns in arrival order (docs/decisions/0026).

``WriterQueue`` queues them fairly inside a process (``FairLock``) and across
processes (a ticket queue of POSIX byte-range locks on the sidecar file
``<database>-writers``), so no writer polls SQLite's lock.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

try:
    import fcntl
except ImportError:  # not POSIX: writers of other processes wait in SQLite's busy handler
    fcntl = None  # type: ignore[assignment]

from flowmem.store.locks import FairLock, WouldBlock, waiting_allowed

log = logging.getLogger("flowmem")


TICKET_SLOTS = 4096  # queue places on the sidecar file; more than writers that can wait at once
_SLOT_BASE = 8  # byte 0..7: the next ticket; then one byte per place
_PRESENT = 1  # every process with the queue open holds a shared lock on this byte
# ``struct flock`` for F_GETLK where its layout is known (Linux: type, whence, start,
# len, pid, padded to 32 bytes); elsewhere no process counts as alone
_FLOCK = "hhqqi4x" if sys.platform.startswith("linux") and struct.calcsize("q") == 8 else None


class _FileTickets:
    """A FIFO queue of the processes writing one file: a CLH queue of POSIX byte-range locks.

    A process takes ticket ``k`` (the counter at byte 0, under a lock on it), locks
    place ``k`` for as long as it writes, and waits until place ``k - 1`` is free:
    its predecessor finished. The kernel drops a dead process's locks, so a crash
    never blocks the queue. POSIX locks belong to the process, so only one thread
    per process is in the queue at a time (``WriterQueue``'s ``FairLock`` first).
    """

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        self._present = False
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_SH, 1, _PRESENT)
            self._present = True
        except OSError:  # then ``alone`` never says so: every write queues
            pass

    def alone(self) -> bool:
        """True when no other process has this queue open (one ``F_GETLK``; False when unknown).

        Each process holds a shared lock on byte ``_PRESENT`` while its queue is open;
        the kernel reports a conflicting lock of another process only. A process
        that arrives after the answer queues behind nobody for its first write,
        which then waits on the database's own lock (decision 0072).
        """
        if not self._present or _FLOCK is None:
            return False
        probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, _PRESENT, 1, 0)
        try:
            found = fcntl.fcntl(self.fd, fcntl.F_GETLK, probe)
        except OSError:
            return False
        return bool(struct.unpack(_FLOCK, found)[0] == fcntl.F_UNLCK)

    def _lock(self, start: int, wait: bool = True) -> bool:
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB, 1, start)
        except (BlockingIOError, PermissionError):
            return False
        return True

    def _unlock(self, start: int) -> None:
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, start)

    def enter(self, timeout: float, blocking: bool = True) -> int | None:
        """Queue and wait (at most ``timeout``) for the predecessor; the place held, or None.

        ``blocking=False`` enters only when nobody is ahead (None otherwise, nothing
        changed). After a timeout the process leaves the queue: its successor waits
        on the place it held and is let go at once.
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        place: int | None = None
        self._lock(0)  # the counter's lock: held for a few system calls
        try:
            raw = os.pread(self.fd, 8, 0)
            ticket = int.from_bytes(raw, "little") if len(raw) == 8 else 0
            place = _SLOT_BASE + ticket % TICKET_SLOTS
            ahead = _SLOT_BASE + (ticket - 1) % TICKET_SLOTS
            self._lock(place)  # free: its last owner was TICKET_SLOTS tickets ago
            first = self._lock(ahead, wait=False)
            if not first and not blocking:
                self._unlock(place)
                return None
            os.pwrite(self.fd, (ticket + 1).to_bytes(8, "little"), 0)
        except BaseException:
            if place is not None:
                with suppress(OSError):
                    self._unlock(place)
            raise
        finally:
            self._unlock(0)
        if not first and not self._wait_for(ahead, deadline):
            self._unlock(place)
            return None
        self._unlock(ahead)
        return place

    def _wait_for(self, ahead: int, deadline: float) -> bool:
        """Wait until the predecessor's place is free (this process then holds it); False past ``deadline``.

        The kernel's blocking wait (``F_SETLKW``) wakes the waiter as soon as the
        predecessor lets go, but cannot time out, so a helper thread makes it and
        this one waits on an event with the bound. A helper whose waiter gave up
        lets the place go as soon as it gets it.
        """
        got = threading.Event()
        guard = threading.Lock()
        gave_up = False

        def wait() -> None:
            with suppress(OSError):  # EDEADLK, say: the database's own lock still serializes
                self._lock(ahead)
            with guard:
                if gave_up:
                    with suppress(OSError):
                        self._unlock(ahead)
                    return
                got.set()

        threading.Thread(target=wait, name="flowmem-writer-queue", daemon=True).start()
        if got.wait(max(deadline - time.monotonic(), 0.0)):
            return True
        with guard:
            if got.is_set():
                return True
            gave_up = True
            return False

    def leave(self, place: int) -> None:
        """Let the successor go."""
        self._unlock(place)

    def close(self) -> None:
        """Close the sidecar file (drops every lock this process holds on it)."""
        os.close(self.fd)


class WriterQueue:
    """The writers of one database file in this process, served fairly in arrival order.

    Threads queue on a ``FairLock``; its holder queues with the other processes on
    the sidecar file ``<database>-writers`` (when the file system allows one; without
    it, other processes are left to the database's own lock), unless no other
    process has the queue open (``_FileTickets.alone``: one system call instead of
    eight, decision 0072). Re-entrant per thread.
    """

    def __init__(self, sidecar: str | None) -> None:
        self._lock = FairLock()
        self._owner: int | None = None
        self._solo = False  # the holder's process was alone on the file when it took its turn
        self.tickets: _FileTickets | None = None
        if sidecar is not None and fcntl is not None:
            try:
                self.tickets = _FileTickets(sidecar)
            except OSError as exc:
                log.info("no writer queue beside the database (%s): %s", sidecar, exc)

    def held_alone(self) -> bool:
        """True when this thread holds the turn and no other process had the file open then."""
        return self._owner == threading.get_ident() and self._solo

    @contextmanager
    def hold(self, timeout: float) -> Iterator[bool]:
        """Wait for this file's turn at most ``timeout`` seconds; yield whether it was taken.

        Inside ``no_wait()`` a writer ahead (in process or another) raises
        ``WouldBlock`` and nothing changes. A turn taken is always given back,
        also when the block raises. The caller decides what a timeout means (MEM-12).
        """
        me = threading.get_ident()
        if self._owner == me:
            yield True
            return
        blocking = waiting_allowed()
        started = time.monotonic()
        if not self._lock.acquire(timeout, blocking):
            if not blocking:
                raise WouldBlock("another writer of this file is ahead")
            yield False
            return
        place: int | None = None
        solo = self.tickets is not None and self.tickets.alone()
        queued = self.tickets is not None and not solo
        try:
            if queued and self.tickets is not None:
                try:
                    place = self.tickets.enter(timeout - (time.monotonic() - started), blocking)
                except OSError as exc:  # the queue is only for fairness: the database still locks
                    log.warning("writer queue unavailable, writing without it: %s", exc)
                    place = -1
                if place is None and not blocking:
                    raise WouldBlock("a writer of another process is ahead")
            self._owner = me
            self._solo = solo
            try:
                yield not queued or place is not None
            finally:
                self._owner = None
                self._solo = False
        finally:
            if place is not None and place >= 0 and self.tickets is not None:
                with suppress(OSError):
                    self.tickets.leave(place)
            self._lock.release()


# the queue of each database file, with how many stores use it; per process (a forked
# child neither holds its parent's POSIX locks nor may share its in-process lock)
_queues: dict[tuple[int, str], tuple[WriterQueue, int]] = {}
_queues_guard = threading.Lock()


def writer_queue(database: str) -> WriterQueue:
    """The process's one ``WriterQueue`` of a database file (shared by every store on it)."""
    key = (os.getpid(), os.path.realpath(database))
    with _queues_guard:
        queue, users = _queues.get(key, (None, 0))
        if queue is None:
            queue = WriterQueue(f"{database}-writers")
        _queues[key] = (queue, users + 1)
        return queue


def release_writer_queue(database: str) -> None:
    """A store on ``database`` closed: close its queue when no other store uses it."""
    key = (os.getpid(), os.path.realpath(database))
    with _queues_guard:
        queue, users = _queues.get(key, (None, 0))
        if queue is None:
            return
        if users > 1:
            _queues[key] = (queue, users - 1)
            return
        del _queues[key]
    if queue.tickets is not None:
        with suppress(OSError):
            queue.tickets.close()


__all__ = ["WriterQueue", "release_writer_queue", "writer_queue"]
