"""Kill-matrix program: LangGraph's prebuilt ReAct agent on ``FlowmemSaver`` with ``heal_hook``.

The docs' block as written: ``create_react_agent`` with ``pre_model_hook=heal_hook`` and a
``ToolNode`` waiting with ``write_ahead_tool``. The control is the same agent on
LangGraph's ``SqliteSaver``, without the hook and the wrappers.
"""

from __future__ import annotations

from typing import Any

import langgraph.checkpoint.sqlite
import langgraph.prebuilt  # noqa: F401

from tests.integrations.kill.points import Killer
from tests.integrations.kill.warm import warm
from tests.integrations.langgraph.kill_program import doc_block, run_turn

warm(  # what a turn would import on first use, once in the fork server
    (
        "langchain_core.messages.block_translators.langchain_v0",
        "langchain_core.tracers.context",
    )
)

CONTROL_STORE = "LangGraph `SqliteSaver`"
NEEDLES = ("create_react_agent(", "heal_hook")
CONTROL_SWAPS = {
    (
        "from flowmem.integrations.langgraph import FlowmemSaver, awrite_ahead_tool, "
        "heal_hook, write_ahead_tool\n"
    ): "from langgraph.checkpoint.sqlite import SqliteSaver\n",
    "FlowmemSaver.from_conn_string(": "SqliteSaver.from_conn_string(",
    ", pre_model_hook=heal_hook": "",
    ", wrap_tool_call=write_ahead_tool, awrap_tool_call=awrite_ahead_tool": "",
}


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the docs' prebuilt ReAct agent."""
    return run_turn(
        doc_block(*NEEDLES),
        store,
        place,
        thread,
        text,
        killer,
        "ana-3",
        "Weather in Lisbon?",
        CONTROL_SWAPS,
    )
