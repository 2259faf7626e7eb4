"""A conversation's writes run one at a time, in the order made, and a late refusal is not silent (decision 0156).

A worker thread cannot be stopped: a run cancelled while its save (or a write-ahead)
stores the conversation leaves the write going. The next run's load and save must not
overtake it: a save that landed first moved the revision on, the cancelled one was
refused as a ``ConversationConflict`` in a thread nobody awaited, and its messages
were lost unseen. ``HeldTables`` is the seam: the store's first conversation write
holds until the test lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai.conversation import Conversation

from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations.pydantic_ai.messages import answer, prompt
from tests.integrations.test_in_order import OVERTAKE_SECONDS, Gate, cancel_once_held

CID = "c1"


class HeldTables:
    """The store's conversation tables, whose first write waits for the gate's release; writes logged."""

    def __init__(self, tables: Any, gate: Gate) -> None:
        self.tables, self.gate, self.writes = tables, gate, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tables, name)

    def write(self, *args: Any) -> Any:
        """Log the write's start and end; hold the first until released."""
        return self._held(self.tables.write, *args)

    def write_held(self, *args: Any) -> Any:
        """``write``'s hold and log, for the store's write (decision 0183)."""
        return self._held(self.tables.write_held, *args)

    def _held(self, call: Any, *args: Any) -> Any:
        self.writes += 1
        name = "first" if self.writes == 1 else f"write {self.writes}"
        self.gate.events.append(("start", name))
        if name == "first":
            self.gate.first_entered.set()
            self.gate.release.wait(30)
        else:
            self.gate.other_started.set()
        try:
            return call(*args)
        finally:
            self.gate.events.append(("end", name))


def _store(memory: MemoryService, gate: Gate) -> FlowmemConversationStore:
    store = FlowmemConversationStore(memory)
    store.tables = HeldTables(store.tables, gate)
    return store


async def _release_after_a_while(gate: Gate) -> None:
    """Let the held write go once another write started, or after ``OVERTAKE_SECONDS``."""
    await asyncio.to_thread(gate.other_started.wait, OVERTAKE_SECONDS)
    gate.release.set()


async def _texts(store: FlowmemConversationStore) -> list[Any]:
    loaded = await store.load(CID)
    return [] if loaded is None else [m.parts[0].content for m in loaded.messages]


def _first_run() -> Conversation:
    return Conversation(conversation_id=CID, messages=[prompt("first"), answer("one")])


def test_the_next_runs_load_and_save_wait_for_a_save_whose_run_was_cancelled() -> None:
    gate = Gate()
    store = _store(MemoryService(MemoryStore()), gate)

    async def scenario() -> list[Any]:
        await cancel_once_held(store.save(_first_run()), gate)

        async def next_run() -> None:  # load what is stored, add the turn, save
            conversation = await store.load(CID) or Conversation(conversation_id=CID)
            conversation.messages.extend([prompt("second", 2), answer("two", 3)])
            await store.save(conversation)

        running = asyncio.create_task(next_run())
        await _release_after_a_while(gate)
        await running
        return await _texts(store)

    # before: the next run loaded nothing and saved its turn, and the first was refused unseen
    assert asyncio.run(scenario()) == ["first", "one", "second", "two"]
    assert gate.events == [("start", "first"), ("end", "first"), ("start", "write 2"), ("end", "write 2")]


def test_a_save_cancelled_before_its_turn_is_never_made() -> None:
    gate = Gate()
    store = _store(MemoryService(MemoryStore()), gate)

    async def scenario() -> list[Any]:
        await cancel_once_held(store.save(_first_run()), gate)
        unloaded = Conversation(conversation_id=CID, messages=[prompt("dropped")])
        waiting = asyncio.create_task(store.save(unloaded))
        await asyncio.sleep(OVERTAKE_SECONDS)  # queued behind the held save
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        gate.release.set()
        return await _texts(store)

    assert asyncio.run(scenario()) == ["first", "one"]
    assert gate.events == [("start", "first"), ("end", "first")]


def test_a_save_refused_after_its_run_was_cancelled_is_logged_with_what_it_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gate()
    memory = MemoryService(MemoryStore())
    store = _store(memory, gate)
    other = FlowmemConversationStore(memory)  # another writer (another process, as far as it knows)

    async def scenario() -> list[Any]:
        await cancel_once_held(store.save(_first_run()), gate)
        await other.save(Conversation(conversation_id=CID, messages=[prompt("elsewhere")]))
        gate.release.set()
        return await _texts(store)  # read after the held save ended

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        assert asyncio.run(scenario()) == ["elsewhere"]
    lost = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1, caplog.text
    assert "conversation 'c1'" in lost[0] and "2 new entries" in lost[0] and "ConversationConflict" in lost[0]
