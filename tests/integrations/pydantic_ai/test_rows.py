"""``unanswered_tail``: what a loaded conversation's last response leaves open, found by MEM-3's ``heal``."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage

from flowmem.integrations.pydantic_ai.rows import unanswered_tail
from tests.integrations.pydantic_ai.messages import answer, call, prompt, result


def _open(messages: list[ModelMessage], waiting: frozenset[str] = frozenset()) -> list[str]:
    found = unanswered_tail(messages, set(waiting))
    if found is None:
        return []
    response, calls = found
    assert response is [m for m in messages if m.kind == "response"][-1]
    return [c.tool_call_id for c in calls]


def test_mem_3_the_last_responses_unanswered_calls_in_declaration_order() -> None:
    assert _open([prompt("hi"), call("b", "a", "c"), result("a")]) == ["b", "c"]


def test_mem_3_a_call_id_an_earlier_run_answered_is_open_again_in_the_last_response() -> None:
    history = [prompt("hi"), call("k1"), result("k1"), answer("ok"), prompt("again", run="r2"), call("k1", run="r2")]
    assert _open(history) == ["k1"]


def test_mem_3_calls_a_paused_run_waits_on_stay_open_and_unhealed() -> None:
    assert _open([prompt("hi"), call("a", "b")], frozenset({"a"})) == ["b"]
    assert _open([prompt("hi"), call("a")], frozenset({"a"})) == []


def test_mem_3_nothing_is_open_after_an_answer_or_without_a_response() -> None:
    assert _open([prompt("hi"), call("a"), result("a"), answer("done")]) == []
    assert _open([prompt("hi")]) == []
    assert _open([]) == []
