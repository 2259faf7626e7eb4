"""The prebuilt ReAct agent keeps the model's answer after ``heal_hook`` healed (issue 36, item 5).

The cause, reproduced here without a kill: the agent's state keeps the
``llm_input_messages`` a ``pre_model_hook`` returned, and its model node prefers them to
``messages``. A turn whose hook ran (the question, then the model's call) left them in
the thread; when the next turn's hook healed and returned only ``messages``, the model
was given the stale list of the turn before (the question alone) and asked for the
tool again, so the healed turn's answer never came. ``heal_hook`` now returns the
healed list as ``llm_input_messages`` too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.langgraph import FlowmemSaver, heal_hook
from flowmem.integrations.langgraph.healing import HEALED_ID_PREFIX
from tests.integrations.langgraph.strict_model import StrictScriptedModel

ASKED = "Weather in Lisbon?"
AGAIN = "Still there?"
ANSWER = "Yes, I'm here."
CALL_ID = "call_w1"

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return "18C and sunny"


def test_mem_3_the_react_agent_answers_and_keeps_its_answer_after_heal_hook_healed(
    tmp_path: Path,
) -> None:
    from langgraph.prebuilt import create_react_agent

    call = AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Lisbon"}, "id": CALL_ID}])
    model = StrictScriptedModel(replies=[call, AIMessage(ANSWER), AIMessage("asked twice")])
    config: Any = {"configurable": {"thread_id": "react-1", "user_id": "ana"}}
    with FlowmemSaver.from_conn_string(f"sqlite:///{tmp_path}/r.db") as saver:
        # the first turn stops where a kill inside the tool leaves it: the call unanswered
        paused = create_react_agent(
            model, [weather], checkpointer=saver, pre_model_hook=heal_hook, interrupt_before=["tools"]
        )
        paused.invoke({"messages": [HumanMessage(ASKED)]}, config)
        agent = create_react_agent(model, [weather], checkpointer=saver, pre_model_hook=heal_hook)
        done = agent.invoke({"messages": [HumanMessage(AGAIN)]}, config)
        stored = agent.get_state(config).values["messages"]

    healed_request = model.calls[1]
    assert [m.type for m in healed_request] == ["human", "ai", "tool", "human"]
    placeholder = healed_request[2]
    assert isinstance(placeholder, ToolMessage) and placeholder.content == HEALED_CONTENT
    assert placeholder.id == f"{HEALED_ID_PREFIX}{CALL_ID}"
    assert len(model.calls) == 2  # answered once, never asked for the tool again
    assert done["messages"][-1].content == ANSWER
    assert [(m.type, m.content) for m in stored][-2:] == [("human", AGAIN), ("ai", ANSWER)]
    assert [m.type for m in stored] == ["human", "ai", "tool", "human", "ai"]


def test_heal_hook_hands_the_model_the_messages_when_nothing_needs_healing() -> None:
    messages = [HumanMessage(ASKED, id="h1")]
    assert heal_hook({"messages": messages}) == {"llm_input_messages": messages}
