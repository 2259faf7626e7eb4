"""Round trips of a LangGraph step on PostgreSQL, counted (decision 0126, issue 42 §4).

A round trip is a time the client blocked reading the server's answer (psycopg's
wait for a readable socket), on the store's one connection. A step of
``StateGraph(MessagesState)`` stores the task's pending writes (one round trip: the
inserts run only if the guard held) and a checkpoint with its one new line row (one,
on the facts the store remembers from its last write of the thread, checked by a
verdict), whatever the thread's length.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.postgres.pipeline import Pipeline  # noqa: E402
from tests.store.round_trips import count_round_trips  # noqa: E402

STEP_ROUND_TRIPS = 2  # docs/performance.md, "LangGraph"; PostgresSaver: 2 too
STEP_STATEMENTS = 4  # decision 0201 (12 before): PostgresSaver sends 4 too


class Counting:
    """Counts the waits of one connection that blocked on the server's answer."""

    def __init__(self) -> None:
        self.reads = 0

    def install(self, conn: Any) -> None:
        """Count on ``conn`` from now on."""
        count_round_trips(conn, self._one_more)

    def _one_more(self) -> None:
        self.reads += 1


@pytest.fixture
def counted(postgres_db_url: str) -> Iterator[tuple[FlowmemSaver, Counting]]:
    """A saver on a one-connection store whose round trips are counted."""
    store = PostgresStore(f"{postgres_db_url}&pool_min=1&pool_max=1")
    counter = Counting()
    with store._connection() as conn:
        counter.install(conn)
    try:
        yield FlowmemSaver(MemoryService(store)), counter
    finally:
        store.close()


def _graph(saver: FlowmemSaver, steps: dict[str, int]) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("a reply", id=f"ai-{len(state['messages'])}")]}

    def route(state: MessagesState) -> str:
        return "agent" if len(state["messages"]) < steps["until"] else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["agent", END])
    return builder.compile(checkpointer=saver)


def test_a_graph_step_on_postgresql_takes_two_round_trips_at_any_length(
    counted: tuple[FlowmemSaver, Counting],
) -> None:
    saver, counter = counted
    steps = {"until": 0}
    graph = _graph(saver, steps)
    config = {"configurable": {"thread_id": "t-round-trips"}, "recursion_limit": 200}
    per_invoke = []
    for turn, added in enumerate((5, 5, 25, 25)):
        steps["until"] += added + 1  # the user turn, then ``added`` agent steps
        counter.reads = 0
        graph.invoke({"messages": [HumanMessage("go on", id=f"h-{turn}")]}, config)
        per_invoke.append(counter.reads)
    # an invoke's own reads cost the same at 5 and at 25 steps: the difference is the steps'
    short, long = per_invoke[1], per_invoke[3]
    assert (long - short) / 20 <= STEP_ROUND_TRIPS, per_invoke
    # no more on a longer thread (a result read while the client was still sending is no
    # wait: a few either way)
    assert per_invoke[3] <= per_invoke[2] + 3, per_invoke


def test_a_graph_step_on_postgresql_sends_four_statements_at_any_length(
    counted: tuple[FlowmemSaver, Counting], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its pending writes one (under the guard), its checkpoint three: the guard and the lock,
    the verdict on remembered facts, the line's row, header, blobs and checkpoint row (decision 0201)."""
    saver, _ = counted
    sent = [0]
    original = Pipeline._send

    def send(self: Pipeline, name: str, params: Any) -> int:
        sent[0] += 1
        return original(self, name, params)

    monkeypatch.setattr(Pipeline, "_send", send)
    steps = {"until": 0}
    graph = _graph(saver, steps)
    config = {"configurable": {"thread_id": "t-statements"}, "recursion_limit": 200}
    per_invoke = []
    for turn, added in enumerate((5, 5, 25, 25)):
        steps["until"] += added + 1
        sent[0] = 0
        graph.invoke({"messages": [HumanMessage("go on", id=f"h-{turn}")]}, config)
        per_invoke.append(sent[0])
    short, long = per_invoke[1], per_invoke[3]
    assert (long - short) / 20 <= STEP_STATEMENTS, per_invoke
    assert per_invoke[3] <= per_invoke[2], per_invoke  # no more on a longer thread
