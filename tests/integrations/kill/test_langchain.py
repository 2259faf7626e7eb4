"""The kill matrix of the docs' LangChain 0.x program (``programs/langchain.py``), and its control.

Every point of a turn, SIGKILLed, then a new process with a new user message, on SQLite
and PostgreSQL: the question is kept (written ahead by ``FlowmemRunnableWithMessageHistory``
before the model runs), the call is kept once the tool started (the loop stores the
model's turn before it runs the tool), every request is one a strict provider accepts
(MEM-3 heals the call the kill left open) and nothing is stored twice. The control runs
the same block on LangChain's own ``RunnableWithMessageHistory`` and
``FileChatMessageHistory``: a kill before the model answers loses the question, a
kill once the tool started leaves the call unanswered (a strict provider refuses the
next request), and a kill while it rewrites its file can leave it empty (the next
turn fails to read it: ``JSONDecodeError``; not asserted, it depends on the timing).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kill.harness import CONTROL, FLOWMEM, assert_rounds_pass, play
from tests.integrations.kill.points import (
    AFTER_TOOL_RESULT,
    BEFORE_MODEL_ANSWER,
    INSIDE_TOOL,
    POINTS,
    TOOL_START,
)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("point", POINTS)
def test_mem_3_the_docs_program_keeps_question_and_call_through_a_kill(
    point: str, flowmem_url: str, tmp_path: Path
) -> None:
    assert_rounds_pass(play("langchain", point, FLOWMEM, flowmem_url, tmp_path))


def test_control_langchains_own_store_loses_the_question_killed_before_the_answer(
    tmp_path: Path,
) -> None:
    (verdict,) = play("langchain", BEFORE_MODEL_ANSWER, CONTROL, str(tmp_path), tmp_path, rounds=1)
    assert verdict.killed and verdict.answered
    assert not verdict.question_kept


@pytest.mark.parametrize("point", [TOOL_START, INSIDE_TOOL, AFTER_TOOL_RESULT])
def test_control_keeps_the_call_unanswered_and_a_strict_provider_refuses_the_next_request(
    point: str, tmp_path: Path
) -> None:
    """The loop's first invoke stored the question and the call; the result waits for the
    second invoke's end, which never comes, and nothing heals the call."""
    (verdict,) = play("langchain", point, CONTROL, str(tmp_path), tmp_path, rounds=1)
    assert verdict.killed and verdict.question_kept and verdict.call_kept
    assert not verdict.accepted, verdict
