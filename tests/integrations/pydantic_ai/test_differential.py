"""``FlowmemConversationStore`` beside ``InMemoryConversationStore`` where flowmem's rules meet pydantic-ai's.

Where pydantic-ai raises ``ConversationConflict`` (an id under another scope), flowmem
raises it too (``ConversationOwnedElsewhere``, also flowmem's ``AccessDeniedError``).
Where flowmem deliberately differs, the test shows both: one result per call (MEM-1,
decision 0099) where the in-memory store keeps a late second one, and an owner that a
record cannot change (MEM-9).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, repair_messages

from flowmem.errors import AccessDeniedError
from flowmem.integrations.pydantic_ai import ConversationOwnedElsewhere, FlowmemConversationStore
from tests.integrations.pydantic_ai.messages import answer, call, prompt, result


def _results(messages: list[ModelMessage], call_id: str) -> list[Any]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id
    ]


async def _two_owners(store: ConversationStore) -> None:
    await store.save(Conversation(conversation_id="c1", messages=[prompt("a", 0)]), scope="alice")
    await store.save(Conversation(conversation_id="c2", messages=[prompt("b", 0)]), scope="bob")


async def _fork_onto(store: ConversationStore) -> None:
    await store.fork("c2", new_conversation_id="c1", scope="bob")


async def _save_fresh(store: ConversationStore) -> None:
    await store.save(Conversation(conversation_id="c1", messages=[prompt("x", 0)]), scope="bob")


async def _write_stale(store: ConversationStore) -> None:
    record = await store.read_record("c1")
    assert record is not None
    await store.write_record(dataclasses.replace(record, scope="bob"), expected_revision=None)


@pytest.mark.parametrize(
    "operation",
    [_fork_onto, _save_fresh, _write_stale],
    ids=["fork-onto-its-id", "save-a-new-one", "write-a-stale-record"],
)
def test_an_id_under_another_scope_raises_conversation_conflict_as_in_memory(
    operation: Callable[[ConversationStore], Awaitable[None]],
    flowmem_store: FlowmemConversationStore,
) -> None:
    for store in (InMemoryConversationStore(), flowmem_store):
        asyncio.run(_two_owners(store))
        with pytest.raises(ConversationConflict):
            asyncio.run(operation(store))
        loaded = asyncio.run(store.load("c1", scope="alice"))
        assert loaded is not None and len(loaded.messages) == 1  # nothing changed
    assert flowmem_store.memory.store.get_session("c1").owner == "alice"


def test_mem_9_a_session_of_another_owner_is_a_conflict_and_a_denial(
    flowmem_store: FlowmemConversationStore,
) -> None:
    asyncio.run(_two_owners(flowmem_store))
    with pytest.raises(ConversationOwnedElsewhere) as raised:
        asyncio.run(_fork_onto(flowmem_store))
    assert isinstance(raised.value, ConversationConflict)
    assert isinstance(raised.value, AccessDeniedError)
    assert raised.value.conversation_id == "c1"
    assert "another owner" in str(raised.value)


def test_mem_9_a_record_cannot_move_a_conversation_to_another_owner(
    flowmem_store: FlowmemConversationStore,
) -> None:
    """A deliberate difference: the in-memory store lets a record take another scope."""

    async def move(store: ConversationStore) -> None:
        record = await store.read_record("c1")
        assert record is not None
        await store.write_record(dataclasses.replace(record, scope="bob"), expected_revision=record.revision)

    theirs = InMemoryConversationStore()
    asyncio.run(_two_owners(theirs))
    asyncio.run(move(theirs))
    assert asyncio.run(theirs.load("c1", scope="bob")) is not None
    asyncio.run(_two_owners(flowmem_store))
    with pytest.raises(ConversationOwnedElsewhere):
        asyncio.run(move(flowmem_store))
    assert asyncio.run(flowmem_store.load("c1", scope="alice")) is not None


async def _late_result(store: ConversationStore) -> list[ModelMessage]:
    """An interrupted call, a new turn after it, then the call's real result saved late."""
    await store.save(Conversation(conversation_id="c1", messages=[prompt("q", 0), call("call_w1", t=1)]))
    loaded = await store.load("c1")
    assert loaded is not None
    if isinstance(store, InMemoryConversationStore):
        loaded.messages = repair_messages(loaded.messages)  # pydantic-ai's own placeholder
    loaded.messages.extend([prompt("again", 3, "r2"), answer("yes", 4, "r2")])
    await store.save(loaded)
    later = await store.load("c1")
    assert later is not None
    later.messages.append(result("call_w1", t=5, run="r1"))
    await store.save(later)
    entries = await store.load_entries("c1") or []
    return [entry.message for entry in entries]


def test_mem_10_a_late_result_after_the_placeholder_is_not_stored_twice(
    flowmem_store: FlowmemConversationStore,
) -> None:
    theirs = asyncio.run(_late_result(InMemoryConversationStore()))
    assert len(_results(theirs, "call_w1")) == 2  # the in-memory store keeps both
    ours = asyncio.run(_late_result(flowmem_store))
    assert _results(ours, "call_w1") == ["Tool call was interrupted; no result."]
    assert [type(m).__name__ for m in ours] == [
        "ModelRequest", "ModelResponse", "ModelRequest", "ModelRequest", "ModelResponse",
    ]
    loaded = asyncio.run(flowmem_store.load("c1"))
    assert loaded is not None and len(loaded.messages) == 5


def test_mem_1_a_result_saved_again_after_the_turn_is_stored_once(
    flowmem_store: FlowmemConversationStore,
) -> None:
    async def twice(store: ConversationStore) -> list[ModelMessage]:
        history = [prompt("q", 0), call("t1", t=1), result("t1", t=2), answer("a", 3)]
        await store.save(Conversation(conversation_id="c1", messages=history))
        loaded = await store.load("c1")
        assert loaded is not None
        loaded.messages.extend([result("t1", t=4), prompt("more", 5, "r2"), answer("b", 6, "r2")])
        await store.save(loaded)
        return [entry.message for entry in await store.load_entries("c1") or []]

    assert len(_results(asyncio.run(twice(InMemoryConversationStore())), "t1")) == 2
    ours = asyncio.run(twice(flowmem_store))
    assert len(_results(ours, "t1")) == 1
    assert len(ours) == 6
