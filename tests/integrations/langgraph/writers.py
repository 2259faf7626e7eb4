"""Two processes writing one LangGraph thread at once (``test_two_writers``).

``writer`` is the target of a ``multiprocessing`` process: it opens its own
checkpointer on the shared database, and each round waits at the shared barrier, then
invokes the thread with its own user message. The graph's one node sleeps
(``NODE_SECONDS``) before it appends its answer, so the two runs of a round overlap:
both start from the same latest checkpoint, or one starts from the other's first one.
It reports ``(round, name, outcome, text)`` per round: outcome ``ok`` or the type name
of what the run raised.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

NODE_SECONDS = 0.3
BARRIER_SECONDS = 60.0


def human_id(name: str, round_: int) -> str:
    """The id of ``name``'s user message in round ``round_``."""
    return f"{name}-human-{round_}"


def answer_id(name: str, round_: int) -> str:
    """The id of the answer to ``name``'s user message in round ``round_``."""
    return f"{name}-answer-{round_}"


def build(saver: Any) -> Any:
    """A ``StateGraph`` of ``MessagesState`` whose one node answers the latest user message."""

    def answer(state: MessagesState) -> dict[str, Any]:
        time.sleep(NODE_SECONDS)  # both runs of a round are in flight now
        asked = state["messages"][-1]
        return {
            "messages": [
                AIMessage(
                    content=f"answer to {asked.content}",
                    id=str(asked.id).replace("-human-", "-answer-"),
                )
            ]
        }

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=saver)


def ask(graph: Any, config: Any, name: str, round_: int) -> Any:
    """Invoke the thread with ``name``'s user message of round ``round_``."""
    message = HumanMessage(content=f"{name} in round {round_}", id=human_id(name, round_))
    return graph.invoke({"messages": [message]}, config)


@contextmanager
def checkpointer(kind: str, url: str) -> Iterator[Any]:
    """``flowmem``: ``FlowmemSaver`` on ``url``; ``langgraph-sqlite``: LangGraph's ``SqliteSaver``."""
    if kind == "flowmem":
        from flowmem.integrations.langgraph.saver import FlowmemSaver

        with FlowmemSaver.from_conn_string(url) as saver:
            yield saver
    elif kind == "langgraph-sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(url) as saver:
            yield saver
    else:
        raise ValueError(f"unknown checkpointer {kind!r}")


def writer(
    kind: str, url: str, thread: str, name: str, rounds: int, barrier: Any, results: Any
) -> None:
    """Run ``rounds`` rounds of one writer; report each round's outcome on ``results``."""
    try:
        with checkpointer(kind, url) as saver:
            graph = build(saver)
            config = {"configurable": {"thread_id": thread}}
            for round_ in range(rounds):
                barrier.wait(BARRIER_SECONDS)
                try:
                    ask(graph, config, name, round_)
                except Exception as exc:  # reported to the test, which asserts on it
                    results.put((round_, name, type(exc).__name__, str(exc)))
                else:
                    results.put((round_, name, "ok", ""))
    except Exception as exc:  # a broken barrier or database: the test fails with this text
        results.put((-1, name, type(exc).__name__, repr(exc)))
        barrier.abort()
