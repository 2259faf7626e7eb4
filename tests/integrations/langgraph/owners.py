"""Two users of one database for the LangGraph access tests: alice's thread holds ``SECRET``.

Shared by ``test_read_access`` (reads, decision 0107) and ``test_thread_ops``
(delete, copy, prune, decision 0109); the ``saver`` fixture is in ``conftest.py``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.scope import ExecutionContext

SECRET = "ALICE-SECRET"


def graph(saver: FlowmemSaver) -> Any:
    """One node that answers every turn with one AIMessage."""

    def answer(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"answer {n}", id=f"ai-{n}")]}

    built = StateGraph(MessagesState)
    built.add_node("answer", answer)
    built.add_edge(START, "answer")
    built.add_edge("answer", END)
    return built.compile(checkpointer=saver)


def config(thread: str, **extra: Any) -> dict[str, Any]:
    """A LangGraph config of ``thread`` with more configurable keys."""
    return {"configurable": {"thread_id": thread, **extra}}


def alices(saver: FlowmemSaver, thread: str = "alices") -> None:
    """One turn of alice's on ``thread``: her session, holding ``SECRET``."""
    graph(saver).invoke({"messages": [HumanMessage(SECRET, id="h")]}, config(thread, user_id="alice"))


def contents(tuples: Any) -> list[str]:
    """The message texts of checkpoint tuples."""
    return [
        str(m.content)
        for t in tuples
        for m in t.checkpoint["channel_values"].get("messages", [])
    ]


def as_user(saver: FlowmemSaver, user: str | None) -> FlowmemSaver:
    """A saver on the same database whose context user is ``user`` (None: no user)."""
    return FlowmemSaver(saver.memory, context=None if user is None else ExecutionContext(user_id=user))
