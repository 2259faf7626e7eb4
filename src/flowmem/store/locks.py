"""In-process serialization per buffer address with a bounded wait (MEM-12).

It also holds the *no-wait* mode: inside ``no_wait()`` a store call that would
have to wait for a lock raises ``WouldBlock`` instead, before it changed
anything. The HTTP app runs short store calls on its event loop that way and
gives a call that would wait to a worker thread (``flowmem.api.pool``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

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


class AddressLocks:
    """One lock per address; waiting is bounded and a timeout never fails the caller."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Address, threading.Lock] = {}

    def _lock_for(self, address: Address) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(address)
            if lock is None:
                lock = self._locks[address] = threading.Lock()
            return lock

    @contextmanager
    def hold(self, address: Address, timeout: float) -> Iterator[bool]:
        """Serialize on ``address`` for at most ``timeout`` seconds; yield whether it was taken.

        Implements MEM-12: past the bound the block runs unserialized after one
        WARNING; a lock taken is always released, also when the block raises.
        Inside ``no_wait()`` a lock held by another thread raises ``WouldBlock``.
        """
        lock = self._lock_for(address)
        if not waiting_allowed():
            if not lock.acquire(blocking=False):
                raise WouldBlock(f"{address.scope}/{address.scope_id}/{address.key} is locked")
            taken = True
        else:
            taken = lock.acquire(timeout=max(timeout, 0.0))
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
