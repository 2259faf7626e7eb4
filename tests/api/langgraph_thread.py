"""A LangGraph thread written through ``FlowmemSaver``, for the tests that read its checkpoints."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.service import MemoryService
from flowmem.store import Store


def write_thread(store: Store, thread_id: str, user_id: str, turns: list[str]) -> None:
    """Run an echo graph once per turn on ``thread_id`` (owned by ``user_id``): "answer N" each."""

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    compiled = graph.compile(checkpointer=FlowmemSaver(MemoryService(store)))
    config: Any = {"configurable": {"thread_id": thread_id, "user_id": user_id}}
    for turn in turns:
        compiled.invoke({"messages": [HumanMessage(turn)]}, config)
