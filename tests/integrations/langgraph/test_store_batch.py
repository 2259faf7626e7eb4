"""``FlowmemStore.batch`` writes its puts and deletes in one transaction: one commit, all or none.

The seam (``FlowmemStore.writes_in_one_transaction``) is held equal to the plain path,
each put its own transaction: the same batches on two stores of one backend, one each
way, answer alike (values, timestamps, scores, expiry). PostgreSQL counts the
transactions (the transaction ids a batch takes); every backend shows all or none: a
batch whose last put is refused (the user's quota) stores none of its puts.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, Item, Op, PutOp, SearchOp

from flowmem.errors import EmbeddingSpaceError, QuotaExceededError
from flowmem.integrations.langgraph import FlowmemStore
from flowmem.service import MemoryService
from flowmem.store import Quotas, Store, open_store
from tests.integrations.langgraph.conftest import BACKENDS
from tests.integrations.langgraph.embeddings import CharacterEmbeddings
from tests.integrations.langgraph.store_oracle import EVERYTHING, Clock

DIMS = 16
NAMESPACES = [("docs",), ("docs", "v1"), ("users", "ana", "notes"), ("users", "bob")]


def _index() -> dict[str, Any]:
    return {"dims": DIMS, "embed": CharacterEmbeddings(DIMS), "fields": ["text"]}


@pytest.fixture(params=BACKENDS)
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh flowmem store of each backend."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/batch.db"
    else:
        url = str(request.getfixturevalue("postgres_store_url"))  # migrated already, no rows
    store = open_store(url)
    yield store
    store.close()


def _seen(item: Item | None) -> tuple[Any, ...] | None:
    """All an answer says: namespace, key, value, timestamps, score."""
    if item is None:
        return None
    return (
        tuple(item.namespace),
        item.key,
        item.value,
        item.created_at,
        item.updated_at,
        getattr(item, "score", None),
    )


def _random_batch(rng: random.Random, step: int) -> list[Op]:
    ops: list[Op] = []
    for _ in range(rng.randint(1, 12)):
        namespace, key = rng.choice(NAMESPACES), f"k{rng.randint(0, 9)}"
        roll = rng.random()
        if roll < 0.15:
            ops.append(PutOp(namespace, key, None))  # a delete
        elif roll < 0.25:
            ops.append(GetOp(namespace, key))
        elif roll < 0.3:
            ops.append(SearchOp(namespace[:1], query=rng.choice(["aaa", "note", "zz"]), limit=4))
        else:
            value: dict[str, Any] = {
                "text": "".join(rng.choice("abcnotez ") for _ in range(rng.randint(1, 12))),
                "n": step,
            }
            index = rng.choice([None, None, False, ["text"]])
            ttl = rng.choice([None, None, 1.0, 3.0])
            ops.append(PutOp(namespace, key, value, index=index, ttl=ttl))
    return ops


def _everything(store: FlowmemStore) -> list[Any]:
    found: list[Any] = []
    for namespace in (("docs",), ("users", "ana"), ("users", "bob")):
        found.append(
            [_seen(i) for i in store.search(namespace, limit=EVERYTHING, refresh_ttl=False)]
        )
        found.append(
            [
                _seen(i)
                for i in store.search(namespace, query="note", limit=EVERYTHING, refresh_ttl=False)
            ]
        )
    return found


@pytest.mark.parametrize("indexed", [True, False], ids=["index", "no-index"])
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_one_transaction_answers_as_each_put_its_own(
    tmp_path: Path, backend: str, indexed: bool
) -> None:
    urls = (
        ("memory://", "memory://")
        if backend == "memory"
        else tuple(f"sqlite:///{tmp_path}/{n}.db" for n in "ab")
    )
    _compare(urls, indexed, backend)


@pytest.mark.postgres
@pytest.mark.parametrize("indexed", [True, False], ids=["index", "no-index"])
def test_one_transaction_answers_as_each_put_its_own_on_postgresql(
    postgres_store_url: str, postgres_db_url: str, indexed: bool
) -> None:
    _compare((postgres_store_url, postgres_db_url), indexed, "postgres")


def _compare(urls: tuple[str, str], indexed: bool, seed: str) -> None:
    """Random batches on two stores (``urls``), one with the seam and one without, answer alike."""
    clock = Clock()
    made: list[Store] = []
    stores: list[FlowmemStore] = []
    for one, url in zip((True, False), urls, strict=True):
        raw = open_store(url)
        made.append(raw)
        store = FlowmemStore(MemoryService(raw, clock=clock), index=_index() if indexed else None)  # type: ignore[arg-type]
        store.writes_in_one_transaction = one
        stores.append(store)
    try:
        rng = random.Random(f"batch-{seed}-{indexed}")
        for step in range(40):
            ops = _random_batch(rng, step)
            answers = [
                [
                    _seen(r) if not isinstance(r, list) else [_seen(i) for i in r]
                    for r in s.batch(ops)
                ]
                for s in stores
            ]
            assert answers[0] == answers[1], (step, ops)
            clock.advance(rng.choice([0, 1, 30, 90]))
            if step % 10 == 9:
                assert _everything(stores[0]) == _everything(stores[1]), step
        assert _everything(stores[0]) == _everything(stores[1])
        assert any(_everything(stores[0]))  # the batches left items to compare
    finally:
        for raw in made:
            raw.close()


def _transaction_ids(raw: Store) -> int:
    """The next transaction id the PostgreSQL server gives: it takes one per write transaction."""
    with raw._connection() as conn:  # type: ignore[attr-defined]
        row = conn.execute(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
        ).fetchone()
    return int(row[0])


@pytest.mark.postgres
@pytest.mark.parametrize("indexed", [True, False], ids=["index", "no-index"])
def test_a_batch_of_puts_and_deletes_is_one_transaction(
    postgres_store_url: str, indexed: bool
) -> None:
    raw = open_store(postgres_store_url)
    try:
        store = FlowmemStore(MemoryService(raw), index=_index() if indexed else None)  # type: ignore[arg-type]
        store.batch([PutOp(("docs",), f"old{i}", {"text": "old"}) for i in range(3)])
        before = _transaction_ids(raw)
        ops: list[Op] = [
            PutOp(ns, f"k{i}", {"text": f"note {i}"}) for i in range(10) for ns in NAMESPACES
        ]
        ops += [
            PutOp(("docs",), "old0", None),
            PutOp(("docs",), "old1", {"text": "new"}),
            GetOp(("docs",), "old2"),
        ]
        results = store.batch(ops)
        taken = _transaction_ids(raw) - before
        assert taken == 1, f"{taken} transactions for one batch"
        assert results[-1] is not None and results[-1].value == {"text": "old"}
        assert store.get(("docs",), "old0") is None
        kept = store.get(("docs",), "old1")
        assert kept is not None and kept.value == {"text": "new"}
        assert len(store.search(("users", "ana"), limit=EVERYTHING)) == 10
    finally:
        raw.close()


@pytest.mark.parametrize("indexed", [True, False], ids=["index", "no-index"])
def test_a_batch_whose_last_put_is_refused_stores_none_of_its_puts(
    backing: Store, indexed: bool
) -> None:
    service = MemoryService(backing, clock=lambda: 1_700_000_000.0)
    store = FlowmemStore(service, index=_index() if indexed else None)  # type: ignore[arg-type]
    store.put(("users", "ana", "m"), "kept", {"text": "tea"})
    backing.set_quotas(Quotas(bytes=backing.usage("ana").bytes + 400))
    ops: list[Op] = [
        PutOp(("docs",), "global", {"text": "a global item"}),
        PutOp(("users", "ana", "m"), "small", {"text": "fits"}),
        PutOp(("users", "ana", "m"), "kept", None),
        PutOp(("users", "ana", "m"), "big", {"text": "x" * 2_000}),
    ]
    with pytest.raises(QuotaExceededError):
        store.batch(ops)
    backing.set_quotas(Quotas())
    assert store.get(("docs",), "global") is None
    assert store.get(("users", "ana", "m"), "small") is None
    assert store.get(("users", "ana", "m"), "kept") is not None


def test_a_batch_refused_for_its_space_stores_nothing(backing: Store) -> None:
    service = MemoryService(backing)
    FlowmemStore(service, index=_index(), space="first").put(("docs",), "a", {"text": "tea"})  # type: ignore[arg-type]
    other = FlowmemStore(service, index=_index(), space="second")  # type: ignore[arg-type]
    ops: list[Op] = [
        PutOp(("docs",), "plain", {"text": "x"}, index=False),
        PutOp(("docs",), "b", {"text": "milk"}),
    ]
    with pytest.raises(EmbeddingSpaceError):
        other.batch(ops)
    plain = FlowmemStore(service)
    assert plain.get(("docs",), "plain") is None and plain.get(("docs",), "b") is None
