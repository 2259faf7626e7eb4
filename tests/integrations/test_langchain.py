"""``FlowmemChatMessageHistory`` with the real langchain-core (and LangGraph's validation).

Every test taking ``service`` runs twice (``tests/integrations/conftest.py``): on an
in-process ``MemoryService`` and on a ``Client`` of a real ``flowmem serve``.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.prebuilt.chat_agent_executor import _validate_chat_history

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.integrations.langchain import FlowmemChatMessageHistory, message_to_row, row_to_message
from flowmem.memory import AsyncMemory, Memory
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations.backends import shared_of, user_of

# RunnableWithMessageHistory, BaseChatMessageHistory and InMemoryChatMessageHistory are
# deprecated upstream but still what most LangChain 0.x apps run (the path this adapter
# serves); any other deprecation, flowmem's own above all, still fails the suite
pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

CALL = {"id": "call_1", "name": "weather", "args": {"city": "Lisbon"}, "type": "tool_call"}


def _history(
    service: Memory, session: str = "s1", **kwargs: object
) -> FlowmemChatMessageHistory:
    return FlowmemChatMessageHistory(service, session_id=session, **kwargs)  # type: ignore[arg-type]


def test_messages_map_both_ways(service: Memory) -> None:
    history = _history(service)
    sent: list[BaseMessage] = [
        SystemMessage("be brief"),
        HumanMessage("weather?"),
        AIMessage("", tool_calls=[CALL]),
        ToolMessage("18C", tool_call_id="call_1"),
        AIMessage("18C in Lisbon."),
    ]
    history.add_messages(sent)
    got = history.messages
    assert [type(m) for m in got] == [type(m) for m in sent]
    assert got[2].tool_calls == [CALL]  # type: ignore[attr-defined]
    assert got[3].tool_call_id == "call_1"  # type: ignore[attr-defined]
    assert [m.content for m in got] == [m.content for m in sent]
    rows = service.load("session", "chat_history", ExecutionContext(session_id="s1")).messages
    assert rows[2]["metadata"]["tool_calls"] == [
        {"tool_call_id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}
    ]
    assert rows[3]["metadata"]["tool_call_id"] == "call_1"


def test_row_mapping_keeps_content_blocks_as_parts() -> None:
    assert message_to_row(HumanMessage([{"type": "text", "text": "a"}, "b"])) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "text", "text": "b", "extra": {"langchain": {"form": "str"}}},
        ],
    }
    image = HumanMessage([{"type": "image_url", "image_url": {"url": "x"}}])
    assert message_to_row(image)["content"] == [
        {"type": "image", "url": "x", "extra": {"langchain": {"form": "image_url"}}}
    ]
    assert isinstance(
        row_to_message({"role": "tool", "content": "x", "metadata": {"tool_call_id": "c"}}),
        ToolMessage,
    )
    # ChatAnthropic puts its tool_use blocks in the content and in tool_calls alike:
    # the call is a call, and the block keeps its place for the way back.
    tool_use = {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Lisbon"}}
    anthropic_style = AIMessage([{"type": "text", "text": "Checking."}, tool_use], tool_calls=[CALL])
    assert message_to_row(anthropic_style) == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Checking."}],
        "tool_calls": [{"tool_call_id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}],
        "extra": {"langchain": {"blocks": [[1, tool_use]]}},
    }
    assert row_to_message(message_to_row(anthropic_style)) == anthropic_style


def _recording_chain(
    replies: list[AIMessage], seen: list[list[BaseMessage]]
) -> RunnableWithMessageHistory:
    model = GenericFakeChatModel(messages=iter(replies))
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )

    def record(value: object) -> object:
        seen.append(list(value.to_messages()))  # type: ignore[attr-defined]
        return value

    chain = prompt | RunnableLambda(record) | model
    return chain  # type: ignore[return-value]


def test_runnable_with_message_history_keeps_sessions_apart(service: Memory) -> None:
    seen: list[list[BaseMessage]] = []
    chain = _recording_chain(
        [AIMessage("hi Ana"), AIMessage("hi Bo"), AIMessage("you are Ana")], seen
    )
    with_history = RunnableWithMessageHistory(
        chain,
        lambda session_id: FlowmemChatMessageHistory(service, session_id=session_id),
        input_messages_key="input",
        history_messages_key="history",
    )
    for session, text in (("ana", "I am Ana"), ("bo", "I am Bo"), ("ana", "who am I?")):
        with_history.invoke({"input": text}, config={"configurable": {"session_id": session}})
    assert [m.content for m in seen[2]] == ["I am Ana", "hi Ana", "who am I?"]
    ana = FlowmemChatMessageHistory(service, session_id="ana").messages
    assert [m.content for m in ana] == ["I am Ana", "hi Ana", "who am I?", "you are Ana"]
    assert [m.content for m in _history(service, "bo").messages] == ["I am Bo", "hi Bo"]


def test_mem_3_runnable_history_after_interrupted_call_is_sendable_to_the_model(
    service: Memory,
) -> None:
    """A crash left a dangling call; the next turn's model input is already healed."""
    _history(service).add_messages([HumanMessage("weather?"), AIMessage("", tool_calls=[CALL])])
    seen: list[list[BaseMessage]] = []
    with_history = RunnableWithMessageHistory(
        _recording_chain([AIMessage("sorry, try again")], seen),
        lambda session_id: FlowmemChatMessageHistory(service, session_id=session_id),
        input_messages_key="input",
        history_messages_key="history",
    )
    with_history.invoke({"input": "hello?"}, config={"configurable": {"session_id": "s1"}})
    _validate_chat_history(seen[0])
    assert isinstance(seen[0][2], ToolMessage) and seen[0][2].content == HEALED_CONTENT
    stored = _history(service).raw_messages
    assert [type(m).__name__ for m in stored] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
    ]


def test_mem_1_retried_tool_message_is_stored_once(service: Memory) -> None:
    history = _history(service)
    history.add_messages([HumanMessage("weather?"), AIMessage("", tool_calls=[CALL])])
    history.add_message(ToolMessage("18C", tool_call_id="call_1"))
    history.add_message(ToolMessage("18C", tool_call_id="call_1"))  # the retry
    assert history.last_result is not None and history.last_result.appended == 0
    assert sum(isinstance(m, ToolMessage) for m in history.raw_messages) == 1
    plain = InMemoryChatMessageHistory()
    plain.add_messages([HumanMessage("weather?"), AIMessage("", tool_calls=[CALL])])
    plain.add_message(ToolMessage("18C", tool_call_id="call_1"))
    plain.add_message(ToolMessage("18C", tool_call_id="call_1"))
    assert sum(isinstance(m, ToolMessage) for m in plain.messages) == 2  # LangChain's own store


def test_mem_2_retried_ai_turn_is_stored_once(service: Memory) -> None:
    history = _history(service)
    history.add_messages([HumanMessage("weather?"), AIMessage("", tool_calls=[CALL])])
    history.add_message(AIMessage("", tool_calls=[CALL]))
    assert len(history.raw_messages) == 2


def test_mem_3_human_after_interrupted_call_passes_langgraph_validation(
    service: Memory,
) -> None:
    events: list[BaseMessage] = [
        HumanMessage("weather?"),
        AIMessage("", tool_calls=[CALL]),
        HumanMessage("hello?"),
    ]
    history = _history(service)
    for event in events:
        history.add_message(event)
    stored = history.raw_messages
    _validate_chat_history(stored)  # no INVALID_CHAT_HISTORY
    assert isinstance(stored[2], ToolMessage) and stored[2].tool_call_id == "call_1"
    assert stored[2].content == HEALED_CONTENT
    plain = InMemoryChatMessageHistory()
    for event in events:
        plain.add_message(event)
    with pytest.raises(ValueError, match="INVALID_CHAT_HISTORY"):
        _validate_chat_history(plain.messages)


def test_mem_10_late_tool_message_replaces_the_placeholder(service: Memory) -> None:
    history = _history(service)
    history.add_messages(
        [HumanMessage("weather?"), AIMessage("", tool_calls=[CALL]), HumanMessage("hello?")]
    )
    history.add_message(ToolMessage("18C", tool_call_id="call_1"))
    stored = history.raw_messages
    assert len(stored) == 4 and stored[2].content == "18C"


def test_window_keeps_the_last_turns_and_stays_sendable(service: Memory) -> None:
    history = _history(service, max_messages=3)
    history.add_messages(
        [
            HumanMessage("q1"),
            AIMessage("", tool_calls=[CALL]),
            ToolMessage("r", tool_call_id="call_1"),
        ]
    )
    history.add_messages([AIMessage("a1"), HumanMessage("q2"), AIMessage("a2")])
    got = history.messages
    assert [m.content for m in got] == ["a1", "q2", "a2"]
    assert check_sendable([message_to_row(m) for m in got]) == []


def test_mem_13_no_session_id_refuses_and_shares_nothing(
    service: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    anonymous = FlowmemChatMessageHistory(service, context=ExecutionContext(workflow_id="w"))
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        anonymous.add_messages([HumanMessage("secret")])
    assert anonymous.last_result is not None and anonymous.last_result.appended == 0
    assert anonymous.last_result.refusal is not None
    assert len([r for r in caplog.records if r.name == "flowmem"]) == 1
    assert anonymous.messages == []
    assert FlowmemChatMessageHistory(service, session_id="0").messages == []
    global_history = FlowmemChatMessageHistory(shared_of(service), scope="global")
    assert global_history.messages == []  # nothing leaked into the shared bucket


def test_mem_6_user_scope_without_a_user_refuses(service: Memory) -> None:
    history = FlowmemChatMessageHistory(service, session_id="s1", scope="user")
    history.add_messages([HumanMessage("hi")])
    assert history.last_result is not None and history.last_result.refusal is not None
    user = user_of(service, 42)  # over HTTP the user scope is the token's user
    owned = FlowmemChatMessageHistory(service, context=ExecutionContext(user_id=user), scope="user")
    owned.add_messages([HumanMessage("hi")])
    assert [m.content for m in owned.messages] == ["hi"]


def test_async_forms(service: Memory) -> None:
    history = _history(service)

    async def scenario() -> list[list[BaseMessage]]:
        await history.aadd_messages([HumanMessage("a"), AIMessage("b")])
        first = await history.aget_messages()
        await history.aclear()
        return [first, await history.aget_messages()]

    first, after = asyncio.run(scenario())
    assert [m.content for m in first] == ["a", "b"]
    assert after == []


def test_clear_empties_only_this_session(service: Memory) -> None:
    _history(service, "a").add_messages([HumanMessage("x")])
    _history(service, "b").add_messages([HumanMessage("y")])
    _history(service, "a").clear()
    assert _history(service, "a").messages == []
    assert [m.content for m in _history(service, "b").messages] == ["y"]


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.delitem(sys.modules, "flowmem.integrations.langchain")
    with pytest.raises(ImportError, match=r"'langchain' extra, pip install '<checkout>\[langchain\]'"):
        import flowmem.integrations.langchain  # noqa: F401


def test_an_async_client_is_refused_at_construction_with_what_to_pass() -> None:
    from flowmem.client import AsyncClient

    asynchronous = AsyncClient("http://127.0.0.1:1", "fm_x")
    with pytest.raises(TypeError, match=r"flowmem\.client\.Client") as refused:
        FlowmemChatMessageHistory(asynchronous, session_id="s1")  # type: ignore[arg-type]
    assert "is synchronous" in str(refused.value) and "AsyncMemory" in str(refused.value)


def test_any_async_memory_is_refused_at_construction() -> None:
    """Not only the AsyncClient: whatever awaits the protocol's operations (decision 0036)."""
    from flowmem.integrations import InThread

    awaited = InThread(MemoryService(MemoryStore()))
    assert isinstance(awaited, AsyncMemory)
    with pytest.raises(TypeError, match="FlowmemChatMessageHistory is synchronous"):
        FlowmemChatMessageHistory(awaited, session_id="s1")  # type: ignore[arg-type]


def test_max_tokens_reads_the_newest_turns_that_fit_with_their_tool_results(
    service: Memory,
) -> None:
    """Issue 28: a token budget never leaves a tool message without the call it answers."""
    _history(service).add_messages(
        [
            SystemMessage("be brief"),
            HumanMessage("q1 " * 40),
            AIMessage("", tool_calls=[CALL]),
            ToolMessage("r " * 40, tool_call_id="call_1"),
            AIMessage("a1"),
        ]
    )
    history = _history(service, max_tokens=40)
    got = history.messages
    assert [m.content for m in got] == ["be brief", "a1"]
    assert history.last_window is not None and history.last_window.cut_messages == 3
    wide = _history(service, max_tokens=1000).messages
    assert [type(m).__name__ for m in wide] == [
        "SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"
    ]
    assert check_sendable([message_to_row(m) for m in got]) == []
