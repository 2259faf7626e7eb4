"""The kill matrix's harness: its points kill where they say, its judge sees what was lost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.integrations.kill import points
from tests.integrations.kill.harness import FLOWMEM, assert_rounds_pass, play
from tests.integrations.kill.points import AFTER_TOOL_RESULT, INSIDE_TOOL, POINTS, TOOL_START
from tests.integrations.kill.script import CALL_ID, QUESTION, Said, refusal

TOY = "tests.integrations.kill.toy_program"


def test_a_strict_provider_accepts_a_call_answered_right_after_its_turn() -> None:
    history = [
        Said("user", QUESTION),
        Said("assistant", calls=(CALL_ID,)),
        Said("tool", "x", answers=CALL_ID),
    ]
    assert refusal(history) is None


@pytest.mark.parametrize(
    "history",
    [
        [Said("user", QUESTION), Said("assistant", calls=(CALL_ID,)), Said("user", "next")],
        [Said("user", QUESTION), Said("tool", "x", answers=CALL_ID)],
        [Said("assistant", calls=(CALL_ID,)), Said("tool", "x", answers="other")],
        [
            Said("assistant", calls=(CALL_ID,)),
            Said("tool", "x", answers=CALL_ID),
            Said("assistant", calls=(CALL_ID,)),
        ],
    ],
    ids=["unanswered", "orphan", "wrong-id", "declared-twice"],
)
def test_a_strict_provider_refuses_a_broken_history(history: list[Said]) -> None:
    assert refusal(history) is not None


@pytest.mark.parametrize("point", POINTS)
def test_a_program_that_writes_ahead_passes_every_point(point: str, tmp_path: Path) -> None:
    assert_rounds_pass(
        play(TOY, point, FLOWMEM, f"sqlite:///{tmp_path}/toy.db", tmp_path, rounds=1)
    )


@pytest.mark.parametrize("point", [TOOL_START, INSIDE_TOOL, AFTER_TOOL_RESULT])
def test_a_program_that_saves_at_the_end_of_its_turn_loses_the_question(
    point: str, tmp_path: Path
) -> None:
    (tmp_path / "late").mkdir()
    (verdict,) = play(TOY, point, FLOWMEM, f"sqlite:///{tmp_path}/late/toy.db", tmp_path, rounds=1)
    assert verdict.killed and not verdict.question_kept and not verdict.passed


def test_a_round_whose_second_turn_fails_is_judged_failed_after_a_passing_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "broken").mkdir()
    play(TOY, TOOL_START, FLOWMEM, f"sqlite:///{tmp_path}/toy.db", tmp_path, rounds=1)
    (verdict,) = play(
        TOY, TOOL_START, FLOWMEM, f"sqlite:///{tmp_path}/broken/toy.db", tmp_path, rounds=1
    )
    assert not verdict.passed and "the second turn failed" in verdict.problem


def test_a_kill_inside_the_tool_lands_by_the_tools_end_when_its_timer_is_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ``inside_tool`` timer fires 20-100 ms into the work, or the tool's end kills."""
    deaths: list[bool] = []  # True: in the turn's own thread
    monkeypatch.setattr(
        points, "die", lambda: deaths.append(threading.current_thread() is threading.main_thread())
    )
    killer = points.Killer(INSIDE_TOOL)
    killer.tool_start()
    assert killer._timer is not None
    killer._timer.cancel()  # as late as a loaded machine makes it
    killer.tool_end()
    assert deaths == [True]
