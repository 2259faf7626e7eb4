"""A LangGraph step's client work on PostgreSQL does not grow with the thread (issue 42 §4).

Counted, not timed: the Python function calls a step's ``put`` and ``put_writes`` make
(``sys.setprofile`` in the thread that runs them), at about 50 and at about 600
messages (their medians, within a few calls a pool's or a pipeline's wait makes or
not). Every step compares the stored prefix by identity in C (``LineHead.extended_by``)
and makes the same calls at any length; so does an invoke's first checkpoint, whose
list is the one its read returned: the remembered head answers for it, where it was
scanned whole (``is_message_list``: one generator step per message, decision 0177).
"""

from __future__ import annotations

import statistics
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402

SEGMENT = 10
SLACK = 10  # calls: timing's variation, against 550 for one call per message
FIRST_SLACK = 40  # an invoke's first puts, one each: no median to even out a wait (it was +537)


class CallCounts:
    """The Python calls each wrapped saver call made, per step (the invoke's first one apart)."""

    def __init__(self) -> None:
        self.puts: list[int] = []
        self.writes: list[int] = []
        self._lock = threading.Lock()

    def wrap(self, saver: FlowmemSaver) -> None:
        """Count ``put`` and ``put_writes`` of ``saver`` from now on."""
        saver.put = self._counted(saver.put, self.puts)  # type: ignore[method-assign]
        saver.put_writes = self._counted(saver.put_writes, self.writes)  # type: ignore[method-assign]

    def _counted(self, call: Callable[..., Any], into: list[int]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls = [0]

            def profile(frame: Any, event: str, arg: Any) -> None:
                if event == "call":
                    calls[0] += 1

            previous = sys.getprofile()
            sys.setprofile(profile)
            try:
                return call(*args, **kwargs)
            finally:
                sys.setprofile(previous)
                with self._lock:
                    into.append(calls[0])

        return counted

    def clear(self) -> None:
        """Forget what was counted."""
        with self._lock:
            self.puts.clear()
            self.writes.clear()


@pytest.fixture
def saver(postgres_db_url: str) -> Iterator[FlowmemSaver]:
    """A saver on a PostgreSQL store of its own."""
    store = PostgresStore(postgres_db_url)
    try:
        yield FlowmemSaver(MemoryService(store))
    finally:
        store.close()


def _graph(saver: FlowmemSaver, steps: dict[str, int]) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("a reply " * 20, id=f"ai-{len(state['messages'])}")]}

    def route(state: MessagesState) -> str:
        return "agent" if len(state["messages"]) < steps["until"] else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["agent", END])
    return builder.compile(checkpointer=saver)


def _segment(graph: Any, steps: dict[str, int], start: int, config: dict[str, Any]) -> None:
    steps["until"] = start + SEGMENT
    graph.invoke({"messages": [HumanMessage("go", id=f"human-{start}")]}, config)


def test_a_step_makes_the_same_python_calls_at_50_and_at_600_messages_on_postgresql(
    saver: FlowmemSaver,
) -> None:
    steps = {"until": 0}
    graph = _graph(saver, steps)
    config = {"configurable": {"thread_id": "t-flat"}, "recursion_limit": 100}
    counts = CallCounts()
    counts.wrap(saver)
    measured: dict[int, tuple[list[int], list[int]]] = {}
    firsts: dict[int, list[int]] = {}
    for start in range(0, 600 + SEGMENT, SEGMENT):
        counts.clear()
        _segment(graph, steps, start, config)
        if start in (50, 600):
            # the invoke's input checkpoint (step -1) and its first step's see the new
            # human message: compared apart, each with its own at the other length
            measured[start] = (sorted(counts.puts[2:]), sorted(counts.writes[1:]))
            firsts[start] = counts.puts[:2]
    short_puts, short_writes = measured[50]
    long_puts, long_writes = measured[600]
    assert len(long_puts) == len(short_puts) >= SEGMENT - 3
    # a few calls vary with timing (a pool's or a pipeline's wait); one call per message
    # of the thread would add 550
    assert statistics.median(long_puts) - statistics.median(short_puts) <= SLACK
    assert statistics.median(long_writes) - statistics.median(short_writes) <= SLACK
    # the input checkpoint's list is the one the invoke's read returned: not scanned again
    for short, long in zip(firsts[50], firsts[600], strict=True):
        assert long - short <= FIRST_SLACK, (firsts[50], firsts[600])
