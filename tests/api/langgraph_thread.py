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



def _agent(store: Store) -> Any:
    """``create_agent`` with ``FlowmemSaver`` on ``store``, ``FlowmemHealing`` and a scripted model."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from flowmem.integrations.langgraph.healing import FlowmemHealing
    from tests.integrations.langgraph.strict_model import StrictScriptedModel

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    saver = FlowmemSaver(MemoryService(store))
    model = StrictScriptedModel(replies=[AIMessage("The call was cut off; ask again?", id="a2")])
    return create_agent(model, [weather], checkpointer=saver, middleware=[FlowmemHealing()])


def crash_thread(store: Store, thread_id: str, user_id: str) -> None:
    """A ``create_agent`` thread whose run stopped after a tool call: ``[user, assistant(call_w1)]``.

    Written as a crashed run leaves it (``update_state`` as the model node), on the
    thread's first line ``langgraph``.
    """
    config: Any = {"configurable": {"thread_id": thread_id, "user_id": user_id}}
    call = AIMessage(
        "", id="a1", tool_calls=[{"id": "call_w1", "name": "weather", "args": {"city": "Lisbon"}}]
    )
    messages = [HumanMessage("Weather in Lisbon?", id="h0"), call]
    _agent(store).update_state(config, {"messages": messages}, as_node="model")


def heal_thread(store: Store, thread_id: str, user_id: str, *, crashed: bool = False) -> None:
    """The crashed thread of ``crash_thread`` (made first unless ``crashed``), healed by the next user turn.

    The turn goes through ``FlowmemHealing`` (MEM-3), so the thread goes on, on a new
    line ``langgraph#<checkpoint id>``, as ``[user, assistant(call_w1), placeholder,
    user, assistant]``: 5 messages; the first line keeps ``[user, assistant(call_w1),
    user]`` (3 rows, a stale line: the checkpoints before the heal read it).
    """
    if not crashed:
        crash_thread(store, thread_id, user_id)
    config: Any = {"configurable": {"thread_id": thread_id, "user_id": user_id}}
    _agent(store).invoke({"messages": [HumanMessage("Still there?", id="h1")]}, config)
