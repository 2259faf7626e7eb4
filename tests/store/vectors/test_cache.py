"""The exact scan's cache (``flowmem.store.vectors.cache``, ``cached.py``): the scan's answer, never a stale one.

``SqlVectors.nearest`` scores a snapshot of the scope this process keeps, checked by
the collection's generation. Here it answers as the page-by-page scan does over
random puts, rewrites, deletes, expiries and TTL changes (SQLite and PostgreSQL, the
three distances, filters and prefixes); a write by another process is seen by the
next search; an expired record drops out at search time; a scope past the bound is
left to the page-by-page scan; the generation moves with every write a scan can see.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.errors import ConfigurationError, EmbeddingSpaceError
from flowmem.store import Address, Store, open_store
from flowmem.store.vectors import Nearest, Search, Space, Vector
from flowmem.store.vectors.cache import Snapshot, SnapshotCache, limit_from_env
from flowmem.store.vectors.cached import generation
from flowmem.store.vectors.scoring import Ranking
from flowmem.store.vectors.sql import SqlVectors
from flowmem.store.vectorstores import vectors_of
from tests.migrated import migrated_sqlite_url

SPACE = Space("cache-test", 8)
COLLECTION = "test"
SCOPE, SCOPE_ID = "user", "u1"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each SQL backend."""
    if request.param == "sqlite":
        return migrated_sqlite_url(tmp_path / "cache.db")  # migrated already, as the pool's
    return str(request.getfixturevalue("postgres_store_url"))


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    """A SQL store at ``url``."""
    opened = open_store(url)
    try:
        yield opened
    finally:
        opened.close()


def sql(store: Store) -> SqlVectors:
    """The store's vectors (a ``SqlVectors``, whatever engine path it adds)."""
    found = vectors_of(store)
    assert isinstance(found, SqlVectors)
    return found


def vector(values: list[float], field: str = "$") -> Vector:
    """A Vector of float32 values."""
    return Vector(field, 0, struct.pack(f"<{len(values)}f", *values))


def put(store: Store, key: str, *rows: list[float], expires_at: float | None = None) -> None:
    """Write record ``key`` (its value the key as JSON) with one vector per row (fields f0, f1, ...)."""
    found = [vector(values, f"f{i}") for i, values in enumerate(rows)]
    sql(store).put(Address(SCOPE, SCOPE_ID, key), f'"{key}"', expires_at, COLLECTION, SPACE, found)


def scanned(
    store: Store, query: list[float], distance: str, keep: int, prefix: str = "", now: float = 0.0,
    accept: Callable[[str, str | None], bool] | None = None,
) -> list[Any]:
    """The page-by-page scan's ranking (the reference)."""
    ranking = Ranking(query, distance, keep)
    start = prefix
    while True:
        page, more = sql(store).scan(Search(SCOPE, SCOPE_ID, prefix, now, COLLECTION, SPACE), start=start, values=True)
        rows = [r for r in page if accept is None or accept(r.key, r.text)]
        ranking.feed([r.key for r in rows], [r.data for r in rows], [r.text for r in rows])
        if not more or not page:
            return ranking.best()
        start = page[-1].key + "\x01"


def cached(
    store: Store, query: list[float], distance: str, keep: int, prefix: str = "", now: float = 0.0,
    accept: Callable[[str, str | None], bool] | None = None,
) -> list[Any]:
    """The cached scan's ranking (``SqlVectors.nearest``: this process's snapshot)."""
    found = SqlVectors.nearest(
        sql(store), Search(SCOPE, SCOPE_ID, prefix, now, COLLECTION, SPACE), Nearest(query, distance, keep=keep, accept=accept)
    )
    assert found is not None
    return found[0]


def assert_same(got: list[Any], want: list[Any]) -> None:
    """The same keys in the same order (ties in key order), the same texts, scores within float32's error."""
    assert [k for k, _, _ in got] == [k for k, _, _ in want]
    for (_, a, ta), (_, b, tb) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
        assert ta == tb


def random_row(rng: random.Random) -> list[float]:
    """A vector of a few levels (equal scores happen: ties), sometimes zero."""
    if rng.random() < 0.05:
        return [0.0] * SPACE.dims
    return [float(rng.randint(-2, 2)) for _ in range(SPACE.dims)]


@pytest.mark.parametrize("distance", ["cosine", "inner_product", "l2"])
def test_a_cached_search_ranks_as_the_page_by_page_scan_through_random_writes(store: Store, distance: str) -> None:
    rng = random.Random(f"cache-{distance}")
    keys = [f"{group}/{n}" for group in ("a", "ab", "b") for n in range(12)]

    def odd(key: str, text: str | None) -> bool:
        return text is not None and int(key.rsplit("/", 1)[1]) % 2 == 1

    for _ in range(120):
        key, roll = rng.choice(keys), rng.random()
        if roll < 0.55:
            rows = [random_row(rng) for _ in range(rng.randint(1, 3))]
            put(store, key, *rows, expires_at=rng.choice([None, None, 5.0, 50.0]))
        elif roll < 0.7:
            store.delete_record(Address(SCOPE, SCOPE_ID, key))
        elif roll < 0.8:  # the same value, another expiry: the vectors stay, the expiry changes
            found, _ = store.get_record(Address(SCOPE, SCOPE_ID, key), 0.0)
            if found:
                store.put_record(Address(SCOPE, SCOPE_ID, key), key, rng.choice([None, 5.0, 50.0]))
        else:  # another value: its vectors go
            store.put_record(Address(SCOPE, SCOPE_ID, key), f"{key}!", None)
        query = random_row(rng)
        for prefix, now, accept in (("", 0.0, None), ("a", 10.0, None), ("", 10.0, odd)):
            keep = rng.randint(1, 8)
            want = scanned(store, query, distance, keep, prefix, now, accept)
            assert_same(cached(store, query, distance, keep, prefix, now, accept), want)


def test_a_search_after_a_write_by_another_process_sees_it(store: Store, url: str) -> None:
    put(store, "a", [1.0] * 8)
    put(store, "b", [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    query = [-1.0] * 8
    assert [k for k, _, _ in cached(store, query, "cosine", 5)] == ["b", "a"]  # loaded and kept
    assert [k for k, _, _ in cached(store, query, "cosine", 5)] == ["b", "a"]  # from the snapshot
    writer = textwrap.dedent(
        f"""
        import struct, sys
        from flowmem.store import Address, open_store
        from flowmem.store.vectors import Space, Vector
        from flowmem.store.vectorstores import vectors_of
        store = open_store(sys.argv[1])
        vectors = vectors_of(store)
        vectors.put(Address({SCOPE!r}, {SCOPE_ID!r}, "c"), '"c"', None, {COLLECTION!r},
                    Space({SPACE.name!r}, {SPACE.dims}), [Vector("f0", 0, struct.pack("<8f", *[-1.0] * 8))])
        store.delete_record(Address({SCOPE!r}, {SCOPE_ID!r}, "b"))
        store.put_record(Address({SCOPE!r}, {SCOPE_ID!r}, "a"), "a", 1.0)
        store.close()
        """
    )
    subprocess.run([sys.executable, "-c", writer, url], check=True, timeout=120)
    assert [k for k, _, _ in cached(store, query, "cosine", 5, now=0.0)] == ["c", "a"]
    assert [k for k, _, _ in cached(store, query, "cosine", 5, now=2.0)] == ["c"]  # a expired at 1.0
    assert_same(cached(store, query, "cosine", 5, now=2.0), scanned(store, query, "cosine", 5, now=2.0))


def test_a_record_expires_out_of_a_kept_snapshot_at_search_time(store: Store) -> None:
    put(store, "a", [1.0] * 8, expires_at=100.0)
    put(store, "b", [0.5] * 8)
    assert [k for k, _, _ in cached(store, [1.0] * 8, "inner_product", 5, now=50.0)] == ["a", "b"]
    snapshots = sql(store).cache.held
    assert [k for k, _, _ in cached(store, [1.0] * 8, "inner_product", 5, now=100.0)] == ["b"]
    assert sql(store).cache.held == snapshots  # the same snapshot, not another load
    found = SqlVectors.nearest(sql(store), Search(SCOPE, SCOPE_ID, "", 100.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=5))
    assert found is not None and found[1] == 1  # one record scored: the expired one is not
    assert [(k, round(score, 6), text) for k, score, text in found[0]] == [("b", 1.0, '"b"')]


def test_each_write_a_scan_can_see_moves_the_collection_s_generation(store: Store) -> None:
    vectors = sql(store)

    def now_at() -> int:
        with vectors.store.connection() as conn:
            return generation(vectors, conn, COLLECTION)

    seen = [now_at()]
    put(store, "a", [1.0] * 8)  # the space recorded, a vector written
    seen.append(now_at())
    store.put_record(Address(SCOPE, SCOPE_ID, "a"), "a", 30.0)  # the same value, another expiry
    seen.append(now_at())
    store.put_record(Address(SCOPE, SCOPE_ID, "a"), "a", 30.0)  # nothing a scan sees changed
    unchanged = now_at()
    store.put_record(Address(SCOPE, SCOPE_ID, "other"), "x", 5.0)  # a record without vectors
    assert now_at() == unchanged == seen[-1]
    store.put_record(Address(SCOPE, SCOPE_ID, "a"), "a2", None)  # another value: its vectors go
    seen.append(now_at())
    put(store, "b", [1.0] * 8)
    seen.append(now_at())
    store.delete_record(Address(SCOPE, SCOPE_ID, "b"))
    seen.append(now_at())
    assert seen == sorted(set(seen)), seen  # strictly increasing


def test_an_erased_user_s_snapshot_leaves_memory_at_the_next_search_of_any_scope(store: Store) -> None:
    put(store, "a", [1.0] * 8)
    vectors = sql(store)
    cached(store, [1.0] * 8, "cosine", 1)
    assert vectors.cache.held > 0
    store.erase_user(SCOPE_ID)
    SqlVectors.nearest(vectors, Search(SCOPE, "u2", "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "cosine", keep=1))
    assert vectors.cache.held == 0  # u1's snapshot went; u2 has no vectors: nothing kept


def test_a_scope_past_the_bound_is_left_to_the_page_by_page_scan(store: Store) -> None:
    for n in range(20):
        put(store, f"k{n:02d}", [float(n)] * 8)
    vectors = sql(store)
    vectors.cache = SnapshotCache(20 * 32)  # the vectors alone fill it: no room for their keys
    args = (Search(SCOPE, SCOPE_ID, "", 0.0, COLLECTION, SPACE), Nearest([1.0] * 8, "inner_product", keep=3))
    assert SqlVectors.nearest(vectors, *args) is None
    assert vectors.cache.held == 0
    vectors.cache = SnapshotCache(0)  # FLOWMEM_VECTOR_CACHE_MB=0: no cache
    assert SqlVectors.nearest(vectors, *args) is None
    vectors.cache = SnapshotCache(2**20)
    assert [k for k, _, _ in cached(store, [1.0] * 8, "inner_product", 3)] == ["k19", "k18", "k17"]
    assert 0 < vectors.cache.held <= 2**20


def test_a_search_in_another_space_is_refused_from_the_cache_too(store: Store) -> None:
    put(store, "a", [1.0] * 8)
    cached(store, [1.0] * 8, "cosine", 1)
    with pytest.raises(EmbeddingSpaceError) as raised:
        SqlVectors.nearest(
            sql(store), Search(SCOPE, SCOPE_ID, "", 0.0, COLLECTION, Space("other", 8)), Nearest([1.0] * 8, "cosine", keep=1)
        )
    assert "cache-test" in str(raised.value) and "other" in str(raised.value)


def test_the_least_recently_used_snapshot_goes_first() -> None:
    def snapshot(generation: int) -> Snapshot:
        return Snapshot(generation, 1, 2, ["k"], [None], [None], [0], [bytes(8)])

    size = snapshot(0).nbytes
    cache = SnapshotCache(2 * size)
    cache.put(("c", "s", "1", ""), snapshot(1))
    cache.put(("c", "s", "2", ""), snapshot(1))
    assert cache.get(("c", "s", "1", ""), 1, 1) is not None  # 1 used last: 2 goes first
    cache.put(("c", "s", "3", ""), snapshot(1))
    assert cache.get(("c", "s", "2", ""), 1, 1) is None
    assert cache.get(("c", "s", "1", ""), 1, 1) is not None
    assert cache.get(("c", "s", "1", ""), 2, 1) is None  # another generation: dropped
    assert cache.held == size


@pytest.mark.parametrize(("raw", "bound"), [("", 1024 * 2**20), ("0", 0), ("1.5", 3 * 2**19), ("64", 64 * 2**20)])
def test_the_bound_is_read_from_the_environment(raw: str, bound: int) -> None:
    assert limit_from_env({"FLOWMEM_VECTOR_CACHE_MB": raw}) == bound


@pytest.mark.parametrize("raw", ["-1", "lots", "nan"])
def test_a_bound_that_is_not_a_size_is_refused(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="FLOWMEM_VECTOR_CACHE_MB"):
        limit_from_env({"FLOWMEM_VECTOR_CACHE_MB": raw})
