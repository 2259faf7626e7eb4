"""pgvector: a PostgreSQL store's searches scored in SQL when the ``vector`` extension is installed (issue 40).

``PgVectors`` is the ``SqlVectors`` of a ``PostgresStore`` (``vectorstores.vectors_of``).
When the database has the ``vector`` extension (``CREATE EXTENSION vector``, once, by
an administrator: flowmem creates no extension), it keeps a copy of every vector as a
pgvector ``vector`` in ``record_vectors_pgvector`` and ``nearest`` scores in SQL with
pgvector's operators; without it ``nearest`` is ``SqlVectors.nearest``: the portable
exact scan from this process's cache (``cache.py``), or None and the caller runs it
page by page (``scoring.Ranking``). Decision 0132 says why it is built this way.

- **The copy.** One row per row of ``record_vectors`` (same key), written in the
  transaction that wrote the vectors (``SqlVectors.wrote``, a binary COPY) and deleted
  with them by its foreign key (``ON DELETE CASCADE``): whatever deletes a vector (a
  put, a delete, a purge, an erasure, a switch of spaces) deletes its copy. The first
  use in a process creates the table and copies the vectors written before the
  extension was there (``ready``). The ``bytea`` stays the vector of record: quotas
  count it, the exact scan and ``flowmem reembed`` read it.
- **Scores** are LangGraph's (as ``scoring``): cosine ``1 - (a <=> b)`` (0 where a
  vector is zero: pgvector's distance is NaN there, ``InMemoryStore``'s score 0), L2
  ``-(a <-> b)``, inner product ``-(a <#> b)`` (``<#>`` is the negated inner product).
  A record scores its best vector; ties go in key order (code points).
- **Exact by default.** The exact scan's snapshot (decision 0130) answers where this
  process keeps the scope (measured 5 times faster than the SQL ranking between
  writes, 1.25 times slower when a write precedes every search); else the SQL scan
  orders by the score (a scope past the cache's bound, the cache off): the same
  ranking as every other path (the oracle test). An HNSW index (``ann_index_config`` ``{"kind": "hnsw"}``,
  as LangGraph's ``PostgresIndexConfig``) is a partial expression index on the
  space's vectors cast to ``vector(dims)`` (``halfvec(dims)`` past 2,000 dimensions,
  pgvector 0.7 and later), built by the first search that asks for it; a search with
  no filter reads it (approximate) and falls back to the exact scan when it finds
  fewer items than the page needs (a small or filtered scope).
- **Another schema.** The extension's objects are named with their schema
  (``OPERATOR(ext.<=>)``, ``ext.vector``): a store on another ``search_path`` sees them.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowmem.errors import ConfigurationError
from flowmem.store.base import Address
from flowmem.store.engine import SqlEngine
from flowmem.store.rows import prefix_end
from flowmem.store.vectors import (
    ACTIVE,
    Nearest,
    Search,
    Space,
    Vector,
    check_search,
    mismatch,
    pack,
)
from flowmem.store.vectors.sql import SqlVectors

TABLE = "record_vectors_pgvector"
LOCK = 0x666C6F776D656D76  # the advisory lock of the table's creation and its first copy
COPY_BATCH = 1000  # vectors copied into the table per transaction by ``ready``
FETCH = 256  # ranked rows read per round trip by a filtered search
VECTOR_HNSW_DIMS = 2000  # pgvector's HNSW limit for vector; halfvec's is 4,000 (0.7 and later)
HALFVEC_HNSW_DIMS = 4000
OPERATORS = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
OPCLASSES = {"cosine": "cosine_ops", "l2": "l2_ops", "inner_product": "ip_ops"}
_KEY_COLUMNS = "scope, scope_id, key, space, field, ord"
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)

Ranked = tuple[str, float, "str | None"]


@dataclass(frozen=True)
class AnnIndex:
    """An HNSW index asked for by ``ann_index_config``: its graph's ``m`` and ``ef_construction``, its type."""

    m: int = 16
    ef_construction: int = 64
    vector_type: str = "vector"

    @classmethod
    def of(cls, config: object) -> AnnIndex | None:
        """LangGraph's ``ann_index_config`` (``kind``: ``hnsw`` or ``flat``): None for none or flat."""
        if config is None:
            return None
        if not isinstance(config, Mapping):
            raise ConfigurationError(f"ann_index_config must be a dict, got {config!r}")
        unknown = set(config) - {"kind", "m", "ef_construction", "vector_type"}
        if unknown:
            raise ConfigurationError(f"ann_index_config has unknown keys {sorted(unknown)!r} (hnsw takes m, ef_construction, vector_type)")
        kind = config.get("kind", "hnsw")
        if kind == "flat":
            return None
        if kind != "hnsw":
            raise ConfigurationError(f"ann_index_config kind must be 'hnsw' or 'flat' (no ivfflat), got {kind!r}")
        vector_type = config.get("vector_type", "vector")
        if vector_type not in ("vector", "halfvec"):
            raise ConfigurationError(f"ann_index_config vector_type must be 'vector' or 'halfvec', got {vector_type!r}")
        numbers = {}
        for name, low, high in (("m", 2, 100), ("ef_construction", 4, 1000)):
            value = config.get(name, getattr(cls, name))
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(f"ann_index_config {name} must be an integer from {low} to {high}, got {value!r}")
            numbers[name] = value
        return cls(numbers["m"], numbers["ef_construction"], str(vector_type))


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(data: bytes) -> str:
    """float32 little-endian bytes as pgvector's text (each float exact: read back as the same float32)."""
    floats = array("f", data)
    if sys.byteorder == "big":
        floats.byteswap()
    return "[" + ",".join(map(repr, floats.tolist())) + "]"


def _text(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">i", len(raw)) + raw


def copy_row(address: Address, space_id: int, field: str, ord_: int, data: bytes) -> bytes:
    """One row of ``TABLE`` in COPY's binary format (pgvector's binary vector: dims, 0, big-endian float4s)."""
    floats = array("f", data)
    if sys.byteorder == "little":
        floats.byteswap()
    body = floats.tobytes()
    return b"".join(
        (
            struct.pack(">h", 7),
            _text(address.scope),
            _text(address.scope_id),
            _text(address.key),
            struct.pack(">iq", 8, space_id),
            _text(field),
            struct.pack(">ii", 4, ord_),
            struct.pack(">ihh", 4 + len(body), len(data) // 4, 0),
            body,
        )
    )


def score_of(distance: str, dist: str) -> str:
    """The SQL score (higher is closer) of pgvector's distance ``dist``, as LangGraph's."""
    if distance == "cosine":
        return f"CASE WHEN {dist} = 'NaN'::float8 THEN 0 ELSE 1 - {dist} END"
    return f"-({dist})"


def ranked_sql(
    ext: str, distance: str, space_id: int, *, key: str, bounded: bool, ann: tuple[str, int] | None, limit: bool
) -> str:
    """The statement ranking one scope id's live records under a key range by their best vector.

    Parameters by name: ``q`` (the query's text), ``scope``, ``scope_id``, ``lower``,
    ``upper`` (when ``bounded``), ``now``, ``keep`` (when ``limit``), ``candidates``
    (when ``ann``: the index's type and dims). The space id is written in the text, so
    the planner can match a partial index whatever the plan cache does.
    """
    op = f"OPERATOR({ext}.{OPERATORS[distance]})"
    pkey = key.replace("v.key", "p.key")
    where = (
        f"p.scope = %(scope)s AND p.scope_id = %(scope_id)s AND p.space = {int(space_id)} "
        f"AND {pkey} >= %(lower)s" + (f" AND {pkey} < %(upper)s" if bounded else "")
    )
    if ann is None:
        inner = f"SELECT p.key, p.embedding {op} %(q)s::{ext}.vector AS dist FROM {TABLE} p WHERE {where}"
    else:
        kind, dims = ann
        cast = f"p.embedding::{ext}.{kind}({dims}) {op} %(q)s::{ext}.{kind}({dims})"
        inner = f"SELECT p.key, {cast} AS dist FROM {TABLE} p WHERE {where} ORDER BY {cast} LIMIT %(candidates)s"
    skey = key.replace("v.key", "s.key")
    return f"""SELECT s.key, s.value, s.score FROM (
        SELECT DISTINCT ON ({key}) v.key AS key, {score_of(distance, "v.dist")} AS score,
            (SELECT r.value FROM records r WHERE r.scope = %(scope)s AND r.scope_id = %(scope_id)s
                AND r.key = v.key AND (r.expires_at IS NULL OR r.expires_at > %(now)s)) AS value
        FROM ({inner}) v ORDER BY {key}, score DESC) s
        WHERE s.value IS NOT NULL ORDER BY s.score DESC, {skey}""" + (" LIMIT %(keep)s" if limit else "")


def take(
    rows: Callable[[], Sequence[Any]], keep: int, accept: Callable[[str, str | None], bool] | None
) -> tuple[list[Ranked], int]:
    """The first ``keep`` accepted of ranked (key, value, score) rows read batch by batch, and how many were accepted."""
    best: list[Ranked] = []
    while len(best) < keep:
        batch = rows()
        if not batch:
            break
        for key, text, score in batch:
            if accept is None or accept(str(key), text):
                best.append((str(key), float(score), text))
                if len(best) == keep:
                    break
    return best, len(best)


class PgVectors(SqlVectors):
    """``SqlVectors`` of a PostgreSQL store, with pgvector's copy and ``nearest`` where the extension is."""

    def __init__(self, store: SqlEngine[Any], sql: dict[str, str], collated: dict[str, str]) -> None:
        super().__init__(store, sql, collated, binary=True)
        self._ext: str | None = None
        self._version: tuple[int, ...] = ()
        self._checked = False
        self._indexes: set[str] = set()

    # --- the extension and the copy -----------------------------------------------------
    def ready(self) -> str | None:
        """The extension's quoted schema once the copy is complete; None without the extension."""
        if self._checked:
            return self._ext
        with self.store.connection() as conn:
            row = conn.execute(
                """SELECT n.nspname, e.extversion FROM pg_extension e
                JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"""
            ).fetchone()
        if row is not None:
            ext = quote(str(row[0]))
            with self.store.connection() as conn:
                exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0]
            if not exists:  # the first process to use it creates it (under an advisory lock)
                self.store.write(lambda conn: self._create(conn, ext))
            while self.store.write(lambda conn: self._copy_missing(conn)):
                pass
            self._version = tuple(int(part) for part in str(row[1]).split(".") if part.isdigit())
            self._ext = ext
        self._checked = True
        return self._ext

    @staticmethod
    def _create(conn: Any, ext: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK,))
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {TABLE} (
                scope TEXT NOT NULL, scope_id TEXT NOT NULL, key TEXT NOT NULL, space BIGINT NOT NULL,
                field TEXT NOT NULL, ord INTEGER NOT NULL, embedding {ext}.vector NOT NULL,
                PRIMARY KEY ({_KEY_COLUMNS}),
                FOREIGN KEY ({_KEY_COLUMNS}) REFERENCES record_vectors ({_KEY_COLUMNS}) ON DELETE CASCADE)"""
        )

    def _copy_missing(self, conn: Any) -> bool:
        """Copy a batch of vectors that have no copy (locked: none is deleted meanwhile); True when one was."""
        rows = conn.execute(
            f"""SELECT v.scope, v.scope_id, v.key, v.space, v.field, v.ord, v.vec FROM record_vectors v
            WHERE NOT EXISTS (SELECT 1 FROM {TABLE} p WHERE p.scope = v.scope AND p.scope_id = v.scope_id
                AND p.key = v.key AND p.space = v.space AND p.field = v.field AND p.ord = v.ord)
            LIMIT %s FOR SHARE OF v""",
            (COPY_BATCH,),
            binary=True,
        ).fetchall()
        self._copy(
            conn, [copy_row(Address(s, i, k), int(sp), f, int(o), bytes(d)) for s, i, k, sp, f, o, d in rows]
        )
        return bool(rows)

    @staticmethod
    def _copy(conn: Any, rows: Sequence[bytes]) -> None:
        if not rows:
            return
        with conn.cursor().copy(f"COPY {TABLE} ({_KEY_COLUMNS}, embedding) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(b"".join((_COPY_HEADER, *rows, _COPY_TRAILER)))

    def wrote(self, conn: Any, space_id: int, address: Address, vectors: Sequence[Vector]) -> None:
        """Copy the vectors just inserted into ``TABLE`` in the same transaction (when the extension is)."""
        if self._ext is not None and vectors:
            self._copy(conn, [copy_row(address, space_id, v.field, v.ord, v.data) for v in vectors])

    def prepare_write(self) -> None:
        """Make the copy ready (``ready``) before a put or fill writes vectors, where the extension is."""
        self.ready()

    # --- searches -----------------------------------------------------------------------
    def _index(self, space_id: int, space: Space, distance: str, ann: AnnIndex) -> tuple[str, int]:
        """The HNSW index of the space and distance (built when missing): its vector type and dims."""
        kind = ann.vector_type
        if kind == "vector" and space.dims > VECTOR_HNSW_DIMS:
            kind = "halfvec"  # as LangGraph's PostgresStore: a vector index holds 2,000 dims at most
        if kind == "halfvec" and self._version < (0, 7):
            raise ConfigurationError(
                f"an HNSW index of {space.dims} dimensions needs pgvector's halfvec (pgvector 0.7 or "
                f"later; this database has {'.'.join(map(str, self._version))}): drop ann_index_config "
                "for the exact scan, or upgrade pgvector"
            )
        limit = HALFVEC_HNSW_DIMS if kind == "halfvec" else VECTOR_HNSW_DIMS
        if space.dims > limit:
            raise ConfigurationError(f"pgvector's HNSW indexes {kind} of at most {limit} dimensions, not {space.dims}")
        name = f"{TABLE}_hnsw_{int(space_id)}_{distance}"
        if name not in self._indexes:
            ext = self._ext
            with self.store.connection() as conn:  # CONCURRENTLY: puts go on while it builds
                self._drop_stale_indexes(conn)
                conn.execute(
                    f"""CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {TABLE} USING hnsw
                    ((embedding::{ext}.{kind}({space.dims})) {ext}.{kind}_{OPCLASSES[distance]})
                    WITH (m = {ann.m}, ef_construction = {ann.ef_construction}) WHERE space = {int(space_id)}"""
                )
            self._indexes.add(name)
        return kind, space.dims

    @staticmethod
    def _drop_stale_indexes(conn: Any) -> None:
        """Drop the HNSW indexes of spaces that are gone (a move's old space: its rows were deleted)."""
        live = {int(row[0]) for row in conn.execute("SELECT id FROM vector_spaces").fetchall()}
        names = conn.execute(
            """SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = to_regclass(%s) AND c.relname LIKE %s""",
            (TABLE, f"{TABLE}_hnsw_%"),
        ).fetchall()
        for (name,) in names:
            space_id = str(name)[len(TABLE) + len("_hnsw_") :].split("_", 1)[0]
            if space_id.isdigit() and int(space_id) not in live:
                conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(str(name))}")

    def nearest(self, search: Search, ask: Nearest) -> tuple[list[Ranked], int] | None:
        """The best ``ask.keep`` accepted records of ``search`` by score (key, score, value text) and how many.

        In this order: the HNSW index when ``ask.ann`` asks and there is no filter (when it
        fills the page); the exact scan's snapshot (``SqlVectors.nearest``, decision
        0130) where this process keeps the scope; pgvector's exact ranking in SQL.
        Without pgvector, ``SqlVectors.nearest``'s answer: the snapshot's, or None.

        ``ask.accept(key, value_text)`` drops a record (a filter). Fewer than ``keep``
        means every accepted record with a vector is in the answer. EmbeddingSpaceError
        when the collection's active space is not the search's.
        """
        check_search(search)
        query, distance, keep, accept, ann = ask.query, ask.distance, ask.keep, ask.accept, ask.ann
        if distance not in OPERATORS:
            raise ConfigurationError(f"distance must be one of {sorted(OPERATORS)}, got {distance!r}")
        ext = self.ready()
        if ext is None:  # the exact scan, from this process's cache where it holds the scope
            return super().nearest(search, ask)
        scope, scope_id, prefix, now, collection, space = search
        with self.store.connection() as conn:
            spaces, ids = self._read_spaces(conn, collection, "vectors_spaces_read")
        if spaces.active is None or keep <= 0:
            return [], 0
        if spaces.active != space:
            raise mismatch(collection, spaces.active, space, "search")
        sid = ids[ACTIVE]
        self.statement("vectors_scan")  # reads the database's collation once
        key = "v.key" if self._collation_is_c else 'v.key COLLATE "C"'
        end = prefix_end(prefix)
        params: dict[str, Any] = {
            "q": literal(pack(query, space)), "scope": scope, "scope_id": scope_id, "lower": prefix,
            "upper": end, "now": now, "keep": keep, "candidates": max(40, 4 * keep),
        }
        if ann is not None and accept is None:
            shape = self._index(sid, space, distance, ann)
            sql = ranked_sql(ext, distance, sid, key=key, bounded=end is not None, ann=shape, limit=True)
            with self.store.connection() as conn, conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(40, 4 * keep))}")
                rows = conn.execute(sql, params).fetchall()
            if len(rows) == keep:  # else a small or filtered scope: the exact scan finds them all
                return [(str(k), float(score), text) for k, text, score in rows], keep
        # the exact scan's snapshot, where this process can keep the scope
        cached = super().nearest(search, ask)
        if cached is not None:
            return cached
        sql = ranked_sql(ext, distance, sid, key=key, bounded=end is not None, ann=None, limit=accept is None)
        with (
            self.store.connection() as conn,
            conn.transaction(),
            conn.cursor(name="flowmem_nearest") as cursor,  # server-side: read while accepted
        ):
            cursor.execute(sql, params)
            return take(lambda: cursor.fetchmany(FETCH), keep, accept)


__all__ = ["AnnIndex", "PgVectors", "copy_row", "literal", "ranked_sql", "take"]
