"""``SqlVectors``: the vectors of a SQL store's records (SQLite or PostgreSQL), over its engine.

No SQL text here: each backend's statements are its module's ``SQL`` (``sqlite.py``,
``postgres.py``), run through the engine's ``write`` (one transaction) and
``connection`` (autocommit reads). A put's record and vectors are one transaction;
its space is checked in it, so a switch cannot slip between the check and the write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowmem.errors import ConflictError, InvalidInputError
from flowmem.store.base import Address
from flowmem.store.engine import SqlEngine
from flowmem.store.rows import check_address, prefix_end
from flowmem.store.vectors import (
    ACTIVE,
    NEXT,
    Nearest,
    Pending,
    RecordWrite,
    ScanRow,
    Search,
    Space,
    Spaces,
    SupportsRecordWrites,
    SupportsVectors,
    Vector,
    check_search,
    check_space,
    check_vectors,
    mismatch,
)
from flowmem.store.vectors.cache import CacheKey, SnapshotCache, limit_from_env
from flowmem.store.vectors.cached import generation, load


def _spaces(rows: list[Any]) -> tuple[Spaces, dict[str, int]]:
    found: dict[str, Space] = {}
    ids: dict[str, int] = {}
    for sid, state, name, dims in rows:
        found[str(state)] = Space(str(name), int(dims))
        ids[str(state)] = int(sid)
    return Spaces(found.get(ACTIVE), found.get(NEXT)), ids


def whole_records(rows: list[Any], full: bool, key_of: Any) -> list[Any]:
    """``rows`` without the last record's when the page was cut (``full``) and holds another record."""
    if not full or not rows:
        return rows
    last = key_of(rows[-1])
    cut = len(rows)
    while cut and key_of(rows[cut - 1]) == last:
        cut -= 1
    return rows[:cut] if cut else rows


class SqlVectors(SupportsVectors, SupportsRecordWrites):
    """``SupportsVectors`` over a SQL store's engine and its backend's statements.

    ``collated``: the statements that compare keys ``COLLATE "C"``, used when the
    database's collation (``vectors_collation``, read once) is not C (PostgreSQL).
    ``binary``: read scans in the driver's binary format (psycopg; measured 10 times
    faster for bytea than its hex text).
    """

    def __init__(
        self,
        store: SqlEngine[Any],
        sql: dict[str, str],
        collated: dict[str, str] | None = None,
        binary: bool = False,
    ) -> None:
        self.store = store
        self.sql = sql
        self.collated = collated
        # psycopg: a scan's results in the binary format (bytea as it is, not as hex text)
        self.binary = {"binary": True} if binary else {}
        self._collation_is_c: bool | None = None if collated is not None else True
        self.cache = SnapshotCache(limit_from_env())  # cached.py: this process's snapshots

    def statement(self, name: str) -> str:
        """The text of the named statement for this store."""
        if self._collation_is_c is None:
            with self.store.connection() as conn:
                row = conn.execute(self.sql["vectors_collation"]).fetchone()
            collate, provider = (row[0], row[1]) if row is not None else (None, None)
            self._collation_is_c = provider in (None, "c") and collate in ("C", "POSIX")
        if not self._collation_is_c and self.collated is not None:
            return self.collated[name]
        return self.sql[name]

    def _read_spaces(self, conn: Any, collection: str, name: str) -> tuple[Spaces, dict[str, int]]:
        return _spaces(conn.execute(self.statement(name), (collection,)).fetchall())

    def read_spaces(self, conn: Any, collection: str) -> tuple[Spaces, dict[str, int]]:
        """The collection's spaces and their ids, read on ``conn`` without a lock."""
        return self._read_spaces(conn, collection, "vectors_spaces_read")

    def spaces(self, collection: str) -> Spaces:
        """The collection's active and next spaces."""
        with self.store.connection() as conn:
            return self._read_spaces(conn, collection, "vectors_spaces_read")[0]

    def _bind(self, conn: Any, collection: str, space: Space) -> int:
        """The id of the collection's active space, recorded as ``space`` when none; refused when another."""
        spaces, ids = self._read_spaces(conn, collection, "vectors_spaces")
        if spaces.active is None:
            conn.execute(self.statement("vectors_space_add"), (collection, ACTIVE, space.name, space.dims))
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces")
        if spaces.active != space:
            raise mismatch(collection, spaces.active or space, space, "put")
        return ids[ACTIVE]

    def prepare_write(self) -> None:
        """A hook run before a put or fill writes vectors (``vectors.pgvector``'s copy made ready)."""

    def wrote(self, conn: Any, space_id: int, address: Address, vectors: Sequence[Vector]) -> None:
        """A hook run in the transaction that inserted a record's vectors (``vectors.pgvector``'s copy)."""

    def put(
        self,
        address: Address,
        text: str,
        expires_at: float | None,
        collection: str,
        space: Space,
        vectors: Sequence[Vector],
    ) -> None:
        """Write the record ``text`` and replace its vectors in one transaction (EmbeddingSpaceError first)."""
        self.prepare_write()
        check_address(address)
        check_space(space)
        checked = check_vectors(vectors, space)

        def work(conn: Any) -> None:
            sid = self._bind(conn, collection, space) if checked else 0
            conn.execute(self.store.statements["record_put"], (*address, text, expires_at))
            conn.execute(self.statement("vectors_clear"), tuple(address))
            for vector in checked:
                params = (sid, vector.field, vector.ord, vector.data, *address)
                conn.execute(self.statement("vectors_insert"), params)
            self.wrote(conn, sid, address, checked)

        self.store.write(work)

    def write_records(self, writes: Sequence[RecordWrite], collection: str, space: Space | None) -> None:
        """Apply ``writes`` in order in one transaction, each as ``put``, ``put_record`` or ``delete_record`` would.

        A write with vectors binds ``space`` as ``put`` does (once); every address and
        vector is checked before the transaction begins. All or none.
        """
        checked: list[list[Vector] | None] = []
        for write in writes:
            check_address(write.address)
            if write.vectors is None:
                checked.append(None)
                continue
            if space is None:
                raise InvalidInputError("vectors need the embedding space they are in")
            checked.append(check_vectors(write.vectors, check_space(space)))
        if not writes:
            return
        if any(checked):
            self.prepare_write()
        statements = self.store.statements

        def work(conn: Any) -> None:
            sid: int | None = None
            for write, vectors in zip(writes, checked, strict=True):
                address = tuple(write.address)
                if write.text is None:
                    conn.execute(statements["record_delete"], address)
                    continue
                if vectors and sid is None and space is not None:  # a write with vectors has one
                    sid = self._bind(conn, collection, space)
                conn.execute(statements["record_put"], (*address, write.text, write.expires_at))
                if vectors is None:
                    continue
                conn.execute(self.statement("vectors_clear"), address)
                for vector in vectors:
                    conn.execute(self.statement("vectors_insert"), (sid, vector.field, vector.ord, vector.data, *address))
                self.wrote(conn, sid or 0, write.address, vectors)

        self.store.write(work)

    def _scan(self, search: Search, lower: str, values: bool, limit_bytes: int) -> tuple[list[ScanRow], bool]:
        """One page of the live active-space vectors from key ``lower``, whole records."""
        scope, scope_id, prefix, now, collection, space = search
        limit = max(1, limit_bytes // (space.dims * 4))
        end = prefix_end(prefix)
        with self.store.connection() as conn:
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces_read")
            if spaces.active is None:
                return [], False
            if spaces.active != space:
                raise mismatch(collection, spaces.active, space, "search")
            self.prepare_read(conn)
            while True:
                bounds = (lower,) if end is None else (lower, end)
                params = (values, scope, scope_id, *bounds, ids[ACTIVE], now, limit)
                name = "vectors_scan_open" if end is None else "vectors_scan"
                rows = conn.execute(self.statement(name), params, **self.binary).fetchall()
                kept = whole_records(rows, len(rows) == limit, lambda row: row[0])
                if len(kept) < len(rows) or len(rows) < limit or len({r[0] for r in rows}) > 1:
                    break
                limit *= 2  # one record with more vectors than a page: read it whole
        found = [
            ScanRow(key, text or None, data if isinstance(data, bytes) else bytes(data))
            for key, text, data in kept
        ]
        return found, len(rows) == limit

    def prepare_read(self, conn: Any) -> None:
        """Set up ``conn`` for a read of many vectors (SQLite: map the file; its statement ``vectors_read_setup``)."""
        setup = self.sql.get("vectors_read_setup")
        if setup is not None:
            conn.execute(setup)

    def nearest(self, search: Search, ask: Nearest) -> tuple[list[tuple[str, float, str | None]], int] | None:
        """The exact scan's best ``ask.keep`` records of ``search`` and how many were scored, from this process's cache.

        None when the scope is not cached and cannot be (no cache, larger than its
        bound): the caller scans page by page. ``ask.ann`` is pgvector's (none here).

        A search reads the collection's generation and spaces, takes the scope's
        snapshot made at that generation in that space, or loads one (``cached.load``),
        and scores it (``scoring.rank_snapshot``). A load is kept when the generation
        read after it is the one read before; a scope past the cache's bound is not
        loaded again before its generation changes.
        """
        check_search(search)
        cache = self.cache
        if cache.limit <= 0:
            return None
        scope, scope_id, prefix, now, collection, space = search
        key: CacheKey = (collection, scope, scope_id, prefix)
        with self.store.connection() as conn:
            seen = generation(self, conn, collection)
            spaces, ids = self.read_spaces(conn, collection)
        if spaces.active is None:
            return [], 0
        if spaces.active != space:
            raise mismatch(collection, spaces.active, space, "search")
        cache.forget_before(collection, seen)
        snapshot = cache.get(key, seen, ids[ACTIVE])
        if snapshot is None:
            if not cache.fits(key, seen):
                return None
            snapshot = load(self, key, seen, ids[ACTIVE], space, cache.limit)
            if snapshot is None:
                cache.too_big(key, seen)
                return None
            with self.store.connection() as conn:
                if generation(self, conn, collection) == seen:  # nothing committed while it loaded
                    cache.put(key, snapshot)
        from flowmem.store.vectors.scoring import rank_snapshot  # numpy: only a search needs it

        return rank_snapshot(snapshot, ask, now)

    def begin(self, collection: str, space: Space) -> Spaces:
        """Record ``space`` as the collection's next space (kept when it already is; replaced otherwise)."""
        check_space(space)

        def work(conn: Any) -> Spaces:
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces_locked")
            if spaces.active is None:
                raise InvalidInputError(
                    f"the {collection!r} collection has no vectors yet: nothing to re-embed "
                    "(configure the index with the new space and put items)"
                )
            if spaces.active == space:
                raise InvalidInputError(f"the {collection!r} vectors are in {space} already")
            if spaces.next is not None and spaces.next != space:  # an abandoned move: start again
                conn.execute(self.statement("vectors_drop_space"), (ids[NEXT],))
                conn.execute(self.statement("vectors_space_drop"), (ids[NEXT],))
            if spaces.next != space:
                conn.execute(self.statement("vectors_space_add"), (collection, NEXT, space.name, space.dims))
            return self._read_spaces(conn, collection, "vectors_spaces_read")[0]

        result: Spaces = self.store.write(work)
        return result

    def pending(self, collection: str, after: Address | None, limit: int) -> list[Pending]:
        """Records after ``after`` with active vectors and none in the next space, in address order."""
        cursor = tuple(after) if after is not None else ("", "", "")
        with self.store.connection() as conn:
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces_read")
            if spaces.active is None or spaces.next is None:
                return []
            rows = conn.execute(
                self.statement("vectors_pending"), (ids[ACTIVE], *cursor, ids[NEXT], limit)
            ).fetchall()
        kept = whole_records(rows, len(rows) == limit, lambda row: tuple(row[:3]))
        found: dict[Address, tuple[str, list[tuple[str, int]]]] = {}
        for scope, scope_id, key, field, ord_, text in kept:
            entry = found.setdefault(Address(str(scope), str(scope_id), str(key)), (str(text), []))
            entry[1].append((str(field), int(ord_)))
        return [Pending(address, text, tuple(fields)) for address, (text, fields) in found.items()]

    def fill(self, address: Address, text: str, collection: str, vectors: Sequence[Vector]) -> bool:
        """Write a record's next-space vectors if it still holds ``text``; False when it changed."""
        self.prepare_write()
        check_address(address)

        def work(conn: Any) -> bool:
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces")
            if spaces.next is None:
                raise ConflictError(f"the {collection!r} collection is not being moved to a new space")
            checked = check_vectors(vectors, spaces.next)
            conn.execute(self.statement("vectors_clear_space"), (*address, ids[NEXT]))
            for vector in checked:
                params = (ids[NEXT], vector.field, vector.ord, vector.data, *address, text)
                if conn.execute(self.statement("vectors_fill"), params).rowcount == 0:
                    return False  # nothing written: the record changed (the transaction keeps nothing)
            self.wrote(conn, ids[NEXT], address, checked)
            return True

        done: bool = self.store.write(work)
        return done

    def switch(self, collection: str) -> int:
        """Make the next space active if nothing is pending (its old vectors deleted); the pending count."""

        def work(conn: Any) -> int:
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces_locked")
            if spaces.next is None or spaces.active is None:
                raise ConflictError(f"the {collection!r} collection is not being moved to a new space")
            row = conn.execute(self.statement("vectors_pending_count"), (ids[ACTIVE], ids[NEXT])).fetchone()
            waiting = int(row[0])
            if waiting:
                return waiting
            conn.execute(self.statement("vectors_drop_space"), (ids[ACTIVE],))
            conn.execute(self.statement("vectors_space_drop"), (ids[ACTIVE],))
            conn.execute(self.statement("vectors_space_promote"), (ids[NEXT],))
            return 0

        waiting: int = self.store.write(work)
        return waiting
