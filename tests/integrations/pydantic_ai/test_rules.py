"""What a run saves passes the buffer rules: MEM-1, MEM-2, MEM-3, and exact round trips."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
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
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import DeferredToolRequests

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.pydantic_ai.rows import HEALED_METADATA
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.scope import ExecutionContext
from tests.integrations.pydantic_ai.messages import (
    answer,
    call,
    every_part_kind,
    prompt,
    result,
    round_tripped,
)


def _run(made: Any) -> Any:
    return asyncio.run(made)


def _rows(store: FlowmemConversationStore, cid: str, key: str = "pydantic_ai") -> list[dict[str, Any]]:
    return store.memory.load("session", key, ExecutionContext(session_id=cid)).messages


def _messages(store: FlowmemConversationStore, cid: str) -> list[ModelMessage]:
    loaded = _run(store.load_entries(cid))
    return [entry.message for entry in loaded]


def test_every_part_kind_round_trips_exactly(flowmem_store: FlowmemConversationStore) -> None:
    history = every_part_kind()
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=history)))
    loaded = _run(flowmem_store.load("c1"))
    assert loaded.messages == round_tripped(history)
    assert _run(flowmem_store.load("c1", limit=2)).messages == round_tripped(history)[-2:]


def test_a_conversation_is_visible_through_the_buffer_api(flowmem_store: FlowmemConversationStore) -> None:
    history = [prompt("hi"), call("k1"), result("k1"), answer("done", 3)]
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=history)))
    rows = _rows(flowmem_store, "c1")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "hi"),
        ("assistant", ""),
        ("tool", "v-k1"),
        ("assistant", "done"),
    ]
    assert rows[1]["metadata"]["tool_calls"][0]["tool_call_id"] == "k1"
    assert rows[2]["metadata"]["tool_call_id"] == "k1"


def test_mem_1_a_tool_result_saved_again_is_stored_once(flowmem_store: FlowmemConversationStore) -> None:
    stored = [prompt("hi"), call("k1"), result("k1", t=2)]
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=stored)))
    loaded = _run(flowmem_store.load("c1"))
    again = Conversation(
        conversation_id="c1",
        messages=[*loaded.messages, result("k1", t=9), answer("ok", 10)],
        revision=loaded.revision,
    )
    _run(flowmem_store.save(again))
    assert _messages(flowmem_store, "c1") == round_tripped([*stored, answer("ok", 10)])
    assert [r["role"] for r in _rows(flowmem_store, "c1")] == ["user", "assistant", "tool", "assistant"]


def test_mem_2_a_model_response_delivered_again_is_stored_once(flowmem_store: FlowmemConversationStore) -> None:
    stored = [prompt("hi"), call("k1", "k2")]
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=stored)))
    loaded = _run(flowmem_store.load_entries("c1"))
    record = _run(flowmem_store.read_record("c1"))
    again = Conversation(
        conversation_id="c1",
        messages=[*(e.message for e in loaded), call("k1", "k2", t=5), result("k1", "k2", t=6)],
        revision=record.revision,
    )
    _run(flowmem_store.save(again))
    assert _messages(flowmem_store, "c1") == round_tripped([*stored, result("k1", "k2", t=6)])


def test_mem_1_and_mem_2_a_call_id_a_later_run_repeats_is_a_new_call(
    flowmem_store: FlowmemConversationStore,
) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, UserPromptPart) for p in last.parts):
            return ModelResponse(parts=[ToolCallPart("get", {"x": len(messages)}, tool_call_id="same")])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def get(x: int) -> str:
        return f"got {x}"

    conversation: Conversation = Conversation(conversation_id="c1")
    runs = []
    for text in ("first", "second"):
        loaded = _run(flowmem_store.load("c1")) or conversation
        ran = _run(agent.run(text, conversation=loaded))
        _run(flowmem_store.save(ran))
        runs.append(ran)
    assert _run(flowmem_store.load("c1")).messages == runs[-1].all_messages()
    ids = [c["tool_call_id"] for r in _rows(flowmem_store, "c1") for c in r["metadata"].get("tool_calls", [])]
    second = runs[-1].all_messages()[-1].run_id
    assert ids == ["same", f"same@{second}"]
    results = [r["metadata"]["tool_call_id"] for r in _rows(flowmem_store, "c1") if r["role"] == "tool"]
    assert results == ids


def _placeholder(response: Any, tool: str = "get", cid: str = "k1") -> ModelRequest:
    part = ToolReturnPart(
        tool,
        HEALED_CONTENT,
        tool_call_id=cid,
        metadata=dict(HEALED_METADATA),
        timestamp=response.timestamp,
        outcome="interrupted",
    )
    return ModelRequest(parts=[part], timestamp=response.timestamp, run_id=response.run_id)


def test_mem_3_a_user_prompt_saved_after_an_unanswered_call_heals_it(
    flowmem_store: FlowmemConversationStore,
) -> None:
    dangling = call("k1")
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=[prompt("hi"), dangling])))
    record = _run(flowmem_store.read_record("c1"))
    later = [prompt("hi"), dangling, prompt("anything?", 5, "r2"), answer("lost it", 6, "r2")]
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=later, revision=record.revision)))
    assert _messages(flowmem_store, "c1") == round_tripped(
        [prompt("hi"), dangling, _placeholder(dangling), prompt("anything?", 5, "r2"), answer("lost it", 6, "r2")]
    )
    rows = _rows(flowmem_store, "c1")
    assert rows[2]["role"] == "tool" and rows[2]["metadata"]["healed"] is True


def test_mem_3_a_loaded_conversation_left_in_a_tool_comes_back_healed_for_a_new_prompt(
    flowmem_store: FlowmemConversationStore,
) -> None:
    dangling = call("k1")
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=[prompt("hi"), dangling])))
    loaded = _run(flowmem_store.load("c1"))
    assert loaded.messages[-1] == _placeholder(dangling)
    assert len(_run(flowmem_store.load_entries("c1"))) == 2  # not stored by loading
    agent = Agent(TestModel(call_tools=[]))
    ran = _run(agent.run("try again", conversation=loaded))
    _run(flowmem_store.save(ran))
    assert _run(flowmem_store.load("c1")).messages == ran.all_messages()
    assert [r["role"] for r in _rows(flowmem_store, "c1")][:4] == ["user", "assistant", "tool", "user"]


def test_mem_3_a_conversation_waiting_on_deferred_tools_is_not_healed(
    flowmem_store: FlowmemConversationStore,
) -> None:
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    paused = _run(agent.run("delete it", conversation=Conversation(conversation_id="c1")))
    assert isinstance(paused.output, DeferredToolRequests)
    _run(flowmem_store.save(paused))
    loaded = _run(flowmem_store.load("c1"))
    assert loaded.messages == paused.all_messages()  # waiting, not healed
    assert loaded.deferred_tool_requests is not None
    results = loaded.deferred_tool_requests.build_results(approve_all=True)
    resumed = _run(agent.run(conversation=loaded, deferred_tool_results=results))
    _run(flowmem_store.save(resumed))
    stored = _run(flowmem_store.load("c1"))
    assert stored.messages == resumed.all_messages()
    returns = [p for m in stored.messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    assert any(p.tool_name == "delete_file" and p.content != HEALED_CONTENT for p in returns)
