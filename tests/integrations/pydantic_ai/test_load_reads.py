"""A load of a store built for no user reads its record and its messages on one connection (decision 0176).

The record (``pa_get``), where its head's history is and whether its messages are whole
(``pa_messages_line``), and the messages (``pa_messages``): three statements on one
loan of a connection, where the record and the messages were two loans before. What
a load gives is the same (the conformance, round-trip and rule suites), a user-bound
store and a load with a ``limit`` of 0 read as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.scope import ExecutionContext
from tests.integrations.pydantic_ai.messages import answer, call, prompt, result


def _history(turns: int) -> list[Any]:
    return [
        m
        for i in range(turns)
        for m in (
            prompt(f"q{i}", t=4 * i, run=f"r{i}"),
            call(f"c{i}", t=4 * i + 1, run=f"r{i}"),
            result(f"c{i}", t=4 * i + 2, run=f"r{i}"),
            answer(f"a{i}", t=4 * i + 3, run=f"r{i}"),
        )
    ]


def _loans(store: FlowmemConversationStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the connections the store's database lends from now on."""
    lent: list[int] = []
    database = store.memory.store
    lend = database.connection  # type: ignore[attr-defined]

    @contextmanager
    def counted() -> Iterator[Any]:
        lent.append(1)
        with lend() as conn:
            yield conn

    monkeypatch.setattr(database, "connection", counted)
    return lent


@pytest.mark.parametrize("limit", [None, 3])
def test_a_load_reads_its_record_and_messages_on_one_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    async def scenario() -> None:
        store = FlowmemConversationStore.from_url(f"sqlite:///{tmp_path / 'pa.db'}")
        try:
            history = _history(5)
            await store.save(Conversation(conversation_id="c1", messages=history))
            await store.load("c1")  # validated once, kept
            lent = _loans(store, monkeypatch)
            loaded = await store.load("c1", limit=limit)
            assert loaded is not None
            assert loaded.messages == (history if limit is None else history[-limit:])
            assert len(lent) == 1
        finally:
            store.close()

    asyncio.run(scenario())


def test_a_user_bound_load_and_a_load_of_none_read_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        url = f"sqlite:///{tmp_path / 'pa.db'}"
        store = FlowmemConversationStore.from_url(url, context=ExecutionContext(user_id="alice"))
        try:
            history = _history(2)
            await store.save(Conversation(conversation_id="c1", messages=history))
            assert (await store.load("c1", limit=0)) is not None
            loaded = await store.load("c1")
            assert loaded is not None and loaded.messages == history
            lent = _loans(store, monkeypatch)
            await store.load("c1")
            assert len(lent) > 1  # it asks who holds the entry first (decision 0109)
        finally:
            store.close()

    asyncio.run(scenario())
