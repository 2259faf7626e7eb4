"""Kill-matrix program: LangGraph ``create_agent`` with ``FlowmemSaver`` and ``FlowmemHealing``.

The docs' first LangGraph block, as written (LangGraph's default durability); the
control is the same block on LangGraph's ``SqliteSaver`` and an ``InMemoryStore``,
without ``FlowmemHealing`` (``tests.integrations.langgraph.kill_program``).
"""

from __future__ import annotations

from typing import Any

import langchain.agents  # noqa: F401  (the fork server preloads the framework)
import langgraph.checkpoint.sqlite  # noqa: F401

from tests.integrations.kill.points import Killer
from tests.integrations.kill.warm import warm
from tests.integrations.langgraph.kill_program import doc_block, run_turn

warm(  # what a turn would import on first use, once in the fork server
    (
        "langchain_core.messages.block_translators.langchain_v0",
        "langchain_core.tracers.context",
        "flowmem.store.listing.sqlite",  # FlowmemStore on SQLite
        "flowmem.store.listing.postgres",  # and on PostgreSQL
        "langgraph.store.memory",  # the control's InMemoryStore
    )
)

CONTROL_STORE = "LangGraph `SqliteSaver`"
NEEDLES = ("create_agent(", "FlowmemHealing()", "weather")
CONTROL_SWAPS = {
    "from flowmem.integrations.langgraph import FlowmemHealing, FlowmemSaver, FlowmemStore\n": (
        "from contextlib import nullcontext\n"
        "from langgraph.checkpoint.sqlite import SqliteSaver\n"
        "from langgraph.store.memory import InMemoryStore\n"
    ),
    "FlowmemSaver.from_conn_string(": "SqliteSaver.from_conn_string(",
    'FlowmemStore.from_conn_string("sqlite:///app.db")': "nullcontext(InMemoryStore())",
    "middleware=[FlowmemHealing()]": "middleware=[]",
}


def turn(store: str, place: str, thread: str, text: str, killer: Killer) -> dict[str, Any]:
    """One turn of the docs' ``create_agent`` program."""
    return run_turn(
        doc_block(*NEEDLES),
        store,
        place,
        thread,
        text,
        killer,
        "ana-1",
        "Hi, I'm Ana",
        CONTROL_SWAPS,
    )
