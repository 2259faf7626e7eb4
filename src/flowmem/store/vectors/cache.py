"""A process-local cache of a scope's vectors, checked by its collection's generation (issue 40).

The exact scan reads every vector of a scope from the database at each search; a
``Snapshot`` keeps what such a read found (each record's key, value text and expiry,
its vectors as one float32 matrix) so that the next search scores it without reading
the vectors again. It is a speed trick behind one seam (``SqlVectors.nearest``), and
answers as the scan does (``tests/store/vectors/test_cache.py``):

- **Never stale.** Each collection has a *generation* (``vector_generations``), bumped
  by triggers in every transaction that changes what a scan reads: a vector written or
  deleted (a put, a delete, a purge, an erasure, a re-embedding), a space added,
  dropped or promoted, a record with vectors given another expiry. A search reads the
  generation and the spaces (two small reads), and uses a snapshot only when both are
  the ones it was made at; another process's write is seen the same way as this one's.
  A snapshot is kept only when the generation read before and after loading it is the
  same (nothing committed in between). A search that finds the generation moved drops
  every older snapshot of the collection, whatever its scope: an erased user's
  vectors and values leave this process's memory at the next search of any scope.
- **Expiry at search time.** A snapshot keeps expired records with their expiry; a
  search drops those expired at its ``now``, as the scan's SQL does.
- **Bounded.** ``FLOWMEM_VECTOR_CACHE_MB`` (default 1,024; 0 turns it off) bounds the
  bytes the snapshots of one store hold (vectors, keys and values); the least recently
  used go first, and a scope larger than the bound is never loaded whole: its searches
  stay page by page (``SCAN_BYTES``).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from flowmem.errors import ConfigurationError

CACHE_ENV = "FLOWMEM_VECTOR_CACHE_MB"
DEFAULT_MB = 1024
RECORD_OVERHEAD = 160  # bytes a record's key, text and expiry entries cost besides their text

CacheKey = tuple[str, str, str, str]  # collection, scope, scope id, key prefix


def limit_from_env(environ: Any = None) -> int:
    """The cache's bound in bytes from ``FLOWMEM_VECTOR_CACHE_MB`` (ConfigurationError when not a number >= 0)."""
    raw = (os.environ if environ is None else environ).get(CACHE_ENV, "")
    if raw.strip() == "":
        return DEFAULT_MB * 2**20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not megabytes >= 0:
        raise ConfigurationError(f"{CACHE_ENV} must be a number of megabytes >= 0 (0: no cache), got {raw!r}")
    return int(megabytes * 2**20)


@dataclass
class Snapshot:
    """A scope's vectors as a scan read them, at one generation of its collection.

    Records in key order: ``keys``, ``texts`` (their value text), ``expires`` (None:
    never); ``starts[i]`` is the first row of record ``i`` in the rows: float32 rows of
    ``dims`` in ``blocks`` (the pages as read, whole rows each: no copy into one buffer),
    a record's rows together. ``memo``: what scoring derives from the rows once (their
    squared norms), kept with them.
    """

    generation: int
    space_id: int
    dims: int
    keys: list[str]
    texts: list[str | None]
    expires: list[float | None]
    starts: list[int]
    blocks: list[bytes]
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """The number of vectors."""
        return sum(len(block) for block in self.blocks) // (4 * self.dims)

    @property
    def nbytes(self) -> int:
        """What the snapshot holds, about: its vectors (and their norms), keys and texts."""
        texts = sum(len(t) for t in self.texts if t is not None) + sum(len(k) for k in self.keys)
        return 4 * self.dims * self.rows + 8 * self.rows + texts + RECORD_OVERHEAD * len(self.keys)


class SnapshotCache:
    """Snapshots by (collection, scope, scope id, prefix), at most ``limit`` bytes, least recently used out first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, tuple[Snapshot, int]] = OrderedDict()  # and its size
        self._too_big: dict[CacheKey, int] = {}  # the generation at which a scope did not fit

    def get(self, key: CacheKey, generation: int, space_id: int) -> Snapshot | None:
        """The snapshot of ``key`` made at ``generation`` in space ``space_id``; None (dropped) for another."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            found = entry[0]
            if found.generation != generation or found.space_id != space_id:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return found

    def forget_before(self, collection: str, generation: int) -> None:
        """Drop the collection's snapshots made before ``generation`` (whatever their scope: an erased user's too)."""
        with self._lock:
            for key in [k for k, (found, _) in self._entries.items() if k[0] == collection and found.generation < generation]:
                self._drop(key)

    def fits(self, key: CacheKey, generation: int) -> bool:
        """False when a load of ``key`` at ``generation`` found it larger than the bound (or there is no cache)."""
        with self._lock:
            return self.limit > 0 and self._too_big.get(key) != generation

    def too_big(self, key: CacheKey, generation: int) -> None:
        """Remember that ``key`` at ``generation`` holds more than the bound (no load again until it changes)."""
        with self._lock:
            self._too_big[key] = generation
            while len(self._too_big) > 1024:
                self._too_big.pop(next(iter(self._too_big)))

    def put(self, key: CacheKey, snapshot: Snapshot) -> bool:
        """Keep ``snapshot`` (older ones out until it fits); False when it alone is past the bound."""
        size = snapshot.nbytes
        with self._lock:
            self._drop(key)
            if size > self.limit:
                return False
            while self._entries and self.held + size > self.limit:
                self._drop(next(iter(self._entries)))
            self._entries[key] = (snapshot, size)
            self.held += size
            return True

    def clear(self) -> None:
        """Forget every snapshot."""
        with self._lock:
            self._entries.clear()
            self._too_big.clear()
            self.held = 0

    def _drop(self, key: CacheKey) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self.held -= found[1]


__all__ = ["CACHE_ENV", "DEFAULT_MB", "CacheKey", "Snapshot", "SnapshotCache", "limit_from_env"]
