"""Message lines' speed seams equal their plain forms (issue 42 §4, decision 0155).

``message_lists`` does not scan again the channels a ``put`` just stored as lines, and
``LineHead.extended_by`` compares identities without copying a slice of the list: both
must answer exactly what the plain code answers.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict, cast

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from flowmem.integrations.langgraph import saver as saver_module
from flowmem.integrations.langgraph.lines import LineHead, is_message_list, message_lists
from flowmem.integrations.langgraph.saver import FlowmemSaver


def _plain(values: Mapping[str, Any]) -> list[Any]:
    return [v for v in values.values() if is_message_list(v)]


class State(TypedDict):
    """Two message channels (one written every other step), a list of strings, a counter."""

    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[AnyMessage], add_messages]
    tags: Annotated[list[str], operator.add]
    n: int


def _agent(state: State) -> dict[str, Any]:
    n = state.get("n", 0) + 1
    out: dict[str, Any] = {"n": n, "tags": [f"t{n}"]}
    if n % 3 == 1:
        out["messages"] = [
            AIMessage("", id=f"ai-{n}", tool_calls=[{"name": "f", "args": {}, "id": f"c{n}"}])
        ]
    elif n % 3 == 2:
        out["messages"] = [ToolMessage("done", tool_call_id=f"c{n - 1}", id=f"tool-{n}")]
    else:
        out["messages"] = [AIMessage(f"answer {n}", id=f"ai-{n}")]
    if n % 2 == 0:
        out["notes"] = [HumanMessage(f"note {n}", id=f"note-{n}")]
    return out


def _route(state: State) -> str:
    return "agent" if state["n"] % 7 else END


@pytest.mark.filterwarnings(
    "ignore:FlowmemSaver.*without waiting:RuntimeWarning"
)  # async durability
def test_message_lists_is_the_plain_scan_on_every_put_of_a_graph(
    saver: FlowmemSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each put's message lists (the open calls' input) are the plain scan's, object by object."""
    compared: list[int] = []

    def checked(values: Mapping[str, Any], lines: Any) -> list[Any]:
        got = message_lists(values, lines)
        plain = _plain(values)
        assert len(got) == len(plain) and all(map(operator.is_, got, plain))
        compared.append(len(lines))
        return got

    monkeypatch.setattr(saver_module, "message_lists", checked)
    builder = StateGraph(State)
    builder.add_node("agent", _agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["agent", END])
    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": "lines-seam"}}
    for turn in range(3):
        start = cast(State, {"messages": [HumanMessage(f"q{turn}", id=f"q-{turn}")], "n": 0})
        graph.invoke(start, config)
    graph.update_state(config, {"tags": ["edited"]})  # a put whose message lists were not written
    assert len(compared) > 20 and 0 in compared and 2 in compared


def test_message_lists_counts_a_line_channel_without_scanning_it() -> None:
    """A channel named in ``lines`` is not scanned (its put proved it); the others are."""
    msgs = [HumanMessage("a", id="a")]
    values = {
        "messages": msgs,
        "tags": ["x"],
        "empty": [],
        "n": 3,
        "other": [AIMessage("b", id="b")],
    }
    assert message_lists(values, {"messages"}) == _plain(values) == [msgs, values["other"]]
    assert message_lists(values, ()) == _plain(values)


def _extended_by_plain(head: LineHead, messages: list[Any]) -> bool:
    if len(messages) < head.count:
        return False
    return all(map(operator.is_, messages[: head.count], head.messages))


def test_line_head_extended_by_answers_as_the_sliced_comparison() -> None:
    """Identity of the stored prefix, checked without a slice: the same answer in every case."""
    base: list[BaseMessage] = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(5)]
    head = LineHead("k", 5, tuple(base))
    cases: list[list[BaseMessage]] = [
        base,
        [*base, AIMessage("new", id="new")],
        base[:4],
        [],
        [*base[:2], HumanMessage("m2", id="m2"), *base[3:]],  # equal, not the same object
        [base[1], base[0], *base[2:]],
        list(reversed(base)),
    ]
    for messages in cases:
        assert head.extended_by(messages) == _extended_by_plain(head, messages)
    assert head.extended_by(cases[1]) and not head.extended_by(cases[4])
