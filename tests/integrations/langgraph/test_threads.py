"""``ResolvedThreads`` (decision 0212): a write's thread and context kept per thread and user id.

``FlowmemSaver._write_thread`` with ``keep_threads`` (the kept path) and without (the plain
path: ``_writable`` and ``_context`` at every write) give the same thread, the same context
and the same errors, for every kind of id a config may carry; a refusal is never kept (its
WARNING is logged at every write); what is kept follows the saver's context; a graph's
steps resolve their thread once.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.integrations.langgraph.threads import ABSENT, ResolvedThreads
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store


class Text(str):
    """A ``str`` subclass: never kept (its hash and equality could be its own)."""


IDS: list[Any] = [
    "t1",
    "t2",
    "None",
    " ",
    "",
    "x" * 255,
    "x" * 256,
    "a\x00b",
    "\ud800",
    "é",
    5,
    None,
    Text("t1"),
]
USERS: list[Any] = [ABSENT, None, "u1", "u2", "None", " ", "", "a\x00b", 7, Text("u1")]
NAMESPACES: list[Any] = [ABSENT, "", "ns", "a\x00b", 3]
CHECKPOINTS: list[Any] = [ABSENT, None, "c1", "x" * 256, "a\x00b"]
CONTEXTS = [None, ExecutionContext(user_id="ctx"), ExecutionContext(user_id="u1", node_id="n")]


def _config(thread: Any, user: Any, ns: Any, checkpoint: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread}
    for key, value in (("user_id", user), ("checkpoint_ns", ns), ("checkpoint_id", checkpoint)):
        if value is not ABSENT:
            conf[key] = value
    return {"configurable": conf}


def _outcome(saver: FlowmemSaver, config: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", saver._write_thread(config, "checkpoint write")
    except Exception as exc:  # the same error, type and text
        return "error", (type(exc), str(exc))


@pytest.fixture(scope="module")
def memory() -> Any:
    store = open_store("memory://")
    yield MemoryService(store)
    store.close()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(IDS),
            st.sampled_from(USERS),
            st.sampled_from(NAMESPACES),
            st.sampled_from(CHECKPOINTS),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(CONTEXTS),
    st.integers(min_value=1, max_value=4),
)
def test_a_kept_thread_is_what_resolving_it_gives(
    memory: MemoryService, configs: list[tuple[Any, ...]], context: Any, capacity: int
) -> None:
    kept = FlowmemSaver(memory, context=context, cache_threads=capacity)
    plain = FlowmemSaver(memory, context=context)
    plain.keep_threads = False
    for ids in configs * 2:  # each config again, once kept
        config = _config(*ids)
        assert _outcome(kept, config) == _outcome(plain, config)
    assert len(kept.resolved._found) <= capacity


def test_a_refusal_is_never_kept_its_warning_logged_at_each_write(
    memory: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    saver = FlowmemSaver(memory)
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        for _ in range(3):
            with pytest.raises(Exception, match="refused"):
                saver._write_thread({"configurable": {"thread_id": "None"}}, "checkpoint write")
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 3
    assert not saver.resolved._found


def test_what_is_kept_follows_the_savers_context(memory: MemoryService) -> None:
    saver = FlowmemSaver(memory, context=ExecutionContext(user_id="a"))
    config = {"configurable": {"thread_id": "t"}}
    assert saver._write_thread(config, "checkpoint write")[1].user_id == "a"
    saver.context = ExecutionContext(user_id="b")
    assert saver._write_thread(config, "checkpoint write")[1].user_id == "b"


def test_a_kept_threads_namespace_and_checkpoint_id_are_still_checked(
    memory: MemoryService,
) -> None:
    saver = FlowmemSaver(memory)
    saver._write_thread({"configurable": {"thread_id": "t"}}, "checkpoint write")
    with pytest.raises(Exception, match="checkpoint_ns"):
        saver._write_thread(
            {"configurable": {"thread_id": "t", "checkpoint_ns": "a\x00b"}}, "checkpoint write"
        )
    with pytest.raises(Exception, match="checkpoint_id"):
        saver._write_thread(
            {"configurable": {"thread_id": "t", "checkpoint_id": "x" * 256}}, "checkpoint write"
        )


def test_a_graphs_steps_resolve_their_thread_once(saver: FlowmemSaver) -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    resolved = []
    resolve = saver.memory.resolve

    def counted(*args: Any) -> Any:
        resolved.append(args[0])
        return resolve(*args)

    saver.memory.resolve = counted  # type: ignore[method-assign]

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"a{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda s: "agent" if len(s["messages"]) < 10 else END)
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "once"}})
    # one write's resolution and the invoke's read (which is not kept): every step's put and
    # put_writes resolved the thread before (~20 here)
    assert resolved.count("checkpoint write") == 1
    assert len(graph.get_state({"configurable": {"thread_id": "once"}}).values["messages"]) == 10


def test_the_newest_are_kept() -> None:
    kept = ResolvedThreads(capacity=2)
    base = object()
    for name in ("a", "b", "c"):
        kept.keep((name, ABSENT), base, name, None)
    assert kept.get(("a", ABSENT), base) is None
    assert kept.get(("c", ABSENT), base) == ("c", None)
    assert kept.get(("c", ABSENT), object()) is None  # another saver context
    assert ResolvedThreads.key({"thread_id": Text("t")}) is None
    assert ResolvedThreads.key({"thread_id": "t", "user_id": 7}) is None
    assert ResolvedThreads.key({"thread_id": "t"}) == ("t", ABSENT)
