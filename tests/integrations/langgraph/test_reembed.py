"""``reembed`` / ``flowmem reembed``: a store's vectors move to a new embedding space while searches answer.

The move re-embeds into a ``next`` space and switches atomically; before the switch
every search runs in the old space and answers, after it the old index is refused
(naming both spaces) and the new one answers with scores of the new embedder. Puts
during the move are re-embedded; an interrupted move goes on where it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from flowmem.cli import cli
from flowmem.errors import EmbeddingSpaceError, InvalidInputError
from flowmem.integrations.langgraph import FlowmemStore
from flowmem.integrations.langgraph.reembed import PAGE, reembed
from flowmem.service import MemoryService
from flowmem.service.vector_kinds import vectors
from flowmem.store import Store, open_store
from tests.integrations.langgraph.conftest import BACKENDS
from tests.integrations.langgraph.embeddings import CharacterEmbeddings

OLD = {"dims": 32, "embed": CharacterEmbeddings(32, seed=1), "fields": ["text"]}
NEW = {"dims": 48, "embed": CharacterEmbeddings(48, seed=2), "fields": ["text"]}


@pytest.fixture(params=BACKENDS)
def backing(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh flowmem store of each backend."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/move.db"
    else:
        url = str(request.getfixturevalue("postgres_store_url"))  # migrated already, no rows
    store = open_store(url)
    yield store
    store.close()


def text(i: int) -> str:
    return f"note {i} " + "abcdefghijklmnopqrstuvwxyz"[i % 26] * (1 + i % 5)


def fill(store: FlowmemStore, count: int) -> None:
    for i in range(count):
        namespace = ("users", "ana", "notes") if i % 2 else ("docs",)
        store.put(namespace, f"k{i}", {"text": text(i)})


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_a_store_moves_to_a_new_space_with_searches_answering_throughout(backing: Store) -> None:
    service = MemoryService(backing)
    old = FlowmemStore(service, index=OLD, space="chars-v1")  # type: ignore[arg-type]
    fill(old, 120)
    before = old.search(("docs",), query="ddddd", limit=5)
    answers: list[list[str]] = []

    def progress(done: int, waiting: int) -> None:  # a search between every two batches
        answers.append([hit.key for hit in old.search(("docs",), query="ddddd", limit=5)])

    moved = reembed(service, NEW, space="chars-v2", batch=16, progress=progress)
    assert (moved.old.name, moved.new.name, moved.records) == ("chars-v1", "chars-v2", 120)
    assert len(answers) >= 120 // 16 and all(keys == [hit.key for hit in before] for keys in answers)
    with pytest.raises(EmbeddingSpaceError, match="chars-v2"):
        old.search(("docs",), query="ddddd")
    new = FlowmemStore(service, index=NEW, space="chars-v2")  # type: ignore[arg-type]
    hits = new.search(("docs",), query="ddddd", limit=3)
    embed = NEW["embed"]
    assert hits[0].score == pytest.approx(cosine(embed.embed_query("ddddd"), embed.embed_query(hits[0].value["text"])), abs=1e-5)  # type: ignore[attr-defined]
    assert len(new.search(("users", "ana"), query="note", limit=100)) == 60
    assert vectors(service).spaces("langgraph").next is None


def test_puts_during_a_move_are_re_embedded_before_the_switch(backing: Store) -> None:
    service = MemoryService(backing)
    old = FlowmemStore(service, index=OLD, space="chars-v1")  # type: ignore[arg-type]
    fill(old, 40)
    calls = [0]

    def progress(done: int, waiting: int) -> None:
        calls[0] += 1
        if calls[0] == 1:  # while the move runs: an update, a new item, a delete
            old.put(("docs",), "k0", {"text": "zzzzzzzz"})
            old.put(("docs",), "fresh", {"text": "qqqqqqqq"})
            old.delete(("docs",), "k2")

    moved = reembed(service, NEW, space="chars-v2", batch=8, progress=progress)
    assert moved.passes >= 2
    new = FlowmemStore(service, index=NEW, space="chars-v2")  # type: ignore[arg-type]
    assert new.search(("docs",), query="zzzzzzzz")[0].key == "k0"
    assert new.search(("docs",), query="qqqqqqqq")[0].key == "fresh"
    assert "k2" not in {hit.key for hit in new.search(("docs",), query="note", limit=100)}


class Stop(Exception):
    pass


def test_an_interrupted_move_goes_on_where_it_stopped(backing: Store) -> None:
    service = MemoryService(backing)
    old = FlowmemStore(service, index=OLD, space="chars-v1")  # type: ignore[arg-type]
    fill(old, 30)

    def stop(done: int, waiting: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        reembed(service, NEW, space="chars-v2", batch=10, progress=stop)
    spaces = vectors(service).spaces("langgraph")
    assert spaces.active is not None and spaces.active.name == "chars-v1"
    assert spaces.next is not None and spaces.next.name == "chars-v2"
    assert old.search(("docs",), query="note", limit=1)  # the old space still answers
    moved = reembed(service, NEW, space="chars-v2", batch=10)
    assert moved.records == 20  # the first 10 were kept


def test_flowmem_reembed_moves_a_database_and_says_what_it_did(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    store = open_store(url)
    fill(FlowmemStore(MemoryService(store), index=OLD, space="chars-v1"), 10)  # type: ignore[arg-type]
    store.close()
    spec = "tests.integrations.langgraph.embeddings:CharacterEmbeddings"  # 50 dimensions
    result = CliRunner().invoke(cli, ["reembed", "--embed", spec, "--dims", "50", "--space", "chars-50", "--database", url])
    assert result.exit_code == 0, result.output
    assert "10 records re-embedded" in result.output and "chars-50" in result.output
    again = CliRunner().invoke(cli, ["reembed", "--embed", spec, "--dims", "50", "--space", "chars-50", "--database", url])
    assert isinstance(again.exception, InvalidInputError) and "already" in str(again.exception)


def test_a_move_of_two_thousand_items_answers_searches_throughout(tmp_path: Path) -> None:
    # 2,000 items: eight pages of pending vectors (reembed.PAGE), 24 batches of 100 with a
    # search after each; 10,000 items in batches of 500 made 40 pages and 40 searches of
    # the same kind, 4-5 s of CPU where this takes about a fifth (decision 0205)
    count = 2_000
    backing = open_store(f"sqlite:///{tmp_path}/big.db")
    try:
        service = MemoryService(backing)
        old = FlowmemStore(service, index=OLD, space="chars-v1")  # type: ignore[arg-type]
        old.batch([_put(i) for i in range(count)])
        expected = [hit.key for hit in old.search(("docs",), query="kkkk", limit=3)]
        seen: list[Any] = []
        moved = reembed(
            service, NEW, space="chars-v2", batch=100,
            progress=lambda done, waiting: seen.append([h.key for h in old.search(("docs",), query="kkkk", limit=3)]),
        )
        assert count > 4 * PAGE and moved.records == count
        assert len(seen) >= 20 and all(keys == expected for keys in seen)
    finally:
        backing.close()


def _put(i: int) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(("docs",), f"k{i}", {"text": text(i)})
