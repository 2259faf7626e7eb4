"""Time travel and forks for a thread's owner, as with ``InMemorySaver`` (issue 36).

LangGraph's documented replay (``invoke(None, snapshot.config)``) and fork
(``update_state(snapshot.config, …)`` then ``invoke(None, forked)``) run side by side on
``InMemorySaver`` and ``FlowmemSaver``, the owner named by ``configurable.user_id`` or
by the saver's context: the same snapshots, the same messages. Another user still
cannot write the thread, whatever config it got hold of.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.errors import AccessDeniedError
from flowmem.integrations.langgraph import FlowmemSaver
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each backend."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tt.db"
    return str(request.getfixturevalue("postgres_store_url"))  # migrated already, no rows


@pytest.fixture
def service(url: str) -> Iterator[MemoryService]:
    """A memory service on the test's database."""
    store = open_store(url)
    yield MemoryService(store)
    store.close()


def app(saver: BaseCheckpointSaver[Any]) -> Any:
    """The docs' own graph: one node answering the latest message."""

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"you said {state['messages'][-1].content}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=saver)


def texts(values: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in values.get("messages", [])]


def travel(saver: BaseCheckpointSaver[Any], config: dict[str, Any]) -> dict[str, Any]:
    """Two turns, a replay of the second from its input and a fork of it; what each shows."""
    graph = app(saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, config)
    graph.invoke({"messages": [HumanMessage("again")]}, config)
    history = list(graph.get_state_history(config))
    before_second = next(
        s for s in history if s.next == ("answer",) and texts(s.values)[-1:] == ["again"]
    )
    replayed = graph.invoke(None, before_second.config)
    forked = graph.update_state(before_second.config, {"messages": [HumanMessage("instead")]})
    after_fork = graph.invoke(None, forked)
    return {
        "history": [(texts(s.values), s.next) for s in history],
        "replayed": texts(replayed),
        "forked": texts(after_fork),
        "latest": texts(graph.get_state(config).values),
        "branches": len(list(graph.get_state_history(config))),
    }


def test_replay_and_fork_with_the_owner_in_the_config_as_with_in_memory_saver(
    service: MemoryService,
) -> None:
    config = {"configurable": {"thread_id": "tt-1", "user_id": "ana"}}
    expected = travel(InMemorySaver(), config)
    assert travel(FlowmemSaver(service), config) == expected
    assert expected["forked"][-2:] == ["instead", "you said instead"]
    assert service.store.get_session("tt-1").owner == "ana"  # type: ignore[union-attr]


def test_replay_and_fork_with_the_owner_in_the_savers_context_as_with_in_memory_saver(
    service: MemoryService,
) -> None:
    config = {"configurable": {"thread_id": "tt-2"}}
    expected = travel(InMemorySaver(), config)
    saver = FlowmemSaver(service, context=ExecutionContext(user_id="ana"))
    assert travel(saver, config) == expected
    assert service.store.get_session("tt-2").owner == "ana"  # type: ignore[union-attr]


def test_the_configs_a_read_returns_carry_the_callers_user_and_no_one_elses(
    service: MemoryService,
) -> None:
    saver = FlowmemSaver(service)
    graph = app(saver)
    graph.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "tt-3", "user_id": "ana"}})
    for snapshot in graph.get_state_history({"configurable": {"thread_id": "tt-3", "user_id": "ana"}}):
        assert snapshot.config["configurable"]["user_id"] == "ana"
        assert snapshot.parent_config is None or snapshot.parent_config["configurable"]["user_id"] == "ana"
    # a caller without a user reads nothing of ana's thread (decision 0107) ...
    assert saver.get_tuple({"configurable": {"thread_id": "tt-3"}}) is None
    # ... and the configs of a thread nobody owns name no user
    graph.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "tt-3a"}})
    anonymous = saver.get_tuple({"configurable": {"thread_id": "tt-3a"}})
    assert anonymous is not None and "user_id" not in anonymous.config["configurable"]


def test_another_user_cannot_replay_or_fork_the_owners_thread(service: MemoryService) -> None:
    saver = FlowmemSaver(service)
    graph = app(saver)
    ana = {"configurable": {"thread_id": "tt-4", "user_id": "ana"}}
    graph.invoke({"messages": [HumanMessage("hello")]}, ana)
    snapshot = graph.get_state(ana)
    ben = {"configurable": {**snapshot.config["configurable"], "user_id": "ben"}}
    before = len(list(graph.get_state_history(ana)))
    with pytest.raises(AccessDeniedError):
        graph.update_state(ben, {"messages": [HumanMessage("mine now")]})
    with pytest.raises(AccessDeniedError):
        graph.invoke({"messages": [HumanMessage("mine now")]}, ben)
    assert len(list(graph.get_state_history(ana))) == before  # nothing stored
    for snapshot in graph.get_state_history({"configurable": {"thread_id": "tt-4", "user_id": "ben"}}):
        assert snapshot.config["configurable"]["user_id"] == "ben"  # never ana's
