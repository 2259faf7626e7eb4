"""A load whose kept history its line's state proves copies it without reading the texts (decision 0183).

``FlowmemConversationStore.skips_proven_texts`` is the seam. A load read every message's
text only to compare it with the kept copy's; now the kept history holds the state of
its line (``LineState``: the line's buffer stamp and version, where the history ends) it
was read at, or a save of this store appended to it at, and a load finding the line in
that state copies the kept history without reading the texts. The plain path (False)
reads and compares them. Every load gives what the plain path and a store that keeps
nothing give, whatever else writes the conversation: another store, the buffer's own
writers, a rewind (a new line), a response delivered again (MEM-2), a call healed (MEM-3).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.conversation import Conversation

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.store.base import SESSION_SCOPE, Address
from flowmem.store.conversations import LINE
from flowmem.store.conversations.sql import SqlConversations
from tests.integrations.pydantic_ai.messages import answer, call, prompt, turn
from tests.migrated import migrated_sqlite_url

CID = "c1"


def _exact(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same data: the same types at every depth, equal values (sharing aside)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_exact(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_exact(a[k], b[k]) for k in a)
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return _exact(vars(a), vars(b))
    return bool(a == b)


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the conversation statements run from now on."""
    names: list[str] = []
    run = SqlConversations._run

    def counted(self: Any, conn: Any, name: str, params: Any) -> Any:
        names.append(name)
        return run(self, conn, name, params)

    monkeypatch.setattr(SqlConversations, "_run", counted)
    return names


@pytest.mark.parametrize("skips", [True, False], ids=["proven", "plain"])
def test_a_load_after_this_stores_save_reads_no_texts(
    store_url: str, monkeypatch: pytest.MonkeyPatch, skips: bool
) -> None:
    """Turn after turn (load, add a turn, save) the load reads the record and where the
    history is, not the texts (``pa_messages``); the plain path reads them every time."""
    store = FlowmemConversationStore.from_url(store_url)
    store.skips_proven_texts = skips
    plain = FlowmemConversationStore(store.memory)  # the same database (memory:// too)
    plain.skips_proven_texts = False
    history = turn(0)

    async def scenario() -> list[list[str]]:
        await store.save(Conversation(conversation_id=CID, messages=list(history)))
        loads: list[list[str]] = []
        for i in range(1, 5):
            names = _statements(monkeypatch)
            loaded = await store.load(CID)
            loads.append(list(names))
            monkeypatch.undo()
            assert loaded is not None and loaded.messages == history
            again = await plain.load(CID)
            assert again is not None
            assert _exact(loaded.messages, again.messages)
            loaded.messages.extend(turn(i))
            history.extend(turn(i))
            await store.save(loaded)
        return loads

    try:
        loads = asyncio.run(scenario())
    finally:
        store.close()
    texts = ["pa_messages" in names for names in loads]
    # the first load after the first save reads them (nothing kept yet); then each is proven
    assert texts == ([True, False, False, False] if skips else [True] * 4)
    if skips:
        assert loads[-1] == ["pa_get", "pa_messages_line"]


OPS = st.lists(
    st.sampled_from(["turn", "other_turn", "by_hand", "rewind", "again", "dangling", "limit"]),
    min_size=1,
    max_size=7,
)


async def _loads(stores: list[FlowmemConversationStore]) -> list[Any]:
    """What each store loads, and a store that keeps nothing: messages and revision."""
    fresh = FlowmemConversationStore(stores[0].memory)
    found = []
    for store in [*stores, fresh]:
        loaded = await store.load(CID)
        assert loaded is not None
        found.append((loaded.messages, loaded.revision))
    return found


async def _scenario(url: str, ops: list[str]) -> None:
    proven = FlowmemConversationStore.from_url(url)
    plain = FlowmemConversationStore(proven.memory)
    plain.skips_proven_texts = False
    stores = [proven, plain]
    try:
        await proven.save(Conversation(conversation_id=CID, messages=turn(0)))
        for i, op in enumerate(ops, start=1):
            loaded = await proven.load(CID)  # kept (and proven) before the other writers act
            assert loaded is not None
            if op == "turn":
                loaded.messages.extend(turn(i))
                await proven.save(loaded)
            elif op == "other_turn":  # another store of the same database
                other = await plain.load(CID)
                assert other is not None
                other.messages.extend(turn(i))
                await plain.save(other)
            elif op == "by_hand":  # the buffer's own writers (the API's buffer routes)
                row = {"role": "user", "content": f"by hand {i}"}
                proven.memory.store.append(Address(SESSION_SCOPE, CID, LINE), [row])
            elif op == "rewind":  # a history cut back: a new line
                loaded.messages[:] = [*loaded.messages[:4], *turn(i)]
                await proven.save(loaded)
            elif op == "again":  # a response delivered again (MEM-2: no row), then an answer
                again = [call("c0", t=1, run="r0"), answer(f"a{i}", t=4 * i + 1, run=f"r{i}")]
                loaded.messages.extend(again)
                await proven.save(loaded)
            elif op == "dangling":  # a call left unanswered: the next load heals it (MEM-3)
                loaded.messages.extend([prompt(f"q{i}", t=4 * i), call(f"c{i}", t=4 * i + 1)])
                await proven.save(loaded)
            else:
                limited = [await store.load(CID, limit=3) for store in stores]
                assert all(found is not None for found in limited)
                assert limited[0].messages == limited[1].messages  # type: ignore[union-attr]
            found = await _loads(stores)
            assert _exact(found[0], found[2]) and _exact(found[1], found[2])
            again = await _loads(stores)  # read again, from what each kept
            assert _exact(again[0], found[2]) and _exact(again[1], found[2])
    finally:
        proven.close()


@settings(max_examples=25, deadline=None)
@given(ops=OPS)
def test_every_load_gives_what_the_plain_path_and_a_fresh_store_give(ops: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="proven-") as tmp:
        url = migrated_sqlite_url(Path(tmp) / "pa.db")
        asyncio.run(_scenario(url, ops))


@pytest.mark.postgres
@pytest.mark.parametrize(
    "ops", [["turn", "other_turn", "turn", "by_hand", "turn"], ["turn", "rewind", "turn", "again"]]
)
def test_every_load_gives_what_the_plain_path_gives_on_postgresql(
    postgres_store_url: str, ops: list[str]
) -> None:
    asyncio.run(_scenario(postgres_store_url, ops))
