"""In-process serialization per buffer address with a bounded wait (MEM-12)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from flowmem.store.base import Address

log = logging.getLogger("flowmem")


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
        """
        lock = self._lock_for(address)
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
