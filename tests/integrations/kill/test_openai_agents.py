"""The kill matrix of the Agents SDK's documented ``Runner`` program (issue 36).

Each point of ``points.POINTS``, on SQLite and on PostgreSQL: the program of
``docs/integrations.md`` (``Runner`` + ``FlowmemSession`` + ``FlowmemRunHooks``) is
SIGKILLed there, and a new process's turn must find the question, the call where the
tool had started, a history a strict provider accepts, and nothing stored twice. The
control runs the same program on the SDK's own ``SQLiteSession``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kill.harness import CONTROL, FLOWMEM, assert_rounds_pass, play
from tests.integrations.kill.points import INSIDE_TOOL, POINTS, TOOL_START

PROGRAM = "openai_agents"


@pytest.mark.parametrize("point", POINTS)
def test_mem_3_documented_runner_keeps_question_and_call_at_every_kill_point(
    point: str, flowmem_url: str, tmp_path: Path
) -> None:
    assert_rounds_pass(play(PROGRAM, point, FLOWMEM, flowmem_url, tmp_path))


@pytest.mark.parametrize("point", [TOOL_START, INSIDE_TOOL])
def test_control_sqlite_session_drops_the_call_of_a_tool_killed_while_running(
    point: str, tmp_path: Path
) -> None:
    """The SDK's own store, same program: it saves the step after the tool, so the call is lost.

    The question was saved before the model ran and survives; the next model input has
    no trace of the call (a strict provider accepts it: nothing is left to answer).
    """
    (verdict,) = play(PROGRAM, point, CONTROL, str(tmp_path), tmp_path, rounds=1)
    assert verdict.killed and verdict.question_kept and verdict.accepted and verdict.once
    assert not verdict.call_kept and not verdict.passed
