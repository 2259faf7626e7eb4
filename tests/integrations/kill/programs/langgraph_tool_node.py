"""Kill-matrix program: a LangGraph ``StateGraph`` with a ``ToolNode`` on ``FlowmemSaver``.

The docs' block as written: the model node waits with ``write_ahead`` and heals with
``heal_messages``, the ``ToolNode`` waits with ``write_ahead_tool``. The control is the
same graph on LangGraph's ``SqliteSaver``, without flowmem's calls.
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
NEEDLES = ("ToolNode(", "tools_condition", "write_ahead(config)")
CONTROL_SWAPS = {
    (
        "from flowmem.integrations.langgraph import FlowmemSaver, awrite_ahead_tool, "
        "heal_messages, write_ahead, write_ahead_tool\n"
    ): "from langgraph.checkpoint.sqlite import SqliteSaver\n",
    "FlowmemSaver.from_conn_string(": "SqliteSaver.from_conn_string(",
    "    write_ahead(config)  # the question is stored before the model is asked\n": "",
    'heal_messages(state["messages"]) or state["messages"]': 'state["messages"]',
    ", wrap_tool_call=write_ahead_tool, awrap_tool_call=awrite_ahead_tool": "",
}


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the docs' ``StateGraph`` + ``ToolNode`` program."""
    return run_turn(
        doc_block(*NEEDLES),
        store,
        place,
        thread,
        text,
        killer,
        "ana-2",
        "Weather in Lisbon?",
        CONTROL_SWAPS,
    )
