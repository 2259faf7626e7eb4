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

from tests.integrations.kill.harness import CONTROL, FLOWMEM, assert_rounds_pass, play
from tests.integrations.kill.points import AFTER_TOOL_RESULT, INSIDE_TOOL, POINTS, TOOL_START

PROGRAMS = ("langgraph_create_agent", "langgraph_tool_node", "langgraph_react")


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_mem_3_a_documented_langgraph_program_keeps_the_turn_through_a_kill(
    program: str, point: str, flowmem_url: str, tmp_path: Path
) -> None:
    assert_rounds_pass(play(program, point, FLOWMEM, flowmem_url, tmp_path))


@pytest.mark.parametrize("point", [TOOL_START, INSIDE_TOOL, AFTER_TOOL_RESULT])
@pytest.mark.parametrize("program", PROGRAMS)
def test_langgraph_alone_loses_or_breaks_the_turn_once_its_tool_started(
    program: str, point: str, tmp_path: Path
) -> None:
    """The control: the same block on ``SqliteSaver``, no flowmem, default durability.

    Where the tool had started, LangGraph alone never keeps the turn: killed as the
    tool starts the call is often not saved yet (the checkpoint is still being written);
    killed later the call is saved unanswered, and the next request is one a provider
    refuses (``create_agent``, the ``ToolNode`` graph) or the prebuilt ReAct agent
    refuses it itself (``INVALID_CHAT_HISTORY``). Earlier points lose the question
    in some rounds and not in others (docs/integrations.md's table).
    """
    (verdict,) = play(program, point, CONTROL, str(tmp_path), tmp_path, rounds=1)
    assert verdict.killed and not verdict.passed, verdict
    if point != TOOL_START:
        if program == "langgraph_react":
            assert "INVALID_CHAT_HISTORY" in verdict.problem, verdict
        else:
            assert verdict.question_kept and verdict.call_kept and not verdict.accepted, verdict
            assert "has no result right after its turn" in verdict.problem
