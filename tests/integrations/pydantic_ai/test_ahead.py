"""Write-ahead (decision 0099): ``store.run`` stores the prompt and each call before the tool runs, then nothing twice.

Each test runs a real pydantic-ai ``Agent`` (a ``FunctionModel`` naming its calls) on
every backend; the differential ones run the same agent with pydantic-ai's
``InMemoryConversationStore`` and its plain ``agent.run`` + ``save``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from flowmem.integrations.pydantic_ai import FlowmemConversationStore, WriteAhead

CID = "trip-1"


def _shape(messages: list[ModelMessage]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Messages as kinds and contents (timestamps and run ids differ between two runs)."""
    shaped = []
    for message in messages:
        parts = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                parts.append(("call", part.tool_call_id))
            elif isinstance(part, ToolReturnPart):
                parts.append(("result", (part.tool_call_id, part.content)))
            else:
                parts.append((part.part_kind, getattr(part, "content", None)))
        shaped.append((type(message).__name__, parts))
    return shaped


class Scripted:
    """A model calling ``weather`` (once per call id) for a prompt, answering a tool's result in text."""

    def __init__(self, *call_ids: str) -> None:
        self.call_ids = call_ids or ("call_w1",)
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts):
            prompt = next(p for p in last.parts if isinstance(p, UserPromptPart))
            if prompt.content == "weather?":
                return ModelResponse(
                    parts=[ToolCallPart("weather", {"city": c}, tool_call_id=c) for c in self.call_ids]
                )
        return ModelResponse(parts=[TextPart("done")])


def _agent(store: ConversationStore | None, seen_in_tool: list[list[ModelMessage]], *ids: str) -> Agent[None, str]:
    """An agent whose tool reads the stored conversation as it starts (into ``seen_in_tool``)."""
    agent = Agent(FunctionModel(Scripted(*ids)))

    @agent.tool_plain
    async def weather(city: str) -> str:
        if store is not None:
            entries = await store.load_entries(CID) or []
            seen_in_tool.append([entry.message for entry in entries])
        return f"sunny in {city}"

    return agent


async def _turn(store: FlowmemConversationStore, agent: Agent[None, str], prompt: str) -> Any:
    conversation = await store.load(CID, scope="ana") or Conversation(conversation_id=CID)
    return await store.run(agent, prompt, conversation=conversation, scope="ana")


def test_the_prompt_and_the_call_are_stored_before_the_tool_runs(
    flowmem_store: FlowmemConversationStore,
) -> None:
    seen: list[list[ModelMessage]] = []
    asyncio.run(_turn(flowmem_store, _agent(flowmem_store, seen), "weather?"))
    (stored,) = seen
    assert _shape(stored) == [
        ("ModelRequest", [("user-prompt", "weather?")]),
        ("ModelResponse", [("call", "call_w1")]),
    ]
    assert flowmem_store.memory.store.get_session(CID).owner == "ana"


def test_parallel_calls_are_stored_once_before_either_tool_runs(
    flowmem_store: FlowmemConversationStore,
) -> None:
    seen: list[list[ModelMessage]] = []
    asyncio.run(_turn(flowmem_store, _agent(flowmem_store, seen, "call_a", "call_b"), "weather?"))
    assert len(seen) == 2
    for stored in seen:
        assert _shape(stored)[-1] == ("ModelResponse", [("call", "call_a"), ("call", "call_b")])
    entries = asyncio.run(flowmem_store.load_entries(CID))
    assert [type(e.message).__name__ for e in entries] == [
        "ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse",
    ]


def test_mem_1_the_runs_save_stores_what_the_in_memory_store_stores_and_nothing_twice(
    flowmem_store: FlowmemConversationStore,
) -> None:
    async def plain(store: InMemoryConversationStore, agent: Agent[None, str], prompt: str) -> None:
        conversation = await store.load(CID) or Conversation(conversation_id=CID)
        await store.save(await agent.run(prompt, conversation=conversation))

    theirs = InMemoryConversationStore()
    agent = _agent(None, [])
    for prompt in ("weather?", "thanks", "weather?"):
        asyncio.run(plain(theirs, agent, prompt))
        asyncio.run(_turn(flowmem_store, agent, prompt))
    want = asyncio.run(theirs.load_entries(CID))
    got = asyncio.run(flowmem_store.load_entries(CID))
    assert _shape([e.message for e in got]) == _shape([e.message for e in want])
    assert len(got) == 10
    assert [e.parent_id for e in got[1:]] == [e.id for e in got[:-1]]


def test_a_saved_result_continues_from_the_write_ahead_revision(
    flowmem_store: FlowmemConversationStore,
) -> None:
    async def scenario() -> tuple[list[Any], Conversation, Conversation | None]:
        agent = _agent(None, [])
        result = await _turn(flowmem_store, agent, "weather?")
        again = await flowmem_store.save(result, scope="ana")  # nothing new: no conflict
        carried = result.conversation
        second = await flowmem_store.run(agent, "thanks", conversation=carried, scope="ana")
        return again, second.conversation, await flowmem_store.load(CID, scope="ana")

    again, carried, loaded = asyncio.run(scenario())
    assert again == []
    assert loaded is not None and carried.revision == loaded.revision
    assert len(loaded.messages) == 6


def test_a_save_made_since_the_load_stops_the_run_before_its_tool(
    flowmem_store: FlowmemConversationStore,
) -> None:
    async def scenario() -> list[list[ModelMessage]]:
        seen: list[list[ModelMessage]] = []
        agent = _agent(flowmem_store, seen)
        await _turn(flowmem_store, agent, "thanks")
        stale = await flowmem_store.load(CID, scope="ana")
        await _turn(flowmem_store, agent, "thanks")
        assert stale is not None
        with pytest.raises(ConversationConflict):
            await flowmem_store.run(agent, "weather?", conversation=stale, scope="ana")
        return seen

    assert asyncio.run(scenario()) == []  # the tool never ran
    loaded = asyncio.run(flowmem_store.load(CID))
    assert loaded is not None and len(loaded.messages) == 4


def test_a_save_that_stores_calls_with_their_results_warns_once_naming_the_fix(
    flowmem_store: FlowmemConversationStore, caplog: pytest.LogCaptureFixture
) -> None:
    async def plain(prompt: str) -> None:
        conversation = await flowmem_store.load(CID, scope="ana") or Conversation(conversation_id=CID)
        result = await _agent(None, []).run(prompt, conversation=conversation)
        await flowmem_store.save(result, scope="ana")

    caplog.set_level(logging.WARNING, logger="flowmem.integrations.pydantic_ai")
    asyncio.run(_turn(flowmem_store, _agent(None, []), "weather?"))
    assert not caplog.records
    asyncio.run(plain("weather?"))
    asyncio.run(plain("weather?"))
    (record,) = caplog.records
    assert "store.run(agent" in record.getMessage() and "write_ahead" in record.getMessage()


def test_write_ahead_needs_the_conversation_the_run_continues(
    flowmem_store: FlowmemConversationStore,
) -> None:
    with pytest.raises(TypeError, match="Conversation"):
        flowmem_store.write_ahead(CID, scope="ana")  # type: ignore[arg-type]
    ahead = flowmem_store.write_ahead(Conversation(conversation_id=CID), scope="ana")
    assert isinstance(ahead, WriteAhead)


def test_agent_iter_with_the_capability_writes_ahead_and_saves_the_rest_once(
    flowmem_store: FlowmemConversationStore,
) -> None:
    async def scenario() -> tuple[list[list[ModelMessage]], list[Any]]:
        seen: list[list[ModelMessage]] = []
        agent = _agent(flowmem_store, seen)
        conversation = Conversation(conversation_id=CID)
        ahead = flowmem_store.write_ahead(conversation, scope="ana")
        async with agent.iter("weather?", conversation=conversation, capabilities=[ahead]) as run:
            async for _node in run:
                pass
        assert run.result is not None
        return seen, await flowmem_store.save(run.result, scope="ana")

    (stored,), saved = asyncio.run(scenario())
    assert _shape([entry.message for entry in saved]) == [("ModelResponse", [("text", "done")])]
    assert _shape(stored)[-1] == ("ModelResponse", [("call", "call_w1")])
    entries = asyncio.run(flowmem_store.load_entries(CID))
    assert [type(e.message).__name__ for e in entries] == [
        "ModelRequest", "ModelResponse", "ModelRequest", "ModelResponse",
    ]
