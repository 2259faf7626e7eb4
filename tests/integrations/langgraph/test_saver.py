"""``FlowmemSaver`` under real LangGraph graphs, on every backend.

What LangGraph's own savers do not do: a thread's messages are stored once (one row per
new message, not the whole list per checkpoint), the thread is a flowmem session (its
owner, its buffer, its deletion), and every checkpoint still reads back exactly the
messages LangGraph saved in it — time travel, forks, removals and replacements included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from typing_extensions import TypedDict

from flowmem.errors import AccessDeniedError, ScopeRefusedError, SessionDeletedError
from flowmem.integrations.langgraph.saver import HEAD_MARK, FlowmemSaver
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store
from flowmem.store.base import Address

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FlowmemSaver]:
    """A saver on a fresh database of each backend."""
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/lg.db"
    else:
        url = request.getfixturevalue("postgres_store_url")  # migrated already, no rows
    store = open_store(url)
    yield FlowmemSaver(MemoryService(store))
    store.close()


def _echo_graph(saver: FlowmemSaver) -> Any:
    """One node that answers every turn with one AIMessage (one message per step)."""

    def answer(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"answer {n}", id=f"ai-{n}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=saver)


def _config(thread: str = "t1", **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **extra}}


def _rows(saver: FlowmemSaver, thread: str, key: str = "langgraph") -> list[dict[str, Any]]:
    return saver.memory.store.load(Address("session", thread, key))


def _line_keys(saver: FlowmemSaver, thread: str) -> set[str]:
    store = saver.memory.store
    found = {k for k in ("langgraph",) if store.count(Address("session", thread, k))}
    for tup in saver.list(_config(thread)):
        for blob in saver.tables.get_blobs(thread, "", tup.checkpoint["channel_versions"]):
            if blob.value[0] == "flowmem.rows":
                found.add(blob.value[1].decode().split('"key": "')[1].split('"')[0])
    return found


def test_a_step_that_adds_one_message_stores_one_row(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    for turn in range(5):
        graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, _config())
    rows = _rows(saver, "t1")
    assert len(rows) == 10  # 5 questions and 5 answers: each stored once
    assert [r["content"] for r in rows[:4]] == ["q0", "answer 1", "q1", "answer 3"]
    assert _line_keys(saver, "t1") == {"langgraph"}  # no copy was made


def test_every_checkpoint_reads_back_exactly_its_messages(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, _config())
    history = list(graph.get_state_history(_config()))
    assert len(history) == 9  # per turn: input, __start__, answer
    lengths = [len(s.values.get("messages", [])) for s in history]
    assert lengths == [6, 5, 4, 4, 3, 2, 2, 1, 0]
    for state in history:  # each state's messages are a prefix of the final list
        final = history[0].values["messages"]
        assert state.values.get("messages", []) == final[: len(state.values.get("messages", []))]


def test_a_fresh_saver_reads_what_another_wrote(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("q0", id="h0")]}, _config())
    other = FlowmemSaver(saver.memory)  # no line heads remembered
    state = _echo_graph(other).get_state(_config())
    assert [m.content for m in state.values["messages"]] == ["q0", "answer 1"]
    _echo_graph(other).invoke({"messages": [HumanMessage("q1", id="h1")]}, _config())
    assert len(_rows(saver, "t1")) == 4  # the second saver extended the same line


def test_time_travel_forks_and_both_branches_stay_exact(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("q0", id="h0")]}, _config())
    graph.invoke({"messages": [HumanMessage("q1", id="h1")]}, _config())
    before = {s.config["configurable"]["checkpoint_id"]: s.values for s in graph.get_state_history(_config())}
    first_turn = next(
        s for s in graph.get_state_history(_config()) if len(s.values.get("messages", [])) == 2
    )
    forked = graph.invoke({"messages": [HumanMessage("other", id="h-other")]}, first_turn.config)
    assert [m.content for m in forked["messages"]] == ["q0", "answer 1", "other", "answer 3"]
    for state in graph.get_state_history(_config()):  # the first line reads back unchanged
        cid = state.config["configurable"]["checkpoint_id"]
        if cid in before:
            assert state.values == before[cid]
    assert graph.get_state(_config()).values["messages"] == forked["messages"]


def test_update_state_on_a_past_checkpoint_branches(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("q0", id="h0")]}, _config())
    graph.invoke({"messages": [HumanMessage("q1", id="h1")]}, _config())
    past = next(s for s in graph.get_state_history(_config()) if len(s.values.get("messages", [])) == 2)
    config = graph.update_state(past.config, {"messages": [AIMessage("edited", id="ai-1")]})
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["q0", "edited"]
    latest = graph.get_state(_config()).values["messages"]
    assert [m.content for m in latest] == ["q0", "edited"]


def test_two_branches_may_answer_one_tool_call_differently(saver: FlowmemSaver) -> None:
    """MEM-1 applies along one line: a fork's own answer to a call is kept, not deduplicated."""
    graph = _echo_graph(saver)
    call = AIMessage("", id="a-call", tool_calls=[{"id": "c1", "name": "f", "args": {}}])
    config = graph.update_state(_config(), {"messages": [HumanMessage("go", id="h0"), call]})
    answered = graph.update_state(config, {"messages": [ToolMessage("first", tool_call_id="c1", id="t-a")]})
    other = graph.update_state(config, {"messages": [ToolMessage("second", tool_call_id="c1", id="t-b")]})
    assert graph.get_state(answered).values["messages"][-1].content == "first"
    assert graph.get_state(other).values["messages"][-1].content == "second"


def test_remove_and_replace_by_id_read_back_exactly(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("q0", id="h0")]}, _config())
    graph.invoke({"messages": [HumanMessage("q1", id="h1")]}, _config())
    config = graph.update_state(_config(), {"messages": [RemoveMessage(id="h0")]})
    assert [m.id for m in graph.get_state(config).values["messages"]] == ["ai-1", "h1", "ai-3"]
    config = graph.update_state(config, {"messages": [AIMessage("replaced", id="ai-1")]})
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["replaced", "q1", "answer 3"]
    config = graph.update_state(
        config, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id="f")]}
    )
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["fresh"]
    history = [len(s.values.get("messages", [])) for s in graph.get_state_history(_config())]
    assert history[:4] == [1, 3, 3, 4]  # every older checkpoint still reads its own list


def test_messages_come_back_lossless(saver: FlowmemSaver) -> None:
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    thinking = {"type": "thinking", "thinking": "let me see", "signature": "sig-123"}
    messages: list[BaseMessage] = [
        SystemMessage("be brief", id="s"),
        HumanMessage(content=[{"type": "text", "text": "what is this?"}, image], id="h"),
        AIMessage(
            content=[thinking, {"type": "text", "text": "a pixel"}],
            id="a",
            tool_calls=[{"id": "c1", "name": "zoom", "args": {"x": 1}}],
            response_metadata={"model_name": "m", "stop_reason": "tool_use"},
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        ),
        ToolMessage("boom", tool_call_id="c1", status="error", id="t", artifact={"raw": [1, 2]}),
    ]
    graph = _echo_graph(saver)
    config = graph.update_state(_config(), {"messages": messages})
    assert graph.get_state(config).values["messages"] == messages
    assert FlowmemSaver(saver.memory).get_tuple(config).checkpoint["channel_values"]["messages"] == messages


class Custom(HumanMessage):
    """A message class of the application's own: only LangGraph's serializer knows it."""

    mood: str = "calm"


def test_a_message_rows_cannot_hold_keeps_langgraphs_own_bytes(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    custom = Custom("hello", id="c", mood="cheerful")
    config = graph.update_state(_config(), {"messages": [custom]})
    fresh = FlowmemSaver(saver.memory)
    fresh.serde = saver.serde
    back = fresh.get_tuple(config).checkpoint["channel_values"]["messages"]
    assert back[0].content == "hello" and back[0].id == "c"


class Counter(TypedDict):
    """A graph with no message channel at all."""

    count: int
    notes: list[str]


def test_a_graph_without_messages_is_stored_like_any_channel(saver: FlowmemSaver) -> None:
    def step(state: Counter) -> dict[str, Any]:
        return {"count": state["count"] + 1, "notes": [*state["notes"], f"n{state['count']}"]}

    graph = StateGraph(Counter)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    app = graph.compile(checkpointer=saver)
    app.invoke({"count": 0, "notes": []}, _config("plain"))
    out = app.invoke({"count": 5, "notes": ["x"]}, _config("plain"))
    assert out == {"count": 6, "notes": ["x", "n5"]}
    assert _rows(saver, "plain") == []


def test_a_thread_is_a_session_owned_by_the_configs_user(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("owned", user_id="alice"))
    record = saver.memory.store.get_session("owned")
    assert record is not None and record.owner == "alice"
    loaded = saver.memory.load(
        "session", "langgraph", ExecutionContext(session_id="owned", user_id="alice")
    )
    assert [m["content"] for m in loaded.messages] == ["hi", "answer 1"]


def test_a_thread_is_owned_by_the_savers_context_else_nobody(saver: FlowmemSaver) -> None:
    mine = FlowmemSaver(saver.memory, context=ExecutionContext(user_id="bob"))
    _echo_graph(mine).invoke({"messages": [HumanMessage("hi", id="h")]}, _config("bobs"))
    _echo_graph(saver).invoke({"messages": [HumanMessage("hi", id="h")]}, _config("nobodys"))
    assert saver.memory.store.get_session("bobs").owner == "bob"
    assert saver.memory.store.get_session("nobodys").owner is None


def test_mem_9_another_users_thread_refuses_the_write(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("alices", user_id="alice"))
    with pytest.raises(AccessDeniedError, match="another owner"):
        graph.invoke({"messages": [HumanMessage("mine now", id="m")]}, _config("alices", user_id="eve"))
    assert len(_rows(saver, "alices")) == 2


def test_mem_9_another_users_pending_writes_are_refused_and_not_stored(saver: FlowmemSaver) -> None:
    _echo_graph(saver).invoke({"messages": [HumanMessage("hi", id="h")]}, _config("alices", user_id="alice"))
    latest = saver.get_tuple(_config("alices", user_id="alice"))
    assert latest is not None
    asked = {**latest.config["configurable"], "user_id": "eve"}
    with pytest.raises(AccessDeniedError, match="another owner"):
        saver.put_writes({"configurable": asked}, [("messages", ["eve's"])], "task-eve")
    again = saver.get_tuple(_config("alices", user_id="alice"))
    assert again is not None and again.pending_writes == latest.pending_writes
    saver.put_writes(latest.config, [("messages", ["alice's"])], "task-alice")  # the owner may
    stored = saver.get_tuple(_config("alices", user_id="alice"))
    assert stored is not None and ("task-alice", "messages", ["alice's"]) in stored.pending_writes


@pytest.mark.parametrize("thread", ["0", "None", "null", " ", "-1"])
def test_mem_13_an_unusable_thread_id_refuses_without_touching_storage(
    saver: FlowmemSaver, thread: str, caplog: pytest.LogCaptureFixture
) -> None:
    graph = _echo_graph(saver)
    with caplog.at_level(logging.WARNING, logger="flowmem"), pytest.raises(ScopeRefusedError):
        graph.invoke({"messages": [HumanMessage("hi")]}, _config(thread))
    assert saver.get_tuple(_config(thread)) is None
    assert list(saver.list(_config(thread))) == []
    assert list(saver.list(None)) == []
    assert saver.memory.store.list_sessions(None, True, 10, 0)[1] == 0
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert refusals and all(r.levelno == logging.WARNING for r in refusals)


def test_deleting_the_session_deletes_the_thread(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("gone"))
    assert saver.memory.store.delete_session("gone")
    assert saver.get_tuple(_config("gone")) is None
    assert list(saver.list(_config("gone"))) == []
    assert _rows(saver, "gone") == []


def test_erasing_the_user_deletes_their_threads(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("a1", user_id="alice"))
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("b1", user_id="bob"))
    saver.memory.store.erase_user("alice")
    assert saver.get_tuple(_config("a1", user_id="alice")) is None
    assert saver.get_tuple(_config("b1", user_id="bob")) is not None


def test_delete_thread_deletes_the_session(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("bye"))
    saver.delete_thread("bye")
    assert saver.memory.store.get_session("bye") is None
    assert saver.get_tuple(_config("bye")) is None


def test_a_deleted_thread_stays_deleted(saver: FlowmemSaver) -> None:
    """Issue 24 §2: a write to a deleted thread is refused, never a new first write."""
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("once", user_id="ana"))
    FlowmemSaver(saver.memory, context=ExecutionContext(user_id="ana")).delete_thread("once")  # 0109
    with pytest.raises(SessionDeletedError):
        graph.invoke({"messages": [HumanMessage("again", id="h2")]}, _config("once", user_id="ana"))
    assert saver.memory.store.get_session("once") is None
    assert saver.get_tuple(_config("once")) is None
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config("b2", user_id="bob"))
    saver.memory.store.erase_user("bob")
    with pytest.raises(SessionDeletedError):
        graph.invoke({"messages": [HumanMessage("back", id="h3")]}, _config("b2", user_id="bob"))


def test_prune_keep_latest_keeps_the_latest_messages(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"h{turn}")]}, _config())
    saver.prune(["t1"])
    assert len(list(saver.list(_config()))) == 1
    assert len(graph.get_state(_config()).values["messages"]) == 6


def test_the_latest_checkpoint_is_marked_for_fork_protection(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)
    graph.invoke({"messages": [HumanMessage("hi", id="h")]}, _config())
    latest = saver.get_tuple(_config())
    mark = latest.config["configurable"][HEAD_MARK]
    assert isinstance(mark, str) and mark != saver.get_tuple(_config()).config["configurable"][HEAD_MARK]
    older = saver.get_tuple(latest.parent_config)
    assert HEAD_MARK not in older.config["configurable"]
    assert HEAD_MARK not in latest.metadata  # never copied into the checkpoint's metadata


def test_the_async_api_runs_a_graph(saver: FlowmemSaver) -> None:
    graph = _echo_graph(saver)

    async def run() -> list[str]:
        await graph.ainvoke({"messages": [HumanMessage("q0", id="h0")]}, _config("async"))
        out = await graph.ainvoke({"messages": [HumanMessage("q1", id="h1")]}, _config("async"))
        history = [s async for s in graph.aget_state_history(_config("async"))]
        assert len(history) == 6
        return [m.content for m in out["messages"]]

    assert asyncio.run(run()) == ["q0", "answer 1", "q1", "answer 3"]


def test_from_conn_string_opens_the_flowmem_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/app.db"
    with FlowmemSaver.from_conn_string(url) as saver:
        _echo_graph(saver).invoke({"messages": [HumanMessage("hi", id="h")]}, _config())
    with FlowmemSaver.from_conn_string(url) as saver:
        assert len(_echo_graph(saver).get_state(_config()).values["messages"]) == 2


def test_the_saver_needs_a_memory_service() -> None:
    with pytest.raises(TypeError, match="MemoryService"):
        FlowmemSaver(object())  # type: ignore[arg-type]
