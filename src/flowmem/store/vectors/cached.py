"""``SqlVectors.nearest``: the exact scan scored from a snapshot this process keeps (cache.py).

A search reads the collection's generation and spaces, takes the scope's snapshot
made at that generation in that space, or loads one (every vector of the scope with
its record's value and expiry, a page of at most ``SCAN_BYTES`` at a time), and scores
it (``scoring.rank_snapshot``). A load is kept when the generation read after it is
the one read before; a scope past the cache's bound is not loaded again before its
generation changes, and its searches go page by page (None: the caller's scan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from flowmem.store.base import Address
from flowmem.store.rows import check_address, prefix_end
from flowmem.store.vectors import ACTIVE, SCAN_BYTES, Space, Spaces, check_space, mismatch
from flowmem.store.vectors.cache import RECORD_OVERHEAD, CacheKey, Snapshot, SnapshotCache


class SqlVectors(Protocol):
    """What the snapshot needs of ``sql.SqlVectors`` (a protocol: sql.py imports this module back)."""

    cache: SnapshotCache
    store: Any
    binary: dict[str, Any]

    def statement(self, name: str) -> str:
        """The backend's statement ``name``."""
        ...

    def read_spaces(self, conn: Any, collection: str) -> tuple[Spaces, dict[str, int]]:
        """The collection's spaces and their ids."""
        ...

    def prepare_read(self, conn: Any) -> None:
        """Set up ``conn`` for a read of many vectors."""
        ...

Ranked = tuple[str, float, "str | None"]


def generation(vectors: SqlVectors, conn: Any, collection: str) -> int:
    """The collection's generation (0 before its first space)."""
    row = conn.execute(vectors.statement("vectors_generation"), (collection,)).fetchone()
    return 0 if row is None else int(row[0])


def nearest(
    vectors: SqlVectors,
    scope: str,
    scope_id: str,
    prefix: str,
    now: float,
    collection: str,
    space: Space,
    query: Sequence[float],
    distance: str,
    keep: int,
    accept: Callable[[str, str | None], bool] | None,
) -> tuple[list[Ranked], int] | None:
    """The best ``keep`` live records under ``prefix`` and how many were scored; None when not cached."""
    check_address(Address(scope, scope_id, prefix or "_"))
    check_space(space)
    cache = vectors.cache
    if cache.limit <= 0:
        return None
    key: CacheKey = (collection, scope, scope_id, prefix)
    with vectors.store.connection() as conn:
        seen = generation(vectors, conn, collection)
        spaces, ids = vectors.read_spaces(conn, collection)
    if spaces.active is None:
        return [], 0
    if spaces.active != space:
        raise mismatch(collection, spaces.active, space, "search")
    cache.forget_before(collection, seen)
    snapshot = cache.get(key, seen, ids[ACTIVE])
    if snapshot is None:
        if not cache.fits(key, seen):
            return None
        snapshot = load(vectors, key, seen, ids[ACTIVE], space, cache.limit)
        if snapshot is None:
            cache.too_big(key, seen)
            return None
        with vectors.store.connection() as conn:
            if generation(vectors, conn, collection) == seen:  # nothing committed while it loaded
                cache.put(key, snapshot)
    from flowmem.store.vectors.scoring import rank_snapshot  # numpy: only a search needs it

    return rank_snapshot(snapshot, query, distance, keep, now, accept)


def load(
    vectors: SqlVectors, key: CacheKey, seen: int, space_id: int, space: Space, bound: int
) -> Snapshot | None:
    """Every vector of the scope under the prefix with its record's value and expiry; None past ``bound`` bytes."""
    _, scope, scope_id, prefix = key
    limit = max(1, SCAN_BYTES // (space.dims * 4))
    end = prefix_end(prefix)
    snapshot = Snapshot(seen, space_id, space.dims, [], [], [], [], [])
    held, rows_read, lower = 0, 0, prefix
    with vectors.store.connection() as conn:
        vectors.prepare_read(conn)
        while True:
            bounds = (lower,) if end is None else (lower, end)
            params = (scope, scope_id, *bounds, space_id, limit)
            name = "vectors_load_open" if end is None else "vectors_load"
            rows = conn.execute(vectors.statement(name), params, **vectors.binary).fetchall()
            full = len(rows) == limit
            kept = rows
            if full:
                last = rows[-1][0]
                cut = len(rows)
                while cut and rows[cut - 1][0] == last:
                    cut -= 1
                if cut == 0:  # one record with more vectors than a page: read it whole
                    limit *= 2
                    continue
                kept = rows[:cut]
            for record_key, text, expires_at, _ in kept:
                if not snapshot.keys or snapshot.keys[-1] != record_key:
                    snapshot.keys.append(record_key)
                    snapshot.texts.append(text)
                    snapshot.expires.append(None if expires_at is None else float(expires_at))
                    snapshot.starts.append(rows_read)
                    held += RECORD_OVERHEAD + len(record_key) + (len(text) if text is not None else 0)
                rows_read += 1
            snapshot.blocks.append(b"".join(row[3] for row in kept))
            if held + 4 * space.dims * rows_read + 8 * rows_read > bound:
                return None
            if not full:
                return snapshot
            lower = kept[-1][0] + "\x01"  # the smallest key after it (keys hold no NUL)


__all__ = ["generation", "load", "nearest"]
