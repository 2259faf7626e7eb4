"""Token windows for LangGraph agents (issue 28): the model sees a window, the thread keeps all.

``window_messages`` is checked against ``MemoryService.load(max_tokens=…)`` over the same
history (the service's window is itself checked against the plain rule and brute force),
then ``FlowmemWindow`` in ``create_agent`` and ``window_hook`` in the prebuilt ReAct agent
are run with a real ``FlowmemSaver`` and a model that rejects an unsendable request.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from flowmem.core import HEALED_CONTENT
from flowmem.errors import InvalidInputError, WindowTooSmallError
from flowmem.integrations.langchain import row_to_message
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.integrations.langgraph.window import FlowmemWindow, window_hook, window_messages
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store
from tests.core.test_window import histories
from tests.integrations.langgraph.strict_model import StrictScriptedModel, rejection

ALICE = ExecutionContext(user_id="alice")
_keys = itertools.count()
_service = MemoryService(open_store("memory://"))


def _counter(row: Any) -> int:
    content = row.get("content")
    return 2 * len(content) if isinstance(content, str) else 11


def _by_role(row: Any) -> int:
    return {"system": 7, "user": 5, "assistant": 9, "tool": 3}[row["role"]]


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(0, 200), st.sampled_from([_counter, _by_role]), st.booleans(), st.sampled_from([None, "user"]))
def test_the_window_of_messages_is_the_services_window_of_the_same_history(
    history: tuple[list[dict[str, Any]], list[int]], budget: int, counter: Any, keep: bool, first: str | None
) -> None:
    # counters both shapes agree on (a stored row keeps its calls in metadata, a message's are LangChain's)
    key = f"k{next(_keys)}"
    _service.append("user", key, history[0], ALICE)
    rows = _service.load("user", key, ALICE).messages
    messages = [row_to_message(r) for r in rows]
    args = {"counter": counter, "keep_system": keep, "first_role": first}
    try:
        loaded = _service.load("user", key, ALICE, max_tokens=budget, **args)
    except WindowTooSmallError as refused:
        with pytest.raises(WindowTooSmallError) as raised:
            window_messages(messages, budget, **args)
        assert raised.value.details == refused.details
        return
    kept, window = window_messages(messages, budget, **args)
    assert [messages.index(m) for m in kept] == [rows.index(r) for r in loaded.messages]
    assert loaded.window is not None
    assert (window.tokens, window.start, window.cut_messages) == (
        loaded.window.tokens, loaded.window.start, loaded.window.cut_messages
    )
    if window.cut_tokens is not None:  # every message counted: the cut tokens are known
        assert window.cut_tokens == sum(map(counter, rows)) - window.tokens
    assert all(a is b for a, b in zip(kept, [m for m in messages if m in kept], strict=True))


def test_a_tool_result_is_never_sent_without_its_call_and_the_system_message_stays() -> None:
    call = AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "f", "args": {"x": "y" * 40}}])
    messages: list[BaseMessage] = [
        SystemMessage("be brief", id="s"),
        HumanMessage("q" * 400, id="h0"),
        call,
        ToolMessage("r" * 40, tool_call_id="c1", id="t1"),
        AIMessage("done", id="a2"),
    ]
    budget = window_messages(messages[:1] + messages[3:], 10_000)[1].tokens  # the result without its call
    kept, window = window_messages(messages, budget)
    assert [m.id for m in kept] == ["s", "a2"]
    assert (window.cut_messages, window.start) == (3, 4)
    assert window.cut_tokens is None  # the scan stopped before the question: it was never counted


def test_bad_settings_are_refused_when_the_middleware_is_built() -> None:
    with pytest.raises(InvalidInputError):
        FlowmemWindow(max_tokens=-1)
    with pytest.raises(InvalidInputError):
        window_hook(100, first_role="tool")


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}, " + "warm " * 60


def _turns(model: StrictScriptedModel, agent: Any, config: dict[str, Any], n: int) -> None:
    for turn in range(n):
        agent.invoke({"messages": [HumanMessage(f"weather in city {turn}? " + "please " * 20)]}, config)


def _script(n: int) -> list[AIMessage]:
    replies = []
    for turn in range(n):
        call = {"id": f"c{turn}", "name": "weather", "args": {"city": f"city {turn}"}}
        replies += [AIMessage("", tool_calls=[call]), AIMessage(f"it is sunny in city {turn}")]
    return replies


def test_create_agent_sends_the_model_a_window_and_the_thread_keeps_every_message() -> None:
    saver = FlowmemSaver(MemoryService(open_store("memory://")))
    model = StrictScriptedModel(replies=_script(4))
    middleware = FlowmemWindow(max_tokens=300)
    agent = create_agent(model, [weather], system_prompt="You answer weather questions.", checkpointer=saver, middleware=[middleware])
    config = {"configurable": {"thread_id": "long"}}
    _turns(model, agent, config, 4)
    stored = agent.get_state(config).values["messages"]
    assert len(stored) == 16  # four turns: question, call, result, answer
    sent = model.calls[-1]
    assert isinstance(sent[0], SystemMessage) and sent[0].content == "You answer weather questions."
    expected, window = window_messages([sent[0], *stored[:-1]], 300)
    assert [m.id for m in sent] == [m.id for m in expected]
    assert len(sent) < len(stored) and window.tokens <= 300
    assert all(rejection(call) is None for call in model.calls)  # every request was sendable
    assert middleware.last_window == window and window.cut_messages > 0


def test_create_agent_refuses_a_budget_the_newest_turn_does_not_fit() -> None:
    saver = FlowmemSaver(MemoryService(open_store("memory://")))
    model = StrictScriptedModel(replies=_script(1))
    agent = create_agent(model, [weather], checkpointer=saver, middleware=[FlowmemWindow(max_tokens=5)])
    with pytest.raises(WindowTooSmallError) as raised:
        _turns(model, agent, {"configurable": {"thread_id": "tiny"}}, 1)
    assert raised.value.code == "window_too_small" and raised.value.details["needed"] > 5
    assert model.calls == []  # the model was never sent a cut history


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # the deprecated agent, on purpose
def test_the_react_agents_window_hook_heals_into_the_state_and_windows_the_model_input() -> None:
    from langgraph.prebuilt import create_react_agent

    saver = FlowmemSaver(MemoryService(open_store("memory://")))
    model = StrictScriptedModel(replies=[AIMessage("recovered", id="a2")])
    hook = window_hook(60)
    agent = create_react_agent(model, [weather], checkpointer=saver, pre_model_hook=hook)
    config = {"configurable": {"thread_id": "react"}}
    call = AIMessage("", id="a1", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}])
    old = HumanMessage("weather? " + "really " * 80, id="h0")
    agent.update_state(config, {"messages": [old, call]}, as_node="agent")
    agent.invoke({"messages": [HumanMessage("hello?", id="h1")]}, config)
    sent = model.calls[0]
    assert rejection(sent) is None and "h0" not in [m.id for m in sent]
    assert hook.last_window is not None and hook.last_window.cut_messages == 1
    stored = agent.get_state(config).values["messages"]
    assert [m.id for m in stored][:2] == ["h0", "a1"]  # cut from the request, not from the thread
    assert any(m.content == HEALED_CONTENT for m in stored)  # MEM-3 written into the state


def test_an_async_run_is_sent_the_same_window() -> None:
    import asyncio

    saver = FlowmemSaver(MemoryService(open_store("memory://")))
    model = StrictScriptedModel(replies=_script(3))
    middleware = FlowmemWindow(max_tokens=250)
    agent = create_agent(model, [weather], checkpointer=saver, middleware=[middleware])
    config = {"configurable": {"thread_id": "async"}}

    async def run() -> None:
        for turn in range(3):
            await agent.ainvoke({"messages": [HumanMessage(f"weather {turn}? " + "please " * 20)]}, config)

    asyncio.run(run())
    stored = agent.get_state(config).values["messages"]
    expected, window = window_messages(stored[:-1], 250)
    assert [m.id for m in model.calls[-1]] == [m.id for m in expected] and len(stored) == 12
    assert middleware.last_window == window and window.cut_messages > 0
