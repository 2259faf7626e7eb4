"""A load reads a local store on the caller's event loop; PostgreSQL in a worker thread (decision 0140)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from tests.integrations.pydantic_ai.messages import answer, call, prompt, result


def test_a_load_reads_a_local_store_on_the_loop_and_postgresql_in_a_thread(
    flowmem_store: FlowmemConversationStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = [prompt("weather?"), call("c1"), result("c1"), answer("sunny")]
    threads: list[int] = []
    to_thread = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        def run() -> Any:
            threads.append(threading.get_ident())
            return func(*args, **kwargs)

        return await to_thread(run)

    async def turn() -> tuple[Conversation | None, list[int]]:
        await flowmem_store.save(Conversation(conversation_id="c-local", messages=list(history)))
        monkeypatch.setattr(asyncio, "to_thread", counted)
        loaded = await flowmem_store.load("c-local")
        entries = await flowmem_store.load_entries("c-local")
        monkeypatch.setattr(asyncio, "to_thread", to_thread)
        assert entries is not None and len(entries) == len(history)
        return loaded, list(threads)

    loaded, used = asyncio.run(turn())
    assert loaded is not None and loaded.messages == history
    if store_url.startswith("postgresql"):
        assert used  # a network round trip never holds the loop
    else:
        assert used == []
