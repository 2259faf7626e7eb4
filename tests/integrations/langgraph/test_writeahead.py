"""Write-ahead under LangGraph's default durability (issue 36, decision 0097).

With ``durability="async"`` LangGraph saves a step's checkpoint in a background thread
while the next step's tasks run. These tests slow every ``put`` down, so that the gap
is wide and certain, and look from inside the model and the tool at what another
reader of the database finds: with flowmem's write-ahead the question and the call are
there; without it (the same graph without the wrappers) they are not yet, which is
what a kill at that moment loses.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph._internal import _constants
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from flowmem.errors import ThreadForkedError
from flowmem.integrations.langgraph import (
    FlowmemHealing,
    FlowmemSaver,
    awrite_ahead_tool,
    write_ahead,
    write_ahead_tool,
    writeahead,
)
from flowmem.integrations.langgraph import saver as saver_module
from tests.integrations.langgraph.strict_model import StrictScriptedModel

QUESTION = "Weather in Lisbon?"
CALL_ID = "call_w1"
SLOW_PUT = 0.3


class SlowSaver(FlowmemSaver):
    """A ``FlowmemSaver`` whose every ``put`` takes ``SLOW_PUT`` seconds longer."""

    def put(self, *args: Any, **kwargs: Any) -> Any:
        """``FlowmemSaver.put``, late."""
        time.sleep(SLOW_PUT)
        return super().put(*args, **kwargs)


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A SQLite database of the test."""
    return f"sqlite:///{tmp_path}/flowmem.db"


@pytest.fixture
def saver(url: str) -> Iterator[SlowSaver]:
    """A slow saver on the test's database."""
    with SlowSaver.from_conn_string(url) as opened:
        yield opened  # type: ignore[misc]


def stored(url: str, thread: str) -> list[BaseMessage]:
    """What a new reader of the database finds on the thread's latest checkpoint."""
    with FlowmemSaver.from_conn_string(url) as reader:
        found = reader.get_tuple({"configurable": {"thread_id": thread}})
    return [] if found is None else list(found.checkpoint["channel_values"].get("messages", []))


class Seen:
    """What the model and the tool found stored when they started."""

    def __init__(self, url: str, thread: str) -> None:
        self.url, self.thread = url, thread
        self.at_model: list[list[str]] = []
        self.at_tool: list[list[str]] = []

    def look(self) -> list[str]:
        """The stored messages, as ``type:text`` or ``ai:<call ids>``."""
        return [
            f"ai:{','.join(c['id'] for c in m.tool_calls)}"
            if isinstance(m, AIMessage) and m.tool_calls
            else f"{m.type}:{m.content}"
            for m in stored(self.url, self.thread)
        ]


def looking_model(seen: Seen) -> StrictScriptedModel:
    """A scripted model (a call, then an answer) that looks at the database when asked."""
    call = AIMessage(
        "", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": CALL_ID}]
    )

    class Looking(StrictScriptedModel):
        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            seen.at_model.append(seen.look())
            return super()._generate(messages, *args, **kwargs)

    return Looking(replies=[call, AIMessage("18C and sunny in Lisbon.")])


def looking_tool(seen: Seen) -> Any:
    """The weather tool, looking at the database as it starts."""

    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        seen.at_tool.append(seen.look())
        return "18C and sunny"

    return weather


def ask(agent: Any, thread: str) -> dict[str, Any]:
    return agent.invoke(  # type: ignore[no-any-return]
        {"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": thread}}
    )


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_create_agent_with_flowmem_healing_stores_the_question_and_the_call_before_model_and_tool(
    saver: SlowSaver, url: str, run: str
) -> None:
    seen = Seen(url, "t-1")
    agent = create_agent(
        looking_model(seen), [looking_tool(seen)], checkpointer=saver, middleware=[FlowmemHealing()]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # written ahead: nothing to warn of
        if run == "ainvoke":
            asyncio.run(
                agent.ainvoke(
                    {"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t-1"}}
                )
            )
        else:
            ask(agent, "t-1")
    assert f"human:{QUESTION}" in seen.at_model[0]
    assert seen.at_tool == [[f"human:{QUESTION}", f"ai:{CALL_ID}"]]


def test_create_agent_without_the_middleware_starts_its_tool_before_the_call_is_stored(
    saver: SlowSaver, url: str
) -> None:
    """The contrast: LangGraph's own ``"async"`` durability, no write-ahead."""
    seen = Seen(url, "t-1")
    agent = create_agent(looking_model(seen), [looking_tool(seen)], checkpointer=saver)
    with pytest.warns(RuntimeWarning, match="durability"):
        ask(agent, "t-1")
    assert f"ai:{CALL_ID}" not in seen.at_tool[0]
    assert f"human:{QUESTION}" not in seen.at_model[0]


def tool_node_graph(seen: Seen, wrapped: bool) -> StateGraph:
    """The docs' ``StateGraph`` + ``ToolNode``, with or without the write-ahead."""
    model = looking_model(seen)

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        if wrapped:
            write_ahead(config)
        return {"messages": [model.invoke(state["messages"])]}

    wrappers: dict[str, Any] = (
        {"wrap_tool_call": write_ahead_tool, "awrap_tool_call": awrite_ahead_tool} if wrapped else {}
    )
    graph = StateGraph(MessagesState)
    graph.add_node(agent)
    graph.add_node(ToolNode([looking_tool(seen)], **wrappers))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_tool_node_with_the_wrappers_starts_its_tool_once_the_call_is_stored(
    saver: SlowSaver, url: str, run: str
) -> None:
    seen = Seen(url, "t-2")
    app = tool_node_graph(seen, wrapped=True).compile(checkpointer=saver)
    given = {"messages": [HumanMessage(QUESTION)]}
    config: Any = {"configurable": {"thread_id": "t-2"}}
    if run == "ainvoke":
        asyncio.run(app.ainvoke(given, config))
    else:
        app.invoke(given, config)
    assert seen.at_model[0] == [f"human:{QUESTION}"]
    assert seen.at_tool == [[f"human:{QUESTION}", f"ai:{CALL_ID}"]]


def test_a_tool_node_without_the_wrappers_is_told_once_per_saver(saver: SlowSaver, url: str) -> None:
    seens = [Seen(url, "t-3"), Seen(url, "t-4")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seen in seens:
            app = tool_node_graph(seen, wrapped=False).compile(checkpointer=saver)
            app.invoke(
                {"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": seen.thread}}
            )
    told = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(told) == 1
    assert "wrap_tool_call=write_ahead_tool" in str(told[0].message)
    assert 'durability="sync"' in str(told[0].message)
    assert all(f"ai:{CALL_ID}" not in seen.at_tool[0] for seen in seens)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_no_warning_where_the_call_was_stored_before_the_tool(
    saver: SlowSaver, url: str, durability: str
) -> None:
    """``durability="sync"`` is write-ahead by itself; the wrappers make ``"async"`` so."""
    seen = Seen(url, "t-5")
    app = tool_node_graph(seen, wrapped=durability == "async").compile(checkpointer=saver)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        app.invoke(
            {"messages": [HumanMessage(QUESTION)]},
            {"configurable": {"thread_id": "t-5"}},
            durability=durability,  # type: ignore[arg-type]
        )
    assert seen.at_tool == [[f"human:{QUESTION}", f"ai:{CALL_ID}"]]


def test_durability_exit_is_not_waited_for(url: str) -> None:
    """``"exit"`` stores nothing before the run ends: waiting would only time out."""
    with FlowmemSaver.from_conn_string(url, write_ahead_timeout=5) as saver:
        seen = Seen(url, "t-6")
        app = tool_node_graph(seen, wrapped=True).compile(checkpointer=saver)
        started = time.monotonic()
        app.invoke(
            {"messages": [HumanMessage(QUESTION)]},
            {"configurable": {"thread_id": "t-6"}},
            durability="exit",
        )
    assert time.monotonic() - started < 2
    assert seen.at_tool == [[]]


def test_the_wrappers_do_nothing_with_another_checkpointer() -> None:
    seen = Seen("memory://", "t-7")
    seen.look = lambda: []  # type: ignore[method-assign]
    app = tool_node_graph(seen, wrapped=True).compile(checkpointer=InMemorySaver())
    out = app.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t-7"}})
    assert out["messages"][-1].content == "18C and sunny in Lisbon."
    assert write_ahead({"configurable": {}}) is False
    assert write_ahead() is False  # outside a run


def test_a_waiter_gets_the_error_of_a_put_that_failed(url: str) -> None:
    """A checkpoint that will never be stored: its tool must not run (the run lost the thread)."""
    with FlowmemSaver.from_conn_string(url) as saver:
        key = ("t-8", "", "cp-1")
        saver.durable.failed(key, ThreadForkedError("moved", thread_id="t-8"))
        task: Any = {"configurable": {"thread_id": "t-8", "checkpoint_map": {"": "cp-1"}}}
        with pytest.raises(ThreadForkedError):
            saver.write_ahead(task)


def test_a_checkpoint_this_process_never_saw_is_looked_up_once(url: str) -> None:
    """A run resumed in a new process: its checkpoint is in the database already."""
    with FlowmemSaver.from_conn_string(url) as first:
        app = tool_node_graph(Seen(url, "t-9"), wrapped=False).compile(checkpointer=first)
        app.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t-9"}}, durability="sync")
        latest = first.get_tuple({"configurable": {"thread_id": "t-9"}})
    assert latest is not None
    with FlowmemSaver.from_conn_string(url, write_ahead_timeout=0.2) as second:
        task: Any = {
            "configurable": {
                "thread_id": "t-9",
                "checkpoint_map": {"": latest.config["configurable"]["checkpoint_id"]},
            }
        }
        assert second.write_ahead(task) is True
        unknown: Any = {"configurable": {"thread_id": "t-9", "checkpoint_map": {"": "nope"}}}
        started = time.monotonic()
        assert second.write_ahead(unknown) is False  # waited its timeout, then let the task run
        assert 0.15 < time.monotonic() - started < 2


def test_the_timeout_must_be_a_positive_number(url: str) -> None:
    with (
        pytest.raises(ValueError, match="write_ahead_timeout"),
        FlowmemSaver.from_conn_string(url, write_ahead_timeout=0),
    ):
        pass


def test_the_config_keys_are_langgraphs() -> None:
    """The private keys the write-ahead reads (a LangGraph upgrade that renames them fails here)."""
    assert writeahead.CHECKPOINTER == _constants.CONFIG_KEY_CHECKPOINTER
    assert saver_module.DURABILITY == _constants.CONFIG_KEY_DURABILITY
    assert _constants.CONFIG_KEY_CHECKPOINT_MAP == "checkpoint_map"


def test_an_agent_inside_a_graph_waits_for_its_own_namespaces_checkpoints(
    saver: SlowSaver, url: str
) -> None:
    """A subgraph's tasks name their namespace's checkpoint in LangGraph's checkpoint map."""
    from langgraph.graph import END

    seen = Seen(url, "t-10")
    inner = create_agent(
        looking_model(seen), [looking_tool(seen)], middleware=[FlowmemHealing()]
    )
    outer = StateGraph(MessagesState)
    outer.add_node("agent", inner)
    outer.add_edge(START, "agent")
    outer.add_edge("agent", END)
    saver.write_ahead_timeout = 5
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = outer.compile(checkpointer=saver).invoke(
            {"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t-10"}}
        )
    assert out["messages"][-1].content == "18C and sunny in Lisbon."
    assert time.monotonic() - started < 4  # every wait found its checkpoint, none timed out
    assert len(seen.at_tool) == 1
