"""The HTTP vector search (``service.vector_records.search``) on pgvector's path ranks as the exact scan.

On the ``pgserver`` PostgreSQL with the ``vector`` extension and no snapshot cache,
a search is pgvector's SQL ranking (``PgVectors.nearest``); the same records written
to a memory store answer with the portable exact scan. Both give the same records
in the same order with the same scores, for each distance, under a prefix, with an
offset; another space is refused naming both.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from flowmem.errors import EmbeddingSpaceError
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.service.vector_records import search, write_with_vectors
from flowmem.store import Store, open_store
from flowmem.store.vectors import Space, Vector, pack
from tests.conftest import fresh_schema

pytestmark = pytest.mark.postgres

SPACE = Space("caller-model", 16)
ALICE = ExecutionContext(user_id="alice")


@pytest.fixture
def pgvector_store(pgvector_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A PostgreSQL store with pgvector, no snapshot cache: pgvector's SQL ranking answers."""
    monkeypatch.setenv("FLOWMEM_VECTOR_CACHE_MB", "0")
    with fresh_schema(pgvector_url) as url:
        store = open_store(url)
        try:
            yield store
        finally:
            store.close()


def fill(memory: MemoryService, rng: random.Random) -> None:
    """Forty records of one or two random vectors each, under two prefixes."""
    for i in range(40):
        vectors = [
            Vector(f"f{j}", 0, pack([rng.uniform(-1, 1) for _ in range(SPACE.dims)], SPACE))
            for j in range(rng.randint(1, 2))
        ]
        key = f"{'notes' if i % 3 else 'tasks'}/{i:02d}"
        write_with_vectors(memory, "user", key, {"i": i}, ALICE, ttl=None, space=SPACE, vectors=vectors)


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
def test_a_search_on_pgvector_ranks_as_the_exact_scan(pgvector_store: Store, distance: str) -> None:
    on_pgvector, exact = MemoryService(pgvector_store), MemoryService(open_store("memory://"))
    fill(on_pgvector, random.Random(7))
    fill(exact, random.Random(7))
    rng = random.Random(distance)
    for prefix, limit, offset in (("", 10, 0), ("notes/", 5, 3), ("tasks/", 20, 0)):
        query = [rng.uniform(-1, 1) for _ in range(SPACE.dims)]
        got = search(on_pgvector, "user", ALICE, space=SPACE, query=query, distance=distance,
                     prefix=prefix, limit=limit, offset=offset)
        want = search(exact, "user", ALICE, space=SPACE, query=query, distance=distance,
                      prefix=prefix, limit=limit, offset=offset)
        assert [f.key for f in got.found] == [f.key for f in want.found] and got.found
        for a, b in zip(got.found, want.found, strict=True):
            assert a.value == b.value and a.score == pytest.approx(b.score, abs=1e-5)


def test_a_search_in_another_space_on_pgvector_is_refused_naming_both(pgvector_store: Store) -> None:
    memory = MemoryService(pgvector_store)
    fill(memory, random.Random(1))
    with pytest.raises(EmbeddingSpaceError, match="other-model"):
        search(memory, "user", ALICE, space=Space("other-model", 16), query=[1.0] * 16)
