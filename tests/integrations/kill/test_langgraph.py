"""The kill matrix for LangGraph (issue 36): three documented programs, every point, both backends.

``create_agent`` with ``FlowmemHealing``, a ``StateGraph`` with a ``ToolNode`` and the
prebuilt ReAct agent with ``heal_hook``, each the block docs/integrations.md shows, run
with LangGraph's default durability (``"async"``) on ``FlowmemSaver``: SIGKILLed at
each point of a turn, then a new process's turn keeps the question, the call (healed
by MEM-3 where the tool had started), a history a strict provider accepts, and stores
nothing twice (decision 0097).

The control runs each block on LangGraph's own ``SqliteSaver`` without flowmem, once per
point: what LangGraph alone keeps, asserted as observed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kill.harness import FLOWMEM, assert_rounds_pass, play
from tests.integrations.kill.points import (
    POINTS,
)

PROGRAMS = ("langgraph_create_agent", "langgraph_tool_node", "langgraph_react")


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_mem_3_a_documented_langgraph_program_keeps_the_turn_through_a_kill(
    program: str, point: str, flowmem_url: str, tmp_path: Path
) -> None:
    assert_rounds_pass(play(program, point, FLOWMEM, flowmem_url, tmp_path))
