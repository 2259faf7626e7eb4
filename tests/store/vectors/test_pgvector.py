"""pgvector's path (``flowmem.store.vectors.pgvector``) on a PostgreSQL with the extension (the ``pgserver`` wheel).

The ranking in SQL equals the exact scan's (``scoring.Ranking``) for the three
distances, zero vectors, expired records, key ranges and filters; the copy of the
vectors follows them (deleted with their record, rewritten with a put, moved with a
switch of spaces, made for vectors stored before); an HNSW index is built when asked
and read by the planner; and without the extension (Debian's server) ``nearest`` is
the exact scan's (from its cache, or None and the caller scans page by page).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.errors import ConfigurationError, EmbeddingSpaceError
from flowmem.store import Address, Store, open_store
from flowmem.store.listing import successor
from flowmem.store.vectors import Nearest, Search, Space, Vector
from flowmem.store.vectors.cache import SnapshotCache
from flowmem.store.vectors.pgvector import TABLE, AnnIndex, PgVectors, copy_row, literal, ranked_sql
from flowmem.store.vectors.scoring import Ranking
from flowmem.store.vectorstores import vectors_of
from tests.conftest import fresh_schema

pytestmark = pytest.mark.postgres

SPACE = Space("test-model", 8)
COLLECTION = "test"


@pytest.fixture
def store(pgvector_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A PostgreSQL store in a fresh schema of a server that has pgvector; no snapshot cache (the SQL path answers)."""
    monkeypatch.setenv("FLOWMEM_VECTOR_CACHE_MB", "0")
    with fresh_schema(pgvector_url) as url:
        opened = open_store(url)
        try:
            yield opened
        finally:
            opened.close()


def pg(store: Store) -> PgVectors:
    """The store's vectors: pgvector's path."""
    found = vectors_of(store)
    assert isinstance(found, PgVectors)
    return found


def vector(values: list[float], field: str = "$", ord_: int = 0) -> Vector:
    """A Vector of float32 values."""
    return Vector(field, ord_, struct.pack(f"<{len(values)}f", *values))


def put(store: Store, key: str, *rows: list[float], expires_at: float | None = None) -> None:
    """Write record ``key`` (user scope) with one vector per row, fields f0, f1, ..."""
    found = [vector(values, f"f{i}") for i, values in enumerate(rows)]
    pg(store).put(Address("user", "u1", key), f'"{key}"', expires_at, COLLECTION, SPACE, found)


def exact(store: Store, query: list[float], distance: str, keep: int, prefix: str = "", now: float = 0.0) -> list[Any]:
    """The exact scan's ranking of the same vectors (the reference)."""
    ranking = Ranking(query, distance, keep)
    start = prefix
    while True:
        page, more = pg(store).scan(Search("user", "u1", prefix, now, COLLECTION, SPACE), start=start, values=True)
        ranking.feed([r.key for r in page], [r.data for r in page], [r.text for r in page])
        if not more or not page:
            return ranking.best()
        start = successor(page[-1].key)


def assert_same(got: list[Any], want: list[Any]) -> None:
    """Same keys in the same order, scores within float32 tolerance."""
    assert [k for k, _, _ in got] == [k for k, _, _ in want]
    for (_, a, ta), (_, b, tb) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
        assert ta == tb


def randvec(rng: random.Random) -> list[float]:
    """A random vector of the space, with a few coordinates repeated so ties happen."""
    return [rng.choice([0.0, 1.0, -0.5, rng.uniform(-1, 1)]) for _ in range(SPACE.dims)]


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
def test_nearest_ranks_as_the_exact_scan_for_each_distance(store: Store, distance: str) -> None:
    rng = random.Random(distance)
    for i in range(60):
        put(store, f"k{i:03d}", *[randvec(rng) for _ in range(rng.randint(1, 3))])
    put(store, "zero", [0.0] * SPACE.dims)  # cosine: pgvector's NaN is InMemoryStore's 0
    put(store, "twin-a", [1.0] * SPACE.dims)
    put(store, "twin-b", [1.0] * SPACE.dims)  # a tie: key order
    for query in (randvec(rng), [1.0] * SPACE.dims, [0.0] * SPACE.dims):
        for keep in (1, 5, 100):
            got = pg(store).nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest(query, distance, keep=keep))
            assert got is not None
            assert_same(got[0], exact(store, query, distance, keep))
            assert got[1] == min(keep, 63)


def test_nearest_skips_expired_records_and_keeps_to_the_prefix(store: Store) -> None:
    put(store, "a/1", [1.0] * 8)
    put(store, "a/2", [1.0, 0.5] * 4, expires_at=50.0)
    put(store, "b/1", [1.0] * 8)
    got = pg(store).nearest(Search("user", "u1", "a/", 100.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=10))
    assert got is not None and [k for k, _, _ in got[0]] == ["a/1"]
    before = pg(store).nearest(Search("user", "u1", "a/", 10.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=10))
    assert before is not None and [k for k, _, _ in before[0]] == ["a/1", "a/2"]


def test_a_filtered_nearest_reads_past_the_refused_records(store: Store) -> None:
    rng = random.Random(3)
    for i in range(700):  # more than a fetch (256) of refused records before the first accepted
        put(store, f"k{i:04d}", randvec(rng))
    query = randvec(rng)
    want = [row for row in exact(store, query, "cosine", 700) if row[0].endswith("7")][:5]
    got = pg(store).nearest(
        Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest(query, "cosine", keep=5, accept=lambda key, text: key.endswith("7"))
    )
    assert got is not None
    assert_same(got[0], want)


def test_a_search_in_another_space_is_refused_naming_both(store: Store) -> None:
    put(store, "a", [1.0] * 8)
    with pytest.raises(EmbeddingSpaceError, match="other-model"):
        pg(store).nearest(Search("user", "u1", "", 0.0, COLLECTION, Space("other-model", 8)), Nearest([1.0] * 8, "cosine", keep=1))


def copies(store: Store) -> list[tuple[str, str]]:
    """The keys and fields of the pgvector copy."""
    with store.connection() as conn:  # type: ignore[attr-defined]
        return [tuple(r) for r in conn.execute(f"SELECT key, field FROM {TABLE} ORDER BY key, field").fetchall()]


def test_the_copy_follows_the_vectors_rewritten_and_deleted(store: Store) -> None:
    put(store, "a", [1.0] * 8, [0.5] * 8)
    put(store, "b", [1.0] * 8)
    assert copies(store) == [("a", "f0"), ("a", "f1"), ("b", "f0")]
    put(store, "a", [0.25] * 8)  # rewritten: one vector now
    assert copies(store) == [("a", "f0"), ("b", "f0")]
    store.delete_record(Address("user", "u1", "b"))
    assert copies(store) == [("a", "f0")]


def test_vectors_stored_before_the_copy_are_copied_at_first_use(store: Store) -> None:
    put(store, "a", [1.0] * 8)
    put(store, "b", [0.5, 1.0] * 4)
    with store.connection() as conn:  # type: ignore[attr-defined]
        conn.execute(f"DELETE FROM {TABLE}")
    fresh = PgVectors(pg(store).store, pg(store).sql, pg(store).collated or {})  # another process's
    got = fresh.nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([0.5, 1.0] * 4, "cosine", keep=2))
    assert got is not None and [k for k, _, _ in got[0]] == ["b", "a"]
    assert copies(store) == [("a", "f0"), ("b", "f0")]


def test_an_hnsw_index_is_built_when_asked_and_read_by_the_planner(store: Store) -> None:
    rng = random.Random(5)
    for i in range(200):
        put(store, f"k{i:03d}", randvec(rng))
    query = randvec(rng)
    ann = AnnIndex(m=8, ef_construction=32)
    got = pg(store).nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest(query, "l2", keep=5, ann=ann))
    assert got is not None and len(got[0]) == 5
    want = exact(store, query, "l2", 5)
    assert {k for k, _, _ in got[0]} & {k for k, _, _ in want}  # approximate, yet near
    with store.connection() as conn:  # type: ignore[attr-defined]
        names = [r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (TABLE,))]
        assert any("hnsw" in name and name.endswith("_l2") for name in names)
        sid = conn.execute("SELECT id FROM vector_spaces WHERE collection = %s", (COLLECTION,)).fetchone()[0]
        sql = ranked_sql('"public"', "l2", sid, key="v.key", bounded=False, ann=("vector", 8), limit=True)
        conn.execute(f"ANALYZE {TABLE}")  # one scope id holds every vector: its btree selects nothing
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN " + sql,
            {"q": literal(struct.pack("<8f", *query)), "scope": "user", "scope_id": "u1", "lower": "",
             "now": 0.0, "keep": 5, "candidates": 40},
        ))
        conn.execute("RESET enable_seqscan")
    assert "hnsw" in plan


def test_an_hnsw_search_that_finds_too_few_answers_exactly(store: Store) -> None:
    for i in range(3):
        put(store, f"k{i}", [float(i + 1)] * 8)
    got = pg(store).nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "l2", keep=10, ann=AnnIndex()))
    assert got is not None and [k for k, _, _ in got[0]] == ["k0", "k1", "k2"] and got[1] == 3


def test_an_hnsw_index_past_2000_dimensions_needs_halfvec(store: Store) -> None:
    big = Space("big", 2048)
    pg(store).put(Address("user", "u1", "a"), '"a"', None, COLLECTION, big, [vector([1.0] * 2048)])
    with pytest.raises(ConfigurationError, match="halfvec"):
        pg(store).nearest(Search("user", "u1", "", 0.0, COLLECTION, big), Nearest([1.0] * 2048, "cosine", keep=1, ann=AnnIndex()))
    exact_answer = pg(store).nearest(Search("user", "u1", "", 0.0, COLLECTION, big), Nearest([1.0] * 2048, "cosine", keep=1))
    assert exact_answer is not None and exact_answer[0][0][0] == "a"


def test_ann_index_config_is_langgraphs_and_bad_ones_are_refused() -> None:
    assert AnnIndex.of(None) is None and AnnIndex.of({"kind": "flat"}) is None
    assert AnnIndex.of({"kind": "hnsw", "m": 8}) == AnnIndex(m=8)
    for bad in ({"kind": "ivfflat"}, {"m": 0}, {"vector_type": "bit"}, {"ef": 3}, "hnsw"):
        with pytest.raises(ConfigurationError):
            AnnIndex.of(bad)


def test_copy_rows_hold_the_float32s_exactly() -> None:
    data = struct.pack("<3f", 0.1, -2.5, 3e-8)
    assert literal(data) == "[" + ",".join(repr(x) for x in struct.unpack("<3f", data)) + "]"
    row = copy_row(Address("user", "u", "k"), 7, "$", 0, data)
    assert row.endswith(struct.pack(">hh3f", 3, 0, *struct.unpack("<3f", data)))


def test_without_the_extension_nearest_is_the_exact_scan_s_cache_or_none(postgres_store_url: str) -> None:
    opened = open_store(postgres_store_url)
    try:
        vectors = pg(opened)
        vectors.put(Address("user", "u1", "a"), '"a"', None, COLLECTION, SPACE, [vector([1.0] * 8)])
        found = vectors.nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=1))
        assert found is not None and found[1] == 1  # the exact scan, from the cache
        assert [(k, round(score, 6), text) for k, score, text in found[0]] == [("a", 1.0, '"a"')]
        vectors.cache = SnapshotCache(0)  # no cache: the caller scans page by page
        assert vectors.nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=1)) is None
    finally:
        opened.close()


def test_a_move_to_another_space_moves_the_copy(store: Store) -> None:
    put(store, "a", [1.0] * 8)
    put(store, "b", [0.5, 1.0] * 4)
    moved = Space("new-model", 4)
    vectors = pg(store)
    vectors.begin(COLLECTION, moved)
    for pending in vectors.pending(COLLECTION, None, 10):
        row = [1.0, 0.0, 0.0, 0.0] if pending.address.key == "a" else [0.0, 1.0, 0.0, 0.0]
        assert vectors.fill(pending.address, pending.text, COLLECTION, [vector(row, "f0")])
    assert vectors.switch(COLLECTION) == 0
    with store.connection() as conn:  # type: ignore[attr-defined]
        spaces = conn.execute(f"SELECT DISTINCT space FROM {TABLE}").fetchall()
    assert len(spaces) == 1 and copies(store) == [("a", "f0"), ("b", "f0")]
    got = vectors.nearest(Search("user", "u1", "", 0.0, COLLECTION, moved), Nearest([0.0, 1.0, 0.0, 0.0], "cosine", keep=2))
    assert got is not None and [k for k, _, _ in got[0]] == ["b", "a"]
    with pytest.raises(EmbeddingSpaceError):
        vectors.nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=1))


def test_the_hnsw_index_of_a_space_moved_away_is_dropped(store: Store) -> None:
    put(store, "a", [1.0] * 8)
    vectors = pg(store)
    assert vectors.nearest(Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "l2", keep=1, ann=AnnIndex()))
    moved = Space("new-model", 4)
    vectors.begin(COLLECTION, moved)
    for pending in vectors.pending(COLLECTION, None, 10):
        assert vectors.fill(pending.address, pending.text, COLLECTION, [vector([1.0, 0.0, 0.0, 0.0], "f0")])
    assert vectors.switch(COLLECTION) == 0
    assert vectors.nearest(Search("user", "u1", "", 0.0, COLLECTION, moved), Nearest([1.0, 0, 0, 0], "l2", keep=1, ann=AnnIndex()))
    with store.connection() as conn:  # type: ignore[attr-defined]
        names = [r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (TABLE,))]
        new_id = conn.execute("SELECT id FROM vector_spaces WHERE collection = %s", (COLLECTION,)).fetchone()[0]
    assert sorted(n for n in names if "_hnsw_" in n) == [f"{TABLE}_hnsw_{new_id}_l2"]


def test_the_copy_is_purged_with_its_expired_record_and_erased_with_its_user(store: Store) -> None:
    put(store, "gone", [1.0] * 8, expires_at=10.0)
    put(store, "kept", [1.0] * 8)
    store.purge_expired(20.0)
    assert copies(store) == [("kept", "f0")]
    pg(store).put(Address("user", "u2", "other"), '"o"', None, COLLECTION, SPACE, [vector([1.0] * 8)])
    store.erase_user("u1")
    with store.connection() as conn:  # type: ignore[attr-defined]
        left = conn.execute(f"SELECT scope_id, key FROM {TABLE}").fetchall()
    assert [tuple(row) for row in left] == [("u2", "other")]


def test_with_the_cache_the_snapshot_answers_before_the_sql_ranking(
    pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_sql(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("pgvector's SQL ranking ran")

    monkeypatch.setattr("flowmem.store.vectors.pgvector.ranked_sql", no_sql)
    for megabytes, sql_runs in (("64", False), ("0", True)):
        monkeypatch.setenv("FLOWMEM_VECTOR_CACHE_MB", megabytes)
        with fresh_schema(pgvector_url) as url:
            opened = open_store(url)
            try:
                put(opened, "a", [1.0] * 8)
                put(opened, "b", [0.5, 1.0] * 4)
                args = (Search("user", "u1", "", 0.0, COLLECTION, SPACE), Nearest([0.5, 1.0] * 4, "cosine", keep=2))
                if sql_runs:
                    with pytest.raises(AssertionError, match="SQL ranking ran"):
                        pg(opened).nearest(*args)
                else:
                    got = pg(opened).nearest(*args)
                    assert got is not None and [k for k, _, _ in got[0]] == ["b", "a"]
            finally:
                opened.close()
