"""The oracle across scoring paths: one query ranks alike on every engine (issue 40 §3).

The same random items (the deterministic ``CharacterEmbeddings``) are put in a
``FlowmemStore`` on each path: memory, SQLite's exact scan, PostgreSQL's exact scan,
and pgvector's exact ranking in SQL (the ``pgserver`` wheel's PostgreSQL, no HNSW
index), and in LangGraph's ``InMemoryStore(index=…)``. Every search (namespace
prefix, filter, limit, offset) must give the same items in the same order as the
reference, up to swaps between items whose scores differ by less than float32's
error, with the same scores (1e-5). The reference is ``InMemoryStore`` for cosine
(its only distance) and a float64 computation of the same embeddings for L2 and
inner product. sqlite-vec: decision 0132.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from flowmem.integrations.langgraph import FlowmemStore
from flowmem.service import MemoryService
from flowmem.store import open_store
from flowmem.store.vectors.pgvector import PgVectors
from flowmem.store.vectorstores import vectors_of
from tests.conftest import fresh_schema
from tests.integrations.langgraph.embeddings import CharacterEmbeddings
from tests.migrated import migrated_sqlite_url

DIMS = 32
TOLERANCE = 1e-5
WORDS = ["cat", "mat", "dog", "fog", "tea", "sea", "ant", "tan", "net", "ten", "a", "the"]
PATHS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
         pytest.param("pgvector", marks=pytest.mark.postgres)]


@pytest.fixture(params=PATHS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of each scoring path."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield migrated_sqlite_url(tmp_path / "paths.db")  # migrated once per process
    elif request.param == "postgres":
        yield str(request.getfixturevalue("postgres_store_url"))  # migrated already, no rows
    else:  # no snapshot cache: pgvector's SQL ranking answers (decision 0132)
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("FLOWMEM_VECTOR_CACHE_MB", "0")
        with fresh_schema(str(request.getfixturevalue("pgvector_url"))) as found:
            yield found


def items(seed: int, count: int) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """Random items under two namespaces, texts of a few words (many near ties), a number to filter on.

    A title is never its item's text: ``InMemoryStore`` fails an item whose two fields hold one text.
    """
    rng = random.Random(seed)
    found: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
    for i in range(count):
        namespace = ("docs", rng.choice(["en", "fr"]))
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        found.append((namespace, f"k{i:03d}", {"text": text, "title": rng.choice(WORDS).upper(), "n": i % 3}))
    return found


def embedded(data: list[Any]) -> dict[tuple[tuple[str, ...], str], list[list[float]]]:
    """Each item's two fields' embeddings (``text``, ``title``), computed once for every query of a test."""
    embed = CharacterEmbeddings(DIMS)
    return {
        (ns, key): [embed.embed_query(value[f]) for f in ("text", "title")]
        for ns, key, value in data
    }


def reference_scores(
    vectors: dict[tuple[tuple[str, ...], str], list[list[float]]], query: str, distance: str
) -> dict[tuple[tuple[str, ...], str], float]:
    """Each item's score in float64: the best over its two fields' embeddings (``embedded``)."""
    q = CharacterEmbeddings(DIMS).embed_query(query)

    def one(v: list[float]) -> float:
        dot = sum(a * b for a, b in zip(v, q, strict=True))
        if distance == "inner_product":
            return dot
        if distance == "l2":
            return -math.sqrt(sum((a - b) ** 2 for a, b in zip(v, q, strict=True)))
        norms = math.sqrt(sum(a * a for a in v)) * math.sqrt(sum(b * b for b in q))
        return dot / norms if norms else 0.0

    return {item: max(one(v) for v in fields) for item, fields in vectors.items()}


def assert_same_ranking(got: list[Any], want: list[Any], scores: dict[Any, float]) -> None:
    """Same length, scores within TOLERANCE; where the order differs, the items tie within it."""
    assert len(got) == len(want)
    for hit, expected in zip(got, want, strict=True):
        assert hit.score == pytest.approx(scores[(hit.namespace, hit.key)], abs=TOLERANCE)
        if (hit.namespace, hit.key) != (expected.namespace, expected.key):  # only a near tie may swap
            assert scores[(hit.namespace, hit.key)] == pytest.approx(expected.score, abs=2 * TOLERANCE)


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_path_ranks_a_query_as_the_oracle(url: str, seed: int, distance: str) -> None:
    data = items(seed, 120)
    index: dict[str, Any] = {"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text", "title"],
                             "distance_type": distance}
    backing = open_store(url)
    try:
        store = FlowmemStore(MemoryService(backing), index=index)  # type: ignore[arg-type]
        oracle = InMemoryStore(index={"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text", "title"]})
        for namespace, key, value in data:
            store.put(namespace, key, value)
            oracle.put(namespace, key, value)
        rng = random.Random(seed * 7)
        vectors = embedded(data)
        for _ in range(6):
            query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
            scores = reference_scores(vectors, query, distance)
            for prefix, flt, limit, offset in (
                (("docs",), None, 10, 0),
                (("docs",), None, 7, 13),
                (("docs", "en"), None, 5, 0),
                (("docs",), {"n": 1}, 6, 2),
            ):
                got = store.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
                if distance == "cosine":
                    want = oracle.search(prefix, query=query, filter=flt, limit=limit, offset=offset)
                else:  # InMemoryStore scores cosine only: the float64 reference's ranking
                    pool = [hit for hit in oracle.search(prefix, filter=flt, limit=1000)]
                    pool.sort(key=lambda hit: (-scores[(hit.namespace, hit.key)], hit.namespace, hit.key))
                    want = pool[offset : offset + limit]
                    for hit in want:
                        hit.score = scores[(hit.namespace, hit.key)]
                assert_same_ranking(got, want, scores)
    finally:
        backing.close()


def test_the_pgvector_path_is_the_one_that_scored(pgvector_url: str) -> None:
    """On pgserver's PostgreSQL the store's vectors are pgvector's, ready with the extension (not the scan)."""
    with fresh_schema(pgvector_url) as found:
        backing = open_store(found)
        try:
            vectors = vectors_of(backing)
            assert isinstance(vectors, PgVectors) and vectors.ready() == '"public"'
        finally:
            backing.close()
