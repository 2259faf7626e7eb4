"""``FlowmemChatMessageHistory`` loses nothing (issue 13 §5): every class, block and field.

What is stored runs on an in-process service and on a ``Client`` of a real
``flowmem serve`` (``service``, ``backend_service``, ``flaky``: ``remote``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import langchain_core.messages as lc_messages
import pytest
from hypothesis import HealthCheck, given, settings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.content import KNOWN_BLOCK_TYPES
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

import flowmem.integrations.langchain as langchain_adapter
from flowmem.client import ServerUnreachableError
from flowmem.core import check_sendable, is_empty, to_row
from flowmem.errors import (
    InvalidMessageError,
    NotSerializableError,
    StoreUnavailableError,
    UnknownRoleError,
)
from flowmem.integrations.langchain import (
    FlowmemChatMessageHistory,
    block_to_part,
    message_to_row,
    row_to_message,
)
from flowmem.memory import Memory
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations.backends import LOCAL, REMOTES, SERVERS, remote_memory, switch_of
from tests.integrations.lc_strategies import CLASSES, GENERATED_TYPES, LABELLED_BLOCKS, MESSAGES

# RunnableWithMessageHistory and BaseChatMessageHistory are deprecated upstream (the path
# this adapter serves); any other deprecation, flowmem's own above all, still fails
pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

REFUSED_CLASSES = {"FunctionMessage", "FunctionMessageChunk", "RemoveMessage"}

THINKING = {"type": "thinking", "thinking": "The user wants the weather.", "signature": "EqQBCgIYAhIM"}
SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "Lisbon"}}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://w.example", "title": "W", "encrypted_content": "Eu8B"}],
}  # fmt: skip
CLAUDE_TURN = AIMessage(
    [
        THINKING,
        SEARCH,
        SEARCH_RESULT,
        {"type": "text", "text": "Checking.", "citations": [{"type": "web_search_result_location", "url": "https://w.example", "title": "W", "encrypted_index": "Eo8", "cited_text": "18C"}]},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Lisbon"}},
    ],
    tool_calls=[{"id": "toolu_1", "name": "weather", "args": {"city": "Lisbon"}}],
    id="run-1",
    usage_metadata={"input_tokens": 10, "output_tokens": 20, "total_tokens": 30},
    response_metadata={"model_provider": "anthropic", "stop_reason": "tool_use"},
)  # fmt: skip
SCREENSHOT = ToolMessage(
    [{"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}],
    tool_call_id="toolu_1",
    status="error",
    artifact={"exit_code": 1},
)
VISION = HumanMessage(
    [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://x.example/cat.png", "detail": "high"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
    ],
    id="h-1",
    name="ana",
)


def _history(service: Memory, session: str = "s1") -> FlowmemChatMessageHistory:
    return FlowmemChatMessageHistory(service, session_id=session)


def _round_trip(message: BaseMessage) -> BaseMessage:
    """message -> row -> JSON text -> row -> message, as a store does."""
    return row_to_message(json.loads(json.dumps(message_to_row(message))))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MESSAGES)
def test_every_message_round_trips_equal(message: BaseMessage) -> None:
    assert _round_trip(message) == message


@settings(max_examples=200, deadline=None)
@given(LABELLED_BLOCKS)
def test_blocks_with_a_neutral_kind_become_neutral_parts(labelled: tuple[Any, str | None]) -> None:
    block, neutral = labelled
    part = block_to_part(block)
    if neutral is None:
        assert part["type"] in {"provider", "text", "image", "audio", "file", "reasoning"}
    else:
        assert part["type"] == neutral, (block, part)
    if part["type"] == "provider":
        assert part["block"] == block
    assert row_to_message(message_to_row(HumanMessage([block]))).content == [block]


def test_generators_cover_every_langchain_message_class_and_block_type() -> None:
    """Fails when langchain-core grows a message class or a standard block type."""
    classes = {
        name
        for name in lc_messages.__all__
        if isinstance(getattr(lc_messages, name, None), type)
        and issubclass(getattr(lc_messages, name), BaseMessage)
        and name not in ("BaseMessage", "BaseMessageChunk")
    }
    assert classes == {cls.__name__ for cls, _, _ in CLASSES} | REFUSED_CLASSES
    assert set(KNOWN_BLOCK_TYPES) <= GENERATED_TYPES, set(KNOWN_BLOCK_TYPES) - GENERATED_TYPES


_SESSIONS = iter(range(10**9))


@settings(
    max_examples=150,
    deadline=None,
    # one service (or server user) for every example: each example has its own session
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(message=MESSAGES)
def test_stored_messages_come_back_equal(service: Memory, message: BaseMessage) -> None:
    history = _history(service, f"s{next(_SESSIONS)}")
    history.add_messages([message])
    if is_empty(to_row(message_to_row(message))):
        # DESIGN §2: no content and no call with a usable id is nothing to append
        assert history.raw_messages == []
    else:
        assert history.raw_messages == [message]


def test_every_field_and_block_survives_each_backend(backend_service: Memory) -> None:
    sent: list[BaseMessage] = [
        SystemMessage("be brief", id="sys"),
        ChatMessage("obey the rules", role="developer"),
        VISION,
        CLAUDE_TURN,
        SCREENSHOT,
        AIMessage(
            content_blocks=[
                {"type": "reasoning", "reasoning": "done", "extras": {"signature": "s"}},
                {"type": "text", "text": "It failed.", "annotations": [{"type": "citation", "url": "https://w.example"}]},
                {"type": "server_tool_call", "id": "ws_1", "name": "web_search", "args": {"q": "x"}},
                {"type": "server_tool_result", "tool_call_id": "ws_1", "status": "success", "output": [1]},
            ],
            invalid_tool_calls=[{"type": "invalid_tool_call", "id": "bad", "name": "f", "args": "{", "error": "json"}],
        ),
    ]  # fmt: skip
    history = _history(backend_service)
    history.add_messages(sent)
    assert history.raw_messages == sent
    # the normalized read moves system rows first (MEM-5) and keeps every part
    assert history.messages == [sent[0], sent[1], *sent[2:]]
    rows = backend_service.load("session", "chat_history", ExecutionContext(session_id="s1"))
    claude = rows.messages[3]
    assert [p["type"] for p in claude["content"]] == ["reasoning", "provider", "provider", "text"]
    assert claude["content"][0]["signature"] == THINKING["signature"]
    assert rows.messages[4]["metadata"]["is_error"] is True
    assert rows.messages[1]["role"] == "system"
    assert check_sendable(rows.messages) == []


def test_a_thinking_turn_leads_with_its_reasoning_after_normalization(service: Memory) -> None:
    history = _history(service)
    history.add_messages([HumanMessage("weather?"), CLAUDE_TURN])
    turn = history.messages[1]
    assert turn.content[0] == THINKING  # the reasoning still opens the turn
    assert turn.tool_calls == CLAUDE_TURN.tool_calls  # type: ignore[attr-defined]


def test_tool_status_error_round_trips_as_is_error() -> None:
    row = message_to_row(SCREENSHOT)
    assert row["is_error"] is True
    assert row["content"] == [{"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"}]
    assert row_to_message(row) == SCREENSHOT
    assert "is_error" not in message_to_row(ToolMessage("ok", tool_call_id="c"))


def test_developer_chat_message_is_a_system_row() -> None:
    message = ChatMessage("Answer in French.", role="developer")
    row = message_to_row(message)
    assert row["role"] == "system"
    assert row_to_message(row) == message


@pytest.mark.parametrize(
    ("message", "error", "match"),
    [
        (RemoveMessage(id="m1"), InvalidMessageError, "append-only"),
        (FunctionMessage("18C", name="weather"), InvalidMessageError, "ToolMessage"),
        (ChatMessage("x", role="critic"), UnknownRoleError, "critic"),
        (ToolMessage("x", tool_call_id="c", artifact=(1, 2)), NotSerializableError, "JSON"),
        (AIMessage("x", response_metadata={"t": object()}), NotSerializableError, "JSON"),
    ],
)
def test_a_message_flowmem_cannot_take_is_refused_and_nothing_is_written(
    message: BaseMessage, error: type[Exception], match: str, service: Memory
) -> None:
    history = _history(service)
    with pytest.raises(error, match=match):
        history.add_messages([HumanMessage("first"), message])
    history.discard_unstored()
    assert history.raw_messages == []


def test_rows_written_by_other_clients_read_as_v1_blocks() -> None:
    row = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "hm", "signature": "sig", "provider": "anthropic"},
            {"type": "image", "url": "https://x.example/a.png"},
            {"type": "provider", "provider": "responses", "block": {"type": "web_search_call", "id": "ws"}},
        ],
        "tool_calls": [{"tool_call_id": "c1", "name": "f", "args": '{"a": 1}'}],
    }  # fmt: skip
    message = row_to_message(row)
    assert message.content == [
        {"type": "reasoning", "reasoning": "hm", "extras": {"signature": "sig"}},
        {"type": "image", "url": "https://x.example/a.png"},
        {"type": "web_search_call", "id": "ws"},
    ]
    assert message.tool_calls == [  # type: ignore[attr-defined]
        {"id": "c1", "name": "f", "args": {"a": 1}, "type": "tool_call"}
    ]


# --- under RunnableWithMessageHistory: no turn is lost silently -----------------------


def _chain(service: Memory, replies: list[AIMessage], calls: list[int]) -> Any:
    model = GenericFakeChatModel(messages=iter(replies))
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{input}")]
    )

    def count(value: Any) -> Any:
        calls.append(1)
        return value

    return RunnableWithMessageHistory(
        prompt | count | model,
        lambda session_id: FlowmemChatMessageHistory(service, session_id=session_id),
        input_messages_key="input",
        history_messages_key="history",
    )


def _invoke(chain: Any, text: str) -> Any:
    return chain.invoke({"input": text}, config={"configurable": {"session_id": "s1"}})


def test_a_thinking_and_search_turn_is_stored_under_runnable_history(service: Memory) -> None:
    """The issue's case: a model answering with a thinking block left the history empty."""
    answer = AIMessage([THINKING, SEARCH, SEARCH_RESULT, {"type": "text", "text": "18C."}], id="r1")
    _invoke(_chain(service, [answer], []), "weather in Lisbon?")
    assert _history(service).messages == [HumanMessage("weather in Lisbon?"), answer]


class _FlakyStore(MemoryStore):
    """A memory store whose appends fail while ``down`` is set."""

    down = False

    def append(self, *args: Any, **kwargs: Any) -> Any:
        if self.down:
            raise StoreUnavailableError("the database is down")
        return super().append(*args, **kwargs)


@dataclass
class Flaky:
    """A memory whose writes can be made to fail: its store's appends, or its writes' connections."""

    memory: Memory
    switch: Any  # has ``down``
    error: type[Exception]

    @property
    def down(self) -> bool:
        return bool(self.switch.down)

    @down.setter
    def down(self, value: bool) -> None:
        self.switch.down = value


@pytest.fixture(params=[LOCAL, *REMOTES])
def flaky(request: pytest.FixtureRequest) -> Flaky:
    """Local: a service whose store fails appends. Remote: a client whose writes cannot connect."""
    if request.param in SERVERS:
        client = remote_memory(request, switchable=True, kind=request.param)
        return Flaky(client, switch_of(client), ServerUnreachableError)
    store = _FlakyStore()
    return Flaky(MemoryService(store), store, StoreUnavailableError)


def test_a_turn_whose_write_failed_is_written_before_the_next_turn(flaky: Flaky) -> None:
    service = flaky.memory
    calls: list[int] = []
    chain = _chain(service, [AIMessage("hi Ana"), AIMessage("you are Ana")], calls)
    flaky.down = True
    assert _invoke(chain, "I am Ana").content == "hi Ana"  # LangChain swallowed the error
    assert [m.content for m in _history(service).unstored()] == ["I am Ana", "hi Ana"]
    assert len(calls) == 1
    flaky.down = False
    _invoke(chain, "who am I?")
    assert len(calls) == 2 and _history(service).unstored() == []
    assert [m.content for m in _history(service).messages] == [
        "I am Ana",
        "hi Ana",
        "who am I?",
        "you are Ana",
    ]


def test_a_turn_that_cannot_be_stored_stops_the_next_turn_before_the_model_runs(
    service: Memory,
) -> None:
    calls: list[int] = []
    bad = AIMessage("hi", response_metadata={"created": object()})  # not JSON
    chain = _chain(service, [bad, AIMessage("never")], calls)
    _invoke(chain, "I am Ana")  # the callback swallows the refusal ...
    assert len(calls) == 1
    with pytest.raises(NotSerializableError) as raised:  # ... the next turn does not
        _invoke(chain, "who am I?")
    assert len(calls) == 1  # the model did not run on a history missing a turn
    assert "discard_unstored" in "".join(getattr(raised.value, "__notes__", []))
    dropped = _history(service).discard_unstored()
    assert [m.content for m in dropped] == ["I am Ana", "hi"]
    assert _history(service).messages == []


def test_a_caller_retrying_the_failed_batch_stores_it_once(flaky: Flaky) -> None:
    history = _history(flaky.memory)
    flaky.down = True
    with pytest.raises(flaky.error):
        history.add_messages([HumanMessage("hi")])
    flaky.down = False
    history.add_messages([HumanMessage("hi")])
    assert history.raw_messages == [HumanMessage("hi")]
    assert history.unstored() == []


def test_waiting_messages_are_bounded(monkeypatch: pytest.MonkeyPatch, flaky: Flaky) -> None:
    monkeypatch.setattr(langchain_adapter, "MAX_UNSTORED_MESSAGES", 3)
    history = _history(flaky.memory)
    flaky.down = True
    for text in ("a", "b", "c", "d"):
        with pytest.raises(flaky.error):
            history.add_messages([HumanMessage(text)])
    assert [m.content for m in history.unstored()] == ["a", "b", "c"]  # "d" was only raised


def test_a_forged_row_is_refused_not_built_unvalidated() -> None:
    forged = {
        "role": "assistant",
        "content": "x",
        "extra": {"langchain": {"class": "AIMessage", "fields": {"usage_metadata": "lots"}}},
    }
    with pytest.raises(InvalidMessageError, match="not a valid AIMessage"):
        row_to_message(forged)
    unknown_class = {"role": "user", "content": "x", "extra": {"langchain": {"class": "os.system"}}}
    assert type(row_to_message(unknown_class)) is HumanMessage


# --- issue 24 §5: every turn read back, in the stored order; a refused edit poisons nothing --


BAD_CALL = {"type": "invalid_tool_call", "id": "call_9", "name": "weather", "args": '{"city": ', "error": "bad JSON"}


def test_a_turn_of_only_invalid_tool_calls_is_stored(service: Memory) -> None:
    """A model turn whose every call failed to parse (content empty) was not stored: the turn was lost."""
    turn = AIMessage("", invalid_tool_calls=[BAD_CALL], id="run-9")
    in_blocks = AIMessage([BAD_CALL], invalid_tool_calls=[BAD_CALL])
    history = _history(service)
    history.add_messages([HumanMessage("Weather in Lisbon?"), turn, in_blocks, HumanMessage("and?")])
    assert history.raw_messages == [HumanMessage("Weather in Lisbon?"), turn, in_blocks, HumanMessage("and?")]
    assert history.messages == history.raw_messages
    assert _round_trip(turn) == turn and _round_trip(in_blocks) == in_blocks


def test_a_refused_remove_message_leaves_nothing_pending(service: Memory) -> None:
    """A RemoveMessage was kept as an unstored message: every later read raised until discard_unstored()."""
    history = _history(service)
    history.add_messages([HumanMessage("first")])
    with pytest.raises(InvalidMessageError, match=r"append-only.*clear\(\)"):
        history.add_messages([RemoveMessage(id="m1"), HumanMessage("second")])
    assert history.unstored() == []
    assert history.messages == [HumanMessage("first")]  # the read does not raise: nothing waits
    history.add_messages([HumanMessage("second")])
    assert [m.content for m in history.messages] == ["first", "second"]


def _conversation() -> list[BaseMessage]:
    """26 messages of every kind, with system messages mid-conversation."""
    messages: list[BaseMessage] = [SystemMessage("Be brief.", id="sys-1")]
    for n in range(3):
        call = {"id": f"call_{n}", "name": "weather", "args": {"day": n}}
        messages += [
            HumanMessage(f"Weather on day {n}?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"{18 + n}C", tool_call_id=f"call_{n}"),
            AIMessage(f"{18 + n}C."),
        ]
        messages.append(SystemMessage(f"From now on, answer in language {n}."))
    messages += [
        HumanMessage("And the week?"),
        AIMessage("", invalid_tool_calls=[BAD_CALL]),
        HumanMessage("Try again."),
        ChatMessage("Use Celsius.", role="developer"),
        AIMessage("", tool_calls=[{"id": "call_w", "name": "week", "args": {}}]),
        ToolMessage("mild", tool_call_id="call_w", status="error"),
        AIMessage("Mild."),
        SystemMessage("Wrap up."),
        HumanMessage("Thanks."),
        AIMessage("You're welcome."),
    ]
    return messages


def test_the_history_reads_back_every_message_in_the_stored_order(service: Memory) -> None:
    """26 messages added came back 25, the system messages moved to the front (MEM-5 step 2).

    A LangChain model takes system messages where they are (or joins them itself):
    the history hands back what was stored, repairing only tool pairing (DESIGN §5).
    """
    sent = _conversation()
    assert len(sent) == 26
    history = _history(service)
    history.add_messages(sent)
    assert history.messages == sent
    assert history.raw_messages == sent
