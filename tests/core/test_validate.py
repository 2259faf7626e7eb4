"""``check_sendable``: every violation code, with its index."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import CODES, Violation, check_sendable

Row = dict[str, Any]


def asst(*ids: str, content: str = "") -> Row:
    return {"role": "assistant", "content": content, "tool_calls": [{"id": cid} for cid in ids]}


def tool(cid: Any) -> Row:
    return {"role": "tool", "content": "r", "tool_call_id": cid}


def user(content: str = "u") -> Row:
    return {"role": "user", "content": content}


def found(rows: list[Any]) -> list[tuple[int, str]]:
    return [(v.index, v.code) for v in check_sendable(rows)]


def test_sendable_history_has_no_violation() -> None:
    rows = [
        {"role": "system", "content": "s"},
        user(),
        asst("a", "b"),
        tool("b"),
        tool("a"),
        user(),
    ]
    assert check_sendable(rows) == []
    assert check_sendable([]) == []


def test_stored_rows_are_read_too() -> None:
    rows = [
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "a"}]}},
        {"role": "tool", "content": "r", "metadata": {"tool_call_id": "a", "healed": True}},
    ]
    assert check_sendable(rows) == []


def test_invalid_message() -> None:
    assert found([user(), "junk", {"role": "bot"}, {"content": "x"}]) == [
        (1, "invalid_message"),
        (2, "invalid_message"),
        (3, "invalid_message"),
    ]


def test_system_after_non_system() -> None:
    assert found([user(), {"role": "system", "content": "s"}]) == [(1, "system_after_non_system")]


def test_tool_leading() -> None:
    assert found([tool("a"), user()]) == [(0, "tool_leading")]


def test_orphan_result() -> None:
    assert found([user(), tool("a")]) == [(1, "orphan_result")]
    assert found([asst("a"), tool("a"), user(), tool("b")]) == [(3, "orphan_result")]
    assert found([asst("a"), tool(None)]) == [(0, "unanswered_call"), (1, "orphan_result")]


def test_result_outside_its_run_is_an_orphan_and_the_call_unanswered() -> None:
    assert found([asst("a"), user(), tool("a")]) == [(0, "unanswered_call"), (2, "orphan_result")]


def test_unanswered_call() -> None:
    assert found([asst("a", "b"), tool("a")]) == [(0, "unanswered_call")]
    assert found([asst("a")]) == [(0, "unanswered_call")]


def test_duplicate_call_id() -> None:
    assert found([asst("a"), tool("a"), asst("a", content="again")]) == [(2, "duplicate_call_id")]


def test_duplicate_result() -> None:
    assert found([asst("a"), tool("a"), tool("a")]) == [(2, "duplicate_result")]


def test_invalid_call_id() -> None:
    rows = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "0"}, {"name": "x"}, "junk"]}
    ]
    assert found(rows) == [(0, "invalid_call_id")] * 3


def test_every_code_is_documented_and_reachable() -> None:
    reached = {
        v.code
        for rows in (
            [tool("a"), "junk", user(), {"role": "system", "content": "s"}],
            [asst("a", "a", "0"), tool("a"), tool("a"), tool("z")],
            [asst("b")],
        )
        for v in check_sendable(rows)
    }
    assert reached == set(CODES)


def test_violation_carries_a_sentence() -> None:
    (violation,) = check_sendable([asst("a")])
    assert violation == Violation(0, "unanswered_call", f"{CODES['unanswered_call']} (id 'a')")
    assert violation.to_dict() == {
        "index": 0,
        "code": "unanswered_call",
        "message": violation.message,
    }


@pytest.mark.parametrize("value", [None, "x", {"role": "user"}], ids=repr)
def test_non_list_is_checked_as_empty(value: Any) -> None:
    assert check_sendable(value) == []


def test_a_violation_made_without_init_is_the_same_frozen_object() -> None:
    import dataclasses

    from flowmem.core.validate import _violation

    made = _violation(3, "orphan_result", "id 'a'")
    plain = Violation(3, "orphan_result", f"{CODES['orphan_result']} (id 'a')")
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert made.to_dict() == plain.to_dict()
    assert _violation(0, "tool_leading") == Violation(0, "tool_leading", CODES["tool_leading"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.index = 4  # type: ignore[misc]


def test_a_system_row_anywhere_is_fine_when_systems_need_not_lead() -> None:
    rows = [user(), {"role": "system", "content": "s"}, asst("a"), tool("a"), {"role": "system", "content": "t"}]
    assert found(rows) == [(1, "system_after_non_system"), (4, "system_after_non_system")]
    assert check_sendable(rows, systems_first=False) == []
    # every other rule still holds
    assert [(v.index, v.code) for v in check_sendable([asst("a"), {"role": "system", "content": "s"}, tool("a")], systems_first=False)] == [
        (0, "unanswered_call"),
        (2, "orphan_result"),
    ]


def test_a_violation_about_one_call_names_its_position_in_the_turn() -> None:
    violations = check_sendable([asst("a", "b", "a", "0"), tool("a")])
    assert [(v.code, v.call) for v in violations] == [
        ("duplicate_call_id", 2),
        ("invalid_call_id", 3),
        ("unanswered_call", 1),
    ]
    assert [v.call for v in check_sendable([user(), tool("z")])] == [None]
    # not part of the violation's identity nor of its dict
    assert violations[0] == Violation(0, "duplicate_call_id", violations[0].message)
    assert "call" not in violations[0].to_dict()
