"""The kill matrix for Google ADK's ``Runner`` (issue 36): the doc's program SIGKILLed at each point.

Write-ahead is ADK's own: its runner stores each event it yields before the agent goes
on (``InvocationContext._enqueue_event`` waits for the append), so the model's call is
stored before the tool starts, with flowmem's service as with ADK's. What differs is
the next turn: on flowmem (SQLite and PostgreSQL) the user message heals the call the
kill left unanswered (MEM-3) and the model's request holds the call and its placeholder
answer; on ADK's ``DatabaseSessionService`` (the control) the call is stored too, but
ADK drops it from the next request without a word, so the model never learns it asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("google.adk")

from tests.integrations.kill.harness import (
    CONTROL,
    FLOWMEM,
    assert_rounds_pass,
    judge,
    play,
    run_child,
)
from tests.integrations.kill.points import (
    FINAL_ANSWER,
    INSIDE_TOOL,
    POINTS,
    TOOL_START,
)
from tests.integrations.kill.script import AGAIN, CALL_ID, QUESTION, Said

pytestmark = pytest.mark.slow

PROGRAM = "adk"


@pytest.mark.parametrize("point", POINTS)
def test_mem_3_adk_runner_killed_at_each_point_keeps_the_question_and_the_call(
    point: str, flowmem_url: str, tmp_path: Path
) -> None:
    assert_rounds_pass(play(PROGRAM, point, FLOWMEM, flowmem_url, tmp_path))


@pytest.mark.parametrize(
    ("point", "call_sent"),
    [(TOOL_START, False), (INSIDE_TOOL, False), (FINAL_ANSWER, True)],
)
def test_adk_database_session_service_stores_the_call_but_drops_it_from_the_next_request(
    point: str, call_sent: bool, tmp_path: Path
) -> None:
    """The control: ADK's own store keeps the question and the call (its runner writes
    ahead too), but a call the kill left unanswered is not in the next request."""
    place = str(tmp_path)
    thread = f"control-{point}"
    first = run_child(PROGRAM, CONTROL, place, thread, QUESTION, point, 0, tmp_path)
    second = run_child(PROGRAM, CONTROL, place, thread, AGAIN, None, 0, tmp_path)
    verdict = judge(PROGRAM, point, CONTROL, first, second)
    assert second.report is not None, second.error
    stored = [Said.from_json(m) for m in second.report["stored"]]
    assert verdict.killed and verdict.question_kept and verdict.answered and verdict.once, verdict
    assert any(CALL_ID in m.calls for m in stored), stored
    assert verdict.call_kept is call_sent, verdict
    assert verdict.accepted, verdict
