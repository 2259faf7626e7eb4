"""The snapshots ``SqlVectors.nearest`` scores (cache.py): a collection's generation, a scope's load.

``load`` reads every vector of a scope with its record's value and expiry, a page of
at most ``SCAN_BYTES`` at a time; ``generation`` tells whether anything was committed
to the collection since (``SqlVectors.nearest`` keeps a load only when nothing was).
"""

from __future__ import annotations

from typing import Any, Protocol

from flowmem.store.rows import prefix_end
from flowmem.store.vectors import SCAN_BYTES, Space, Spaces
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


def generation(vectors: SqlVectors, conn: Any, collection: str) -> int:
    """The collection's generation (0 before its first space)."""
    row = conn.execute(vectors.statement("vectors_generation"), (collection,)).fetchone()
    return 0 if row is None else int(row[0])


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


__all__ = ["generation", "load"]
