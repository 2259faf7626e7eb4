"""The kill matrix for pydantic-ai: the docs' ``Agent`` with ``FlowmemConversationStore``, SIGKILLed at each point.

Every point passes on SQLite and PostgreSQL (harness.ROUNDS rounds each). The control,
the same agent saving its history as JSON after ``agent.run`` (pydantic-ai has no
persistent store of its own), loses the question wherever the kill lands before the
run ends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kill.harness import CONTROL, FLOWMEM, assert_rounds_pass, play
from tests.integrations.kill.points import FINAL_ANSWER, POINTS

pytest.importorskip("pydantic_ai.conversation_store")

PROGRAM = "pydantic_ai"


@pytest.mark.parametrize("point", POINTS)
def test_mem_3_the_docs_agent_keeps_the_question_and_the_call_at_every_kill_point(
    point: str, flowmem_url: str, tmp_path: Path
) -> None:
    assert_rounds_pass(play(PROGRAM, point, FLOWMEM, flowmem_url, tmp_path))


@pytest.mark.parametrize("point", [p for p in POINTS if p != FINAL_ANSWER])
def test_the_control_saving_after_the_run_loses_the_question(point: str, tmp_path: Path) -> None:
    (verdict,) = play(PROGRAM, point, CONTROL, str(tmp_path), tmp_path, rounds=1)
    assert verdict.killed and verdict.answered and verdict.accepted
    assert not verdict.question_kept and not verdict.call_kept
