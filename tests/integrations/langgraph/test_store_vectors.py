"""``FlowmemStore(index=…)``: LangGraph's vector-search cases, the ``InMemoryStore`` oracle, spaces, owners.

The first tests re-state LangGraph's own store test cases for vector search (its
``test_store.py``: fields, per-put ``index``, ``index=False``, scores that are plain
cosine similarities, filters with queries, updates, deletes, async) against
``FlowmemStore`` on memory, SQLite and PostgreSQL, with a deterministic embedding
(``embeddings.CharacterEmbeddings``). Then a property test holds ``FlowmemStore`` equal
to ``InMemoryStore(index=…)``, and the rest checks what flowmem adds: recorded spaces
that are never mixed, vectors erased with their user, purged with their TTL, counted
against the quota.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from flowmem.errors import EmbeddingSpaceError, QuotaExceededError
from flowmem.integrations.langgraph import FlowmemStore
from flowmem.service import MemoryService
from flowmem.store import Quotas, Store, open_store
from tests.conftest import fresh_schema
from tests.integrations.langgraph.conftest import BACKENDS
from tests.integrations.langgraph.embeddings import CharacterEmbeddings

DIMS = 64


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each backend."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/vectors.db"
    return str(request.getfixturevalue("postgres_store_url"))  # migrated already, no rows


@pytest.fixture
def backing(url: str) -> Iterator[Store]:
    """The flowmem store under the test's ``FlowmemStore``s."""
    store = open_store(url)
    yield store
    store.close()


def vector_store(store: Store, fields: list[str] | None = None, **more: Any) -> FlowmemStore:
    """A ``FlowmemStore`` with a character-embedding index over ``fields`` (default: the whole value)."""
    index: dict[str, Any] = {"dims": DIMS, "embed": CharacterEmbeddings(DIMS)}
    if fields is not None:
        index["fields"] = fields
    return FlowmemStore(MemoryService(store), index=index, **more)  # type: ignore[arg-type]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# --- LangGraph's vector-search cases ---------------------------------------------------------
def test_each_field_has_its_vector_and_an_item_scores_its_best(backing: Store) -> None:
    store = vector_store(backing, ["key0", "key1", "key3"])
    store.put(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})  # no key0: fine
    store.put(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})
    both = store.search(("test",), query="xxx")
    assert {hit.key for hit in both} == {"doc1", "doc2"}
    assert all(hit.score is not None and hit.score > 0.99 for hit in both)
    assert next(hit.key for hit in store.search(("test",), query="uuu")) == "doc2"
    assert next(hit.key for hit in store.search(("test",), query="zzz")) == "doc1"
    unindexed = store.search(("test",), query="www")
    assert len(unindexed) == 2 and all(hit.score is not None and hit.score < 0.9 for hit in unindexed)


def test_a_puts_index_replaces_the_fields_and_index_false_embeds_nothing(backing: Store) -> None:
    store = vector_store(backing, ["key17"])
    store.put(("test",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc"}, index=["key0", "key1"])
    store.put(("test",), "doc4", {"key0": "eee", "key1": "bbb", "key3": "ggg"}, index=["key1", "key3"])
    assert store.search(("test",), query="aaa")[0].key == "doc3"
    assert store.search(("test",), query="ggg")[0].key == "doc4"
    first, second = store.search(("test",), query="bbb")
    assert first.score == pytest.approx(second.score, abs=1e-5)
    assert all(hit.score is not None and hit.score < 0.9 for hit in store.search(("test",), query="ccc"))
    store.put(("test",), "doc5", {"key0": "hhh"}, index=False)
    hits = store.search(("test",), query="hhh")
    assert [hit.key for hit in hits][-1] == "doc5" and hits[-1].score is None  # unscored: last
    assert all(hit.score is not None for hit in hits[:-1])
    assert len(store.search(("test",))) == 3


@pytest.mark.parametrize("query", ["aaa", "bbb", "abcd", "poisson"])
def test_scores_are_the_cosine_similarity_of_the_embeddings(backing: Store, query: str) -> None:
    store = vector_store(backing, ["key0"])
    store.put(("test",), "doc", {"key0": "aaa"})
    embed = CharacterEmbeddings(DIMS)
    (hit,) = store.search((), query=query)
    assert hit.score == pytest.approx(cosine(embed.embed_query("aaa"), embed.embed_query(query)), abs=1e-5)


def test_a_query_ranks_within_the_filter_namespace_limit_and_offset(backing: Store) -> None:
    store = vector_store(backing, ["text"])
    docs = {
        "a": ("docs", "en", "the cat sat on the mat"),
        "b": ("docs", "fr", "le chat est sur le tapis"),
        "c": ("docs", "en", "a dog in the fog"),
        "d": ("other", "en", "the cat sat on the mat"),
    }
    for key, (label, lang, text) in docs.items():
        store.put((label,), key, {"text": text, "lang": lang})
    hits = store.search(("docs",), query="cat on a mat", filter={"lang": "en"})
    assert [hit.key for hit in hits] == ["a", "c"]
    assert hits[0].score is not None and hits[1].score is not None and hits[0].score > hits[1].score
    page = store.search(("docs",), query="cat on a mat", limit=1, offset=1)
    every = store.search(("docs",), query="cat on a mat")
    assert [hit.key for hit in page] == [every[1].key]
    assert store.search(("nothing",), query="cat") == []


def test_an_update_embeds_the_new_value_and_a_delete_forgets_it(backing: Store) -> None:
    store = vector_store(backing, ["text"])
    store.put(("n",), "k", {"text": "zzzz"})
    store.put(("n",), "other", {"text": "qqqq"})
    assert store.search(("n",), query="zzzz")[0].key == "k"
    store.put(("n",), "k", {"text": "aaaa"})
    (top, _rest) = store.search(("n",), query="aaaa")
    assert top.key == "k" and top.score == pytest.approx(1.0, abs=1e-5)
    store.delete(("n",), "k")
    assert [hit.key for hit in store.search(("n",), query="aaaa")] == ["other"]


def test_async_puts_and_searches_embed_and_rank_as_the_sync_ones(backing: Store) -> None:
    store = vector_store(backing, ["text"])

    async def run() -> list[Any]:
        await store.aput(("a",), "x", {"text": "hello world"})
        await store.aput(("a",), "y", {"text": "goodbye moon"})
        return await store.asearch(("a",), query="hello")

    hits = asyncio.run(run())
    assert [hit.key for hit in hits] == [hit.key for hit in store.search(("a",), query="hello")]
    assert hits[0].key == "x"


# --- the oracle -------------------------------------------------------------------------------
WORDS = st.sampled_from(["apple", "pear", "tea", "oslo", "zebra", "mat", "cat", "x"])
TEXTS = st.lists(WORDS, min_size=1, max_size=3).map(" ".join)
NAMESPACES = st.sampled_from([("docs",), ("docs", "faq"), ("notes",), ("users", "ana", "m")])
KEYS = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), NAMESPACES, KEYS, TEXTS, st.sampled_from(["en", "fr"])),
        st.tuples(st.just("delete"), NAMESPACES, KEYS),
        st.tuples(st.just("search"), st.sampled_from([(), ("docs",), ("users", "ana")]), TEXTS,
                  st.integers(1, 6), st.sampled_from([None, {"lang": "en"}])),
    ),
    max_size=25,
)


def _same(got: list[Any], want: list[Any]) -> None:
    """Same scores in order (float32 tolerance); the same items wherever scores do not tie."""
    assert len(got) == len(want)
    scores = [hit.score for hit in want]
    assert [hit.score for hit in got] == pytest.approx(scores, abs=1e-5)
    for hit, expected in zip(got, want, strict=True):
        ties = [s for s in scores if s is not None and abs(s - expected.score) < 1e-4]
        if len(ties) == 1:
            assert (hit.namespace, hit.key, hit.value) == (expected.namespace, expected.key, expected.value)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_flowmem_store_ranks_as_in_memory_store_with_an_index(
    backend: str, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]
) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path_factory.mktemp('o')}/o.db"
    backing = open_store(url)
    try:
        check_oracle(vector_store(backing, ["text"]), ops)
    finally:
        backing.close()


@pytest.mark.postgres
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_flowmem_store_on_postgres_ranks_as_in_memory_store_with_an_index(
    postgres_url: str, ops: list[tuple[Any, ...]]
) -> None:
    with fresh_schema(postgres_url) as url:  # an empty schema per example
        backing = open_store(url)
        try:
            check_oracle(vector_store(backing, ["text"]), ops)
        finally:
            backing.close()


def check_oracle(store: FlowmemStore, ops: list[tuple[Any, ...]]) -> None:
    """Run ``ops`` on ``store`` and on ``InMemoryStore(index=…)``; every search answers alike."""
    reference = InMemoryStore(index={"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text"]})
    for op in ops:
        if op[0] == "put":
            _, namespace, key, text, lang = op
            for target in (store, reference):
                target.put(namespace, key, {"text": text, "lang": lang})
        elif op[0] == "delete":
            _, namespace, key = op
            for target in (store, reference):
                target.delete(namespace, key)
        else:
            _, prefix, query, limit, where = op
            got = store.search(prefix, query=query, limit=limit, filter=where)
            want = reference.search(prefix, query=query, limit=limit, filter=where)
            if prefix == ():  # a search naming no user covers the shared scope only (docs)
                every = reference.search(prefix, query=query, limit=100, filter=where)
                want = [hit for hit in every if hit.namespace[0] != "users"][:limit]
            _same(got, want)


# --- spaces -----------------------------------------------------------------------------------
def test_a_put_or_search_in_another_space_is_refused_naming_both(backing: Store) -> None:
    store = vector_store(backing, ["text"], space="char-64-v1")
    store.put(("d",), "k", {"text": "tea"})
    other = vector_store(backing, ["text"], space="char-64-v2")
    with pytest.raises(EmbeddingSpaceError) as refused:
        other.put(("d",), "j", {"text": "coffee"})
    assert "char-64-v1" in refused.value.message and "char-64-v2" in refused.value.message
    assert refused.value.code == "embedding_space_mismatch"
    assert store.get(("d",), "j") is None  # nothing stored
    with pytest.raises(EmbeddingSpaceError, match="char-64-v1"):
        other.search(("d",), query="tea")
    wider = FlowmemStore(
        MemoryService(backing),
        index={"dims": 32, "embed": CharacterEmbeddings(32), "fields": ["text"]},
        space="char-64-v1",
    )
    with pytest.raises(EmbeddingSpaceError, match="64 dimensions"):
        wider.search(("d",), query="tea")
    assert [hit.key for hit in store.search(("d",), query="tea")] == ["k"]  # the stored space answers


def test_an_embedder_that_returns_another_size_is_refused_before_anything_is_stored(backing: Store) -> None:
    store = FlowmemStore(
        MemoryService(backing), index={"dims": DIMS, "embed": CharacterEmbeddings(DIMS + 1)}
    )
    with pytest.raises(EmbeddingSpaceError, match=f"{DIMS + 1} dimensions"):
        store.put(("d",), "k", {"text": "tea"})
    assert store.get(("d",), "k") is None


# --- owners -----------------------------------------------------------------------------------
def test_a_users_vectors_count_against_the_quota_and_are_erased_with_the_user(backing: Store) -> None:
    service = MemoryService(backing, clock=lambda: 1_700_000_000.0)  # envelopes of one size
    store = FlowmemStore(service, index={"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text"]})
    store.put(("users", "ana", "m"), "k", {"text": "tea"})
    plain = FlowmemStore(service)
    plain.put(("users", "bob", "m"), "k", {"text": "tea"})
    with_vector, without = backing.usage("ana").bytes, backing.usage("bob").bytes
    assert with_vector - without == DIMS * 4
    backing.set_quotas(Quotas(bytes=with_vector + 10))
    with pytest.raises(QuotaExceededError):
        store.put(("users", "ana", "m"), "j", {"text": "t"})
    assert store.get(("users", "ana", "m"), "j") is None
    backing.set_quotas(Quotas())
    backing.erase_user("ana")
    assert backing.usage("ana").bytes == 0
    store.put(("users", "ana", "m"), "k2", {"text": "milk"})
    assert [hit.key for hit in store.search(("users", "ana"), query="tea")] == ["k2"]
    store.delete(("users", "ana", "m"), "k2")
    assert backing.usage("ana").bytes == 0


def test_an_expired_item_is_never_scored_and_its_vectors_go_with_the_purge(backing: Store) -> None:
    now = [1_700_000_000.0]
    service = MemoryService(backing, clock=lambda: now[0])
    store = FlowmemStore(service, index={"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text"]})
    store.put(("users", "ana", "m"), "brief", {"text": "tea"}, ttl=1)
    store.put(("users", "ana", "m"), "long", {"text": "coffee"})
    now[0] += 120
    assert [hit.key for hit in store.search(("users", "ana"), query="tea")] == ["long"]
    before = backing.usage("ana").bytes
    assert store.sweep_ttl() >= 1
    assert before - backing.usage("ana").bytes > DIMS * 4  # the record and its vector


@pytest.mark.parametrize("distance", ["inner_product", "l2"])
def test_other_distances_score_as_postgres_store_defines_them(backing: Store, distance: str) -> None:
    index = {"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text"], "distance_type": distance}
    store = FlowmemStore(MemoryService(backing), index=index)  # type: ignore[arg-type]
    texts = {"a": "apple pie", "b": "zebra", "c": "pineapple"}
    for key, text in texts.items():
        store.put(("d",), key, {"text": text})
    embed = CharacterEmbeddings(DIMS)
    query = embed.embed_query("apple")

    def expected(text: str) -> float:
        vector = embed.embed_query(text)
        if distance == "inner_product":
            return sum(a * b for a, b in zip(query, vector, strict=True))
        return -math.sqrt(sum((a - b) ** 2 for a, b in zip(query, vector, strict=True)))

    want = sorted(texts, key=lambda key: -expected(texts[key]))
    hits = store.search(("d",), query="apple")
    assert [hit.key for hit in hits] == want
    assert [hit.score for hit in hits] == pytest.approx([expected(texts[k]) for k in want], abs=1e-5)


def test_a_search_by_query_refreshes_the_ttl_of_what_it_returns(backing: Store) -> None:
    now = [1_700_000_000.0]
    service = MemoryService(backing, clock=lambda: now[0])
    store = FlowmemStore(service, index={"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text"]})
    store.put(("n",), "k", {"text": "tea"}, ttl=1)
    now[0] += 50
    assert [hit.key for hit in store.search(("n",), query="tea")] == ["k"]  # expires at 110 s now
    now[0] += 50
    assert [hit.key for hit in store.search(("n",), query="tea", refresh_ttl=False)] == ["k"]
    now[0] += 20
    assert store.search(("n",), query="tea") == []


@pytest.mark.postgres
def test_on_a_database_not_collated_c_keys_compare_by_code_point_and_rank_alike(postgres_db_url: str) -> None:
    from flowmem.store.vectors.sql import SqlVectors
    from flowmem.store.vectorstores import vectors_of

    backing = open_store(postgres_db_url)
    try:
        store = vector_store(backing, ["text"])
        for key, text in {"a": "tea", "b": "coffee", "é": "green tea", "z": "water"}.items():
            store.put(("docs", "n"), key, {"text": text})
        store.put(("docs!",), "x", {"text": "tea"})  # a key just past the prefix's range
        plain = [(hit.key, hit.score) for hit in store.search(("docs",), query="tea")]
        collated = vectors_of(backing)
        assert isinstance(collated, SqlVectors)
        collated._collation_is_c = False  # as on an en_US.UTF-8 or ICU database
        assert collated.statement("vectors_scan") != collated.sql["vectors_scan"]
        again = [(hit.key, hit.score) for hit in store.search(("docs",), query="tea")]
        assert again == plain and "x" not in {key for key, _ in again}
    finally:
        backing.close()


def test_a_value_put_without_vectors_loses_the_old_ones(backing: Store) -> None:
    store = vector_store(backing, ["text"])
    store.put(("n",), "k", {"text": "tea"})
    store.put(("n",), "j", {"text": "coffee"})
    store.put(("n",), "k", {"text": "tea", "more": 1}, index=False)  # the old vector made from "tea" goes
    plain = FlowmemStore(MemoryService(backing))  # a store without an index writes the record alone
    plain.put(("n",), "j", {"text": "coffee", "more": 2})
    assert [(hit.key, hit.score) for hit in store.search(("n",), query="tea")] == [("j", None), ("k", None)]
