"""In-process serialization per buffer address with a bounded wait (MEM-12).

``WriterQueue`` queues the writers of one database file fairly, in arrival
order, inside a process (``FairLock``) and across processes (a ticket queue of
POSIX byte-range locks on a sidecar file): docs/decisions/0026.

It also holds the *no-wait* mode: inside ``no_wait()`` a store call that would
have to wait for a lock raises ``WouldBlock`` instead, before it changed
anything. The HTTP app runs short store calls on its event loop that way and
gives a call that would wait to a worker thread (``flowmem.api.fast.pool``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress

try:
    import fcntl
except ImportError:  # not POSIX: writers of other processes wait in SQLite's busy handler
    fcntl = None  # type: ignore[assignment]

from flowmem.store.base import Address

log = logging.getLogger("flowmem")


class WouldBlock(Exception):
    """A store call inside ``no_wait()`` found a lock taken; nothing was changed.

    Deliberately not a ``FlowmemError``: it never reaches a user, the caller runs
    the call again where waiting is allowed.
    """


_mode = threading.local()


@contextmanager
def no_wait() -> Iterator[None]:
    """On this thread, make store calls raise ``WouldBlock`` instead of waiting for a lock."""
    previous = getattr(_mode, "no_wait", False)
    _mode.no_wait = True
    try:
        yield
    finally:
        _mode.no_wait = previous


def waiting_allowed() -> bool:
    """False inside ``no_wait()`` on this thread."""
    return not getattr(_mode, "no_wait", False)


class _AddressEntry:
    """An address's lock and how many threads hold it or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = FairLock()
        self.users = 0


class AddressLocks:
    """One fair lock per address; waiting is bounded and a timeout never fails the caller.

    An address's entry lives only while a thread holds or waits for its lock: the
    last one to leave removes it, so the table holds the addresses in use, not every
    address ever written (issue 14 §3).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Address, _AddressEntry] = {}

    @contextmanager
    def _lock_for(self, address: Address) -> Iterator[FairLock]:
        """The address's lock, kept in the table for the duration of the block."""
        with self._guard:
            entry = self._locks.get(address)
            if entry is None:
                entry = self._locks[address] = _AddressEntry()
            entry.users += 1
        try:
            yield entry.lock
        finally:
            with self._guard:
                entry.users -= 1
                if not entry.users:  # nobody holds or awaits it: a newcomer starts a new one
                    del self._locks[address]

    @contextmanager
    def hold(self, address: Address, timeout: float) -> Iterator[bool]:
        """Serialize on ``address`` for at most ``timeout`` seconds; yield whether it was taken.

        Implements MEM-12: past the bound the block runs unserialized after one
        WARNING; a lock taken is always released, also when the block raises.
        Inside ``no_wait()`` a lock held by another thread raises ``WouldBlock``.
        """
        with self._lock_for(address) as lock:
            if not waiting_allowed():
                if not lock.acquire(0.0, blocking=False):
                    raise WouldBlock(f"{address.scope}/{address.scope_id}/{address.key} is locked")
                taken = True
            else:
                taken = lock.acquire(timeout)
            if not taken:
                log.warning(
                    "append to %s/%s/%s waited %.1fs for its turn; proceeding unserialized",
                    address.scope,
                    address.scope_id,
                    address.key,
                    timeout,
                )
            try:
                yield taken
            finally:
                if taken:
                    lock.release()


class FairLock:
    """A lock handed to its waiters in arrival order (FIFO), with a bounded wait.

    ``release`` gives the lock straight to the oldest waiter, so a thread that
    releases and asks again queues behind everyone already waiting.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._held = False
        self._waiters: deque[threading.Lock] = deque()  # one parked lock per waiter

    def acquire(self, timeout: float, blocking: bool = True) -> bool:
        """Take the lock, waiting at most ``timeout`` seconds behind earlier waiters; True if taken.

        ``blocking=False`` takes it only when it is free and nobody waits.
        """
        with self._guard:
            if not self._held and not self._waiters:
                self._held = True
                return True
            if not blocking:
                return False
            parked = threading.Lock()
            parked.acquire()
            self._waiters.append(parked)
        if parked.acquire(timeout=max(timeout, 0.0)):
            return True  # handed over by ``release``: the lock stayed held
        with self._guard:
            try:
                self._waiters.remove(parked)
            except ValueError:
                return True  # handed over while the wait timed out: it is ours
            return False

    def release(self) -> None:
        """Hand the lock to the oldest waiter, or free it."""
        with self._guard:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False


TICKET_SLOTS = 4096  # queue places on the sidecar file; more than writers that can wait at once
_SLOT_BASE = 8  # byte 0..7: the next ticket; then one byte per place


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
    it, other processes are left to the database's own lock). Re-entrant per thread.
    """

    def __init__(self, sidecar: str | None) -> None:
        self._lock = FairLock()
        self._owner: int | None = None
        self.tickets: _FileTickets | None = None
        if sidecar is not None and fcntl is not None:
            try:
                self.tickets = _FileTickets(sidecar)
            except OSError as exc:
                log.info("no writer queue beside the database (%s): %s", sidecar, exc)

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
        try:
            if self.tickets is not None:
                try:
                    place = self.tickets.enter(timeout - (time.monotonic() - started), blocking)
                except OSError as exc:  # the queue is only for fairness: the database still locks
                    log.warning("writer queue unavailable, writing without it: %s", exc)
                    place = -1
                if place is None and not blocking:
                    raise WouldBlock("a writer of another process is ahead")
            self._owner = me
            try:
                yield self.tickets is None or place is not None
            finally:
                self._owner = None
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
