"""``FlowmemRunnableWithMessageHistory``: the input stored before the model runs (issue 36, decision 0101).

Differential: every test runs LangChain's own ``RunnableWithMessageHistory`` over its own
``InMemoryChatMessageHistory`` beside flowmem's runnable over ``FlowmemChatMessageHistory``
(on a local service and on a ``Client`` of a real server, the ``service`` fixture) on the
same operations, and compares what each stored and what each model was given. Where they
differ on purpose (a turn whose model failed keeps its question) the test says so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from flowmem.errors import StoreUnavailableError
from flowmem.integrations.langchain import (
    PLAIN_RUNNABLE_WARNING,
    FlowmemChatMessageHistory,
    FlowmemRunnableWithMessageHistory,
)
from flowmem.integrations.langchain import runnable as runnable_module
from flowmem.memory import Memory
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations.kill.points import Killer
from tests.integrations.kill.programs.langchain import ScriptedChat, said
from tests.integrations.kill.script import AGAIN, ANSWER, QUESTION, TOOL_RESULT, Said, refusal

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

Factory = Callable[[str], BaseChatMessageHistory]


@pytest.fixture(autouse=True)
def _warn_again() -> Iterator[None]:
    """Each test sees the plain-runnable warning afresh (it is logged once per process)."""
    runnable_module._warned.clear()
    yield
    runnable_module._warned.clear()


def _shape(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """Messages without LangChain's run ids: class, text, calls, answered call."""
    return [
        (
            type(m).__name__,
            m.text,
            tuple(c["id"] for c in getattr(m, "tool_calls", [])),
            getattr(m, "tool_call_id", None),
        )
        for m in messages
    ]


class Side:
    """One side of a differential run: a runnable class, its histories and its scripted model."""

    def __init__(
        self, cls: type[RunnableWithMessageHistory], histories: Factory, stored: Factory
    ) -> None:
        self.model = ScriptedChat(killer=Killer(None))
        self.cls = cls
        self.histories = histories
        self._stored = stored
        self.tool_saw: list[list[tuple[Any, ...]]] = []

        @tool
        def weather(city: str) -> str:
            """The weather in a city, now."""
            self.tool_saw.append(_shape(self.stored("s")))
            return TOOL_RESULT

        self.tool = weather
        self.chat = cls(self.model.bind_tools([weather]), histories)

    def stored(self, session: str) -> list[BaseMessage]:
        """The session's history as its store keeps it (placeholders included)."""
        return self._stored(session)

    def turn(self, text: str, session: str = "s") -> BaseMessage:
        """One turn of the docs' tool loop."""
        config: Any = {"configurable": {"session_id": session}}
        reply = self.chat.invoke(text, config)
        while reply.tool_calls:
            reply = self.chat.invoke([self.tool.invoke(c) for c in reply.tool_calls], config)
        return reply  # type: ignore[no-any-return]

    async def aturn(self, text: str, session: str = "s") -> BaseMessage:
        """``turn`` through ``ainvoke``."""
        config: Any = {"configurable": {"session_id": session}}
        reply = await self.chat.ainvoke(text, config)
        while reply.tool_calls:
            results = [await self.tool.ainvoke(c) for c in reply.tool_calls]
            reply = await self.chat.ainvoke(results, config)
        return reply  # type: ignore[no-any-return]

    @property
    def requests(self) -> list[list[Said]]:
        """Every request the model was given."""
        return self.model.requests


def _langchain_side(cls: type[RunnableWithMessageHistory] = RunnableWithMessageHistory) -> Side:
    """LangChain's own history (in memory), under ``cls``."""
    histories: dict[str, InMemoryChatMessageHistory] = {}

    def history(session_id: str) -> InMemoryChatMessageHistory:
        return histories.setdefault(session_id, InMemoryChatMessageHistory())

    return Side(cls, history, lambda s: list(history(s).messages))


def _flowmem_side(
    service: Memory, cls: type[RunnableWithMessageHistory] = FlowmemRunnableWithMessageHistory
) -> Side:
    """flowmem's history on ``service``, under ``cls``."""

    def history(session_id: str) -> FlowmemChatMessageHistory:
        return FlowmemChatMessageHistory(service, session_id=session_id)

    return Side(cls, history, lambda s: history(s).raw_messages)


TURN = [
    ("HumanMessage", QUESTION, (), None),
    ("AIMessage", "", ("call_w1",), None),
    ("ToolMessage", TOOL_RESULT, (), "call_w1"),
    ("AIMessage", ANSWER, (), None),
]


def test_the_tool_loop_stores_and_sends_what_langchains_own_store_does(service: Memory) -> None:
    theirs, ours = _langchain_side(), _flowmem_side(service)
    for side in (theirs, ours):
        assert side.turn(QUESTION).content == ANSWER
        side.turn(AGAIN)
    assert _shape(ours.stored("s")) == _shape(theirs.stored("s"))
    assert _shape(ours.stored("s"))[:4] == TURN
    assert ours.requests == theirs.requests
    assert [refusal(r) for r in ours.requests] == [None, None, None]


def test_write_ahead_the_question_is_stored_before_the_model_and_the_call_before_the_tool(
    service: Memory,
) -> None:
    ours = _flowmem_side(service)
    seen: list[list[tuple[Any, ...]]] = []

    def model_called(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(_shape(ours.stored("s")))
        return messages

    ours.chat = FlowmemRunnableWithMessageHistory(
        RunnableLambda(model_called) | ours.model.bind_tools([ours.tool]), ours.histories
    )
    ours.turn(QUESTION)
    assert seen[0] == TURN[:1]  # the question, before the model's first call
    assert ours.tool_saw == [TURN[:2]]  # the call, before the tool ran
    assert seen[1] == TURN[:3]  # the result, before the model's second call
    assert _shape(ours.stored("s")) == TURN  # each once


def test_langchains_own_runnable_stores_the_question_only_after_the_model_answered(
    service: Memory,
) -> None:
    """The contrast: LangChain's class writes a turn in its ``on_end`` listener."""
    plain = _flowmem_side(service, RunnableWithMessageHistory)
    seen: list[int] = []

    def model_called(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(len(plain.stored("s")))
        return messages

    plain.chat = RunnableWithMessageHistory(
        RunnableLambda(model_called) | plain.model.bind_tools([plain.tool]), plain.histories
    )
    plain.turn(QUESTION)
    assert seen[0] == 0  # a crash here loses the question


def test_the_plain_runnable_sends_a_tool_loops_open_call_answered_twice(service: Memory) -> None:
    """Main's setup: LangChain's class reads the history (MEM-5 answers the open call with
    the interrupted placeholder) and appends the real result to it: the model's second
    request answers ``call_w1`` twice, which a strict provider refuses."""
    plain = _flowmem_side(service, RunnableWithMessageHistory)
    plain.turn(QUESTION)
    assert refusal(plain.requests[1]) is not None
    assert _shape(plain.stored("s")) == TURN  # stored right, sent wrong


def test_ours_over_langchains_own_history_stores_what_langchains_runnable_does() -> None:
    theirs = _langchain_side()
    ours = _langchain_side(FlowmemRunnableWithMessageHistory)
    for side in (theirs, ours):
        side.turn(QUESTION)
        side.turn(AGAIN)
    assert _shape(ours.stored("s")) == _shape(theirs.stored("s"))
    assert ours.requests == theirs.requests


def test_the_async_tool_loop_stores_and_sends_what_langchains_own_store_does(
    service: Memory,
) -> None:
    theirs, ours = _langchain_side(), _flowmem_side(service)
    for side in (theirs, ours):
        asyncio.run(side.aturn(QUESTION))
        asyncio.run(side.aturn(AGAIN))
    assert _shape(ours.stored("s")) == _shape(theirs.stored("s"))
    assert ours.requests == theirs.requests


def test_a_streamed_turn_is_stored_as_langchains_own_store_stores_it(service: Memory) -> None:
    theirs, ours = _langchain_side(), _flowmem_side(service)
    for side in (theirs, ours):
        chunks = list(side.chat.stream(AGAIN, {"configurable": {"session_id": "s"}}))
        assert "".join(str(c.content) for c in chunks) == "Yes, I'm here."
    assert _shape(ours.stored("s")) == _shape(theirs.stored("s"))


def _prompt_chain(model: Runnable[Any, Any], key: str | None) -> Runnable[Any, Any]:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | model
    if key is None:
        return chain
    return chain | RunnableLambda(lambda message: {key: message, "n": 1})


@pytest.mark.parametrize("output_key", [None, "answer"])
def test_a_prompt_with_history_and_input_keys_matches_langchains_own_store(
    service: Memory, output_key: str | None
) -> None:
    """``input_messages_key``/``history_messages_key`` (and a dict output's ``output_messages_key``)."""
    sides = [_langchain_side(), _flowmem_side(service)]
    for side in sides:
        side.chat = side.cls(
            _prompt_chain(side.model, output_key),
            side.histories,
            input_messages_key="question",
            history_messages_key="history",
            output_messages_key=output_key,
        )
        for text in ("hello", "again"):
            side.chat.invoke({"question": text}, {"configurable": {"session_id": "s"}})
    theirs, ours = sides
    assert _shape(ours.stored("s")) == _shape(theirs.stored("s"))
    assert [len(r) for r in ours.requests] == [2, 4]  # system, (history,) question
    assert ours.requests == theirs.requests


def _failing_once(model: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """``model`` behind a provider that times out on its first call."""
    calls: list[int] = []

    def provider(messages: list[BaseMessage]) -> list[BaseMessage]:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("the provider timed out")
        return messages

    return RunnableLambda(provider) | model


def test_a_failed_model_keeps_the_question_and_its_retry_stores_it_once(service: Memory) -> None:
    """The difference on purpose: LangChain's class stores nothing of a turn whose model
    raised; flowmem's stored the question ahead. Invoked again, both end the same."""
    theirs, ours = _langchain_side(), _flowmem_side(service)
    after_failure = []
    for side in (theirs, ours):
        side.chat = side.cls(_failing_once(side.model), side.histories)
        config: Any = {"configurable": {"session_id": "s"}}
        with pytest.raises(TimeoutError):
            side.chat.invoke(AGAIN, config)
        after_failure.append(_shape(side.stored("s")))
        side.chat.invoke(AGAIN, config)
    assert after_failure == [[], [("HumanMessage", AGAIN, (), None)]]
    assert _shape(ours.stored("s")) == _shape(theirs.stored("s"))
    assert ours.requests == theirs.requests == [[Said("user", AGAIN)]]


def test_mem_1_a_tool_result_handed_back_again_after_a_failed_model_is_stored_once(
    service: Memory,
) -> None:
    ours = _flowmem_side(service)
    config: Any = {"configurable": {"session_id": "s"}}
    call = ours.chat.invoke(QUESTION, config)
    results = [ours.tool.invoke(c) for c in call.tool_calls]
    ours.chat = FlowmemRunnableWithMessageHistory(_failing_once(ours.model), ours.histories)
    with pytest.raises(TimeoutError):
        ours.chat.invoke(results, config)
    assert ours.chat.invoke(results, config).content == ANSWER
    assert _shape(ours.stored("s")) == TURN
    assert refusal(ours.requests[-1]) is None


class _FlakyStore(MemoryStore):
    """A memory store whose appends fail while ``down`` is set."""

    down = False

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise StoreUnavailableError("the database is down")
        return super().append(*args, **kwargs)


def test_a_write_ahead_that_fails_raises_before_the_model_runs_and_a_retry_stores_it_once() -> None:
    store = _FlakyStore()
    ours = _flowmem_side(MemoryService(store))
    store.down = True
    with pytest.raises(StoreUnavailableError):
        ours.turn(AGAIN)
    assert ours.requests == []  # the model never ran on a question that is not stored
    store.down = False
    ours.turn(AGAIN)
    assert _shape(ours.stored("s")) == [
        ("HumanMessage", AGAIN, (), None),
        ("AIMessage", "Yes, I'm here.", (), None),
    ]


def test_mem_13_a_refused_session_stores_nothing_and_the_model_still_gets_the_input(
    service: Memory,
) -> None:
    theirs, ours = _langchain_side(), _flowmem_side(service)
    for side in (theirs, ours):
        assert side.turn(AGAIN, session="").content == "Yes, I'm here."
    assert ours.requests == theirs.requests == [[Said("user", AGAIN)]]
    assert ours.stored("") == []


def test_mem_3_a_question_after_a_killed_call_heals_it_in_the_request(service: Memory) -> None:
    """What a kill between the call and its result leaves; the next turn's request is sendable."""
    FlowmemChatMessageHistory(service, session_id="s").add_messages(
        [
            HumanMessage(QUESTION),
            AIMessage("", tool_calls=[{"id": "call_w1", "name": "weather", "args": {}}]),
        ]
    )
    ours = _flowmem_side(service)
    ours.turn(AGAIN)
    assert refusal(ours.requests[0]) is None
    assert [m.role for m in ours.requests[0]] == ["user", "assistant", "tool", "user"]
    assert isinstance(ours.stored("s")[2], ToolMessage)


def test_the_plain_runnable_over_a_flowmem_history_warns_once_naming_the_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = MemoryService(MemoryStore())  # the frame check does not depend on the memory
    plain = _flowmem_side(service, RunnableWithMessageHistory)
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        plain.turn(QUESTION)
        plain.turn(AGAIN)
        asyncio.run(plain.aturn(AGAIN))
    warned = [
        r.getMessage() for r in caplog.records if "RunnableWithMessageHistory" in r.getMessage()
    ]
    assert warned == [PLAIN_RUNNABLE_WARNING]
    assert "FlowmemRunnableWithMessageHistory" in warned[0]


def test_the_async_plain_runnable_warns_too(caplog: pytest.LogCaptureFixture) -> None:
    service = MemoryService(MemoryStore())  # the frame check does not depend on the memory
    plain = _flowmem_side(service, RunnableWithMessageHistory)
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        asyncio.run(plain.aturn(AGAIN))
    assert [r.getMessage() for r in caplog.records].count(PLAIN_RUNNABLE_WARNING) == 1


def test_ours_and_direct_reads_do_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    service = MemoryService(MemoryStore())  # the frame check does not depend on the memory
    ours = _flowmem_side(service)
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        ours.turn(QUESTION)
        asyncio.run(ours.aturn(AGAIN))
        assert FlowmemChatMessageHistory(service, session_id="s").messages
    assert PLAIN_RUNNABLE_WARNING not in [r.getMessage() for r in caplog.records]


def test_user_id_names_the_sessions_owner() -> None:
    service = MemoryService(MemoryStore())
    history = FlowmemChatMessageHistory(service, session_id="ana-1", user_id="ana")
    history.add_messages([HumanMessage(QUESTION)])
    assert service.store.get_session("ana-1").owner == "ana"
    assert history.context == ExecutionContext(session_id="ana-1", user_id="ana")


def test_a_context_and_ids_together_are_refused_with_what_to_pass() -> None:
    service = MemoryService(MemoryStore())
    with pytest.raises(TypeError, match=r"ExecutionContext\(session_id=\.\.\., user_id=\.\.\.\)"):
        FlowmemChatMessageHistory(service, session_id="a", context=ExecutionContext(session_id="b"))


def test_the_matrix_judges_messages_as_langchain_builds_them() -> None:
    """The kill program's view of a message (``said``) for each class the loop stores."""
    call = AIMessage("", tool_calls=[{"id": "call_w1", "name": "weather", "args": {}}])
    assert [
        said(m) for m in (HumanMessage("q"), call, ToolMessage("r", tool_call_id="call_w1"))
    ] == [
        Said("user", "q"),
        Said("assistant", "", calls=("call_w1",)),
        Said("tool", "r", answers="call_w1"),
    ]
