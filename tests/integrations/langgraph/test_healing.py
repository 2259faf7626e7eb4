"""``heal_messages``: MEM-3 on LangChain messages, before the latest user turn only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.langgraph.healing import (
    HEALED_ID_PREFIX,
    FlowmemHealing,
    heal_hook,
    heal_messages,
)
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService
from flowmem.store import open_store
from tests.integrations.langgraph.strict_model import StrictScriptedModel, rejection


def _call(*ids: str, content: str = "") -> AIMessage:
    return AIMessage(content, id=f"a-{'-'.join(ids)}", tool_calls=[{"id": i, "name": "f", "args": {}} for i in ids])


def test_mem_3_a_user_turn_after_an_unanswered_call_gets_the_placeholder_next_to_the_call() -> None:
    messages = [HumanMessage("go", id="h0"), _call("c1"), HumanMessage("still there?", id="h1")]
    healed = heal_messages(messages)
    assert healed is not None
    assert [type(m).__name__ for m in healed] == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]
    placeholder = healed[2]
    assert isinstance(placeholder, ToolMessage)
    assert placeholder.tool_call_id == "c1" and placeholder.content == HEALED_CONTENT
    assert placeholder.id == f"{HEALED_ID_PREFIX}c1"
    assert healed[0] is messages[0] and healed[1] is messages[1] and healed[3] is messages[2]
    assert rejection(healed) is None and rejection(messages) is not None


def test_mem_3_placeholders_go_after_the_results_that_follow_the_turn_in_declared_order() -> None:
    messages = [
        HumanMessage("go", id="h0"),
        _call("c1", "c2", "c3"),
        ToolMessage("two", tool_call_id="c2", id="t2"),
        HumanMessage("next", id="h1"),
    ]
    healed = heal_messages(messages)
    assert healed is not None
    assert [getattr(m, "tool_call_id", None) for m in healed] == [None, None, "c2", "c1", "c3", None]


def test_mem_3_a_call_after_the_latest_user_turn_is_left_to_run() -> None:
    """What LangGraph resumes (an interrupt, ``invoke(None)``) is never healed."""
    assert heal_messages([HumanMessage("go", id="h0"), _call("c1")]) is None
    assert heal_messages([_call("c1")]) is None


def test_mem_3_an_answered_history_is_left_alone() -> None:
    messages = [HumanMessage("go"), _call("c1"), ToolMessage("ok", tool_call_id="c1"), HumanMessage("more")]
    assert heal_messages(messages) is None


def test_mem_3_healing_twice_changes_nothing() -> None:
    healed = heal_messages([HumanMessage("go"), _call("c1"), HumanMessage("again")])
    assert healed is not None
    assert heal_messages(healed) is None


def test_mem_3_a_late_result_after_the_user_turn_is_not_doubled() -> None:
    messages = [HumanMessage("go"), _call("c1"), HumanMessage("again"), ToolMessage("late", tool_call_id="c1")]
    assert heal_messages(messages) is None  # answered somewhere: MEM-3 heals only the unanswered


turns = st.lists(
    st.one_of(
        st.just("user"),
        st.lists(st.sampled_from(["c1", "c2", "c3", "c4"]), min_size=1, max_size=3, unique=True),
        st.sampled_from(["r1", "r2", "r3", "r4"]),
    ),
    max_size=12,
)


def _history(plan: list[Any]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    declared: set[str] = set()
    for n, step in enumerate(plan):
        if step == "user":
            out.append(HumanMessage(f"u{n}", id=f"h{n}"))
        elif isinstance(step, list):
            fresh = [c for c in step if c not in declared]
            if fresh:
                declared.update(fresh)
                out.append(_call(*fresh))
        elif f"c{step[1]}" in declared and out and not isinstance(out[-1], HumanMessage):
            call_id = f"c{step[1]}"
            if not any(getattr(m, "tool_call_id", None) == call_id for m in out):
                out.append(ToolMessage("r", tool_call_id=call_id, id=f"t{n}"))
    return out


@settings(max_examples=200, deadline=None)
@given(turns)
def test_mem_3_property_every_call_before_the_latest_user_turn_is_answered(plan: list[Any]) -> None:
    messages = _history(plan)
    healed = heal_messages(messages) or messages
    last_user = max((i for i, m in enumerate(healed) if isinstance(m, HumanMessage)), default=-1)
    answered = {m.tool_call_id for m in healed if isinstance(m, ToolMessage)}
    for message in healed[: max(last_user, 0)]:
        for call in getattr(message, "tool_calls", None) or ():
            assert call["id"] in answered
    assert heal_messages(healed) is None  # idempotent
    originals = [m for m in healed if not (m.id or "").startswith(HEALED_ID_PREFIX)]
    assert originals == messages  # nothing else moved, changed or dropped


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _crashed(saver: FlowmemSaver, agent: Any) -> dict[str, Any]:
    config = {"configurable": {"thread_id": "crashed"}}
    call = AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Lisbon"}}])
    agent.update_state(config, {"messages": [HumanMessage("weather?", id="h0"), call]}, as_node="model")
    return config


def test_mem_3_create_agent_with_the_middleware_answers_after_a_crash() -> None:
    saver = FlowmemSaver(MemoryService(open_store("memory://")))
    model = StrictScriptedModel(replies=[AIMessage("I lost that call; ask again?", id="a2")])
    agent = create_agent(model, [weather], checkpointer=saver, middleware=[FlowmemHealing()])
    config = _crashed(saver, agent)
    out = agent.invoke({"messages": [HumanMessage("hello?", id="h1")]}, config)
    assert out["messages"][-1].content == "I lost that call; ask again?"
    assert [type(m).__name__ for m in model.calls[0]] == ["HumanMessage", "AIMessage", "ToolMessage", "HumanMessage"]
    stored = agent.get_state(config).values["messages"]
    assert rejection(stored) is None  # the thread itself is healed, for every later reader


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # the deprecated agent, on purpose
def test_mem_3_the_react_agents_pre_model_hook_heals() -> None:
    from langgraph.prebuilt import create_react_agent

    saver = FlowmemSaver(MemoryService(open_store("memory://")))
    model = StrictScriptedModel(replies=[AIMessage("recovered", id="a2")])
    agent = create_react_agent(model, [weather], checkpointer=saver, pre_model_hook=heal_hook)
    config = {"configurable": {"thread_id": "react"}}
    call = AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}])
    agent.update_state(config, {"messages": [HumanMessage("weather?", id="h0"), call]}, as_node="agent")
    out = agent.invoke({"messages": [HumanMessage("hello?", id="h1")]}, config)
    assert out["messages"][-1].content == "recovered"
    assert rejection(model.calls[0]) is None
