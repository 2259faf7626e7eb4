"""Bounded caches of recent lookups (tokens, sessions) a worker reuses for a short time (decision 0034)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from flowmem.errors import ConfigurationError

K = TypeVar("K")
V = TypeVar("V")

TOKEN_CACHE_TTL = 2.0  # seconds a worker answers memory reads from a token it looked up
TOKEN_CACHE_SIZE = 10_000  # tokens a worker remembers at most (the oldest go first)
SESSION_CACHE_TTL = 60.0  # seconds a worker reuses a session a guarded write looked up
SESSION_CACHE_SIZE = 10_000


class LookupCache(Generic[K, V]):
    """A bounded map of recent lookups: an entry expires ``ttl`` seconds after it was stored.

    ``ttl`` <= 0 turns the cache off. At most ``size`` entries: storing one more
    drops the oldest. ``clear`` starts a new generation: a lookup that began
    before it (``generation`` read before the lookup, passed to ``put``) is not
    stored, so nothing read before a clear is served after it. Thread-safe.
    """

    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        """Remember up to ``size`` entries for ``ttl`` seconds of ``clock``."""
        if isinstance(ttl, bool) or not math.isfinite(ttl) or ttl < 0:
            # a NaN would never expire: every comparison with it is false
            raise ConfigurationError(f"a lookup cache's ttl must be seconds >= 0, got {ttl!r}")
        self.ttl, self.size, self.clock = ttl, size, clock
        self.generation = 0
        self._entries: dict[K, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value stored under ``key`` if it has not expired, else None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.clock() >= entry[0]:
            self.drop(key)
            return None
        return entry[1]

    def put(self, key: K, value: V, since: int) -> None:
        """Store ``value`` under ``key``, unless ``clear`` ran after generation ``since``."""
        if self.ttl <= 0:
            return
        with self._lock:
            if since != self.generation:
                return
            entries = self._entries
            entries.pop(key, None)
            while len(entries) >= self.size:
                del entries[next(iter(entries))]
            entries[key] = (self.clock() + self.ttl, value)

    def drop(self, key: K) -> None:
        """Forget ``key``."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget everything, including what lookups already running would store."""
        with self._lock:
            self.generation += 1
            self._entries.clear()
