"""In-process serialization per buffer address with a bounded wait (MEM-12).

``FairLock`` hands a lock to its waiters in arrival order: the per-address locks
are ``FairLock``s, and so is the in-process half of SQLite's writer queue
(``flowmem.store.sqlite.writers``, docs/decisions/0026).

It also holds the *no-wait* mode: inside ``no_wait()`` a store call that would
have to wait for a lock raises ``WouldBlock`` instead, before it changed
anything. The HTTP app runs short store calls on its event loop that way and
gives a call that would wait to a worker thread (``flowmem.api.pool``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from flowmem import metrics
from flowmem.store.base import Address

log = logging.getLogger("flowmem")


class WouldBlock(Exception):
    """A store call inside ``no_wait()`` found a lock taken; nothing was changed.

    Deliberately not a ``FlowmemError``: it never reaches a user, the caller runs
    the call again where waiting is allowed.
    """


class _Mode(threading.local):
    """This thread's mode; the class default answers a thread that never set one."""

    no_wait = False  # found without the AttributeError a missing thread-local raises


_mode = _Mode()


@contextmanager
def no_wait() -> Iterator[None]:
    """On this thread, make store calls raise ``WouldBlock`` instead of waiting for a lock."""
    previous = _mode.no_wait
    _mode.no_wait = True
    try:
        yield
    finally:
        _mode.no_wait = previous


def waiting_allowed() -> bool:
    """False inside ``no_wait()`` on this thread."""
    return not _mode.no_wait


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
            began = time.monotonic()
            if not waiting_allowed():
                if not lock.acquire(0.0, blocking=False):
                    raise WouldBlock(f"{address.scope}/{address.scope_id}/{address.key} is locked")
                taken = True
            else:
                taken = lock.acquire(timeout)
            metrics.lock_waited(time.monotonic() - began, "process")
            if not taken:
                metrics.lock_timed_out("process")
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
