"""Tool-pairing repair and normalization (MEM-5), with DESIGN.md §2b drop counts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable, normalize, repair_tool_pairing

Row = dict[str, Any]


def asst(*ids: Any, content: str = "", spelling: str = "id") -> Row:
    row: Row = {"role": "assistant", "content": content}
    if ids:
        row["tool_calls"] = [{spelling: cid, "type": "function"} for cid in ids]
    return row


def tool(cid: Any, content: str = "r") -> Row:
    return {"role": "tool", "content": content, "tool_call_id": cid}


def user(content: str = "u") -> Row:
    return {"role": "user", "content": content}


def system(content: str = "s") -> Row:
    return {"role": "system", "content": content}


def synthetic(cid: str) -> Row:
    return {"role": "tool", "content": HEALED_CONTENT, "tool_call_id": cid}


# --- step 1: coercion ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry", [None, "text", 3, ["role", "user"], {"content": "no role"}, {"role": "bot"}], ids=repr
)
def test_mem_5_step_1_unreadable_entries_are_dropped_and_counted(entry: Any) -> None:
    result = normalize([user("a"), entry, user("b")])
    assert result.messages == [user("a"), user("b")]
    assert result.dropped == 1


def test_mem_5_step_1_content_is_serialized_not_blanked() -> None:
    result = normalize(
        [{"role": "user", "content": {"text": "hi"}}, {"role": "user", "content": 7}]
    )
    assert result.messages == [user('{"text": "hi"}'), user("7")]
    assert result.dropped == 0


def test_mem_5_step_1_unserializable_content_becomes_empty() -> None:
    result = normalize([{"role": "user", "content": object()}])
    assert result.messages == [user("")]


def test_mem_5_step_1_stored_rows_become_flat_rows() -> None:
    stored = [
        {
            "role": "assistant",
            "content": "",
            "metadata": {"tool_calls": [{"tool_call_id": "a"}]},
            "timestamp": 1,
        },
        {
            "role": "tool",
            "content": "r",
            "metadata": {"tool_call_id": "a", "healed": True},
            "timestamp": 2,
        },
    ]
    result = normalize(stored)
    assert result.messages == [
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "a"}]},
        tool("a"),
    ]
    assert result.dropped == 0


def test_mem_5_step_1_non_list_input_is_empty() -> None:
    assert normalize("nope") == ([], 0)
    assert normalize(None) == ([], 0)
    assert normalize({"role": "user"}) == ([], 0)


# --- step 2: systems to the front ------------------------------------------------------------


def test_mem_5_step_2_systems_move_first_keeping_both_orders() -> None:
    rows = [user("1"), system("a"), asst(content="2"), system("b"), user("3")]
    result = normalize(rows)
    assert result.messages == [system("a"), system("b"), user("1"), asst(content="2"), user("3")]
    assert result.dropped == 0


def test_mem_5_step_2_system_between_call_and_result_is_never_dropped() -> None:
    rows = [asst("a"), system("x"), tool("a")]
    result = normalize(rows)
    assert result.messages == [system("x"), asst("a"), tool("a")]
    assert result.dropped == 0


def test_mem_5_step_2_empty_system_is_kept() -> None:
    assert normalize([system("")]).messages == [system("")]


# --- step 3: pairing repair ---------------------------------------------------------------------


def test_mem_5_step_3_unanswered_call_gets_adjacent_synthetic_result() -> None:
    rows = [asst("a", "b"), tool("b"), user()]
    result = normalize(rows)
    assert result.messages == [asst("a", "b"), tool("b"), synthetic("a"), user()]
    assert result.dropped == 0


def test_mem_5_step_3_orphan_result_is_dropped() -> None:
    result = normalize([user(), tool("nobody"), asst(content="ok")])
    assert result.messages == [user(), asst(content="ok")]
    assert result.dropped == 1


def test_mem_5_step_3_result_before_its_declaration_is_an_orphan() -> None:
    result = normalize([user(), tool("a"), asst("a")])
    assert result.messages == [user(), asst("a"), synthetic("a")]
    assert result.dropped == 1


def test_mem_5_step_3_duplicate_result_is_dropped() -> None:
    result = normalize([asst("a"), tool("a", "1"), tool("a", "2")])
    assert result.messages == [asst("a"), tool("a", "1")]
    assert result.dropped == 1


def test_mem_5_step_3_late_result_is_moved_not_dropped() -> None:
    result = normalize([asst("a"), user("while waiting"), tool("a", "late")])
    assert result.messages == [asst("a"), tool("a", "late"), user("while waiting")]
    assert result.dropped == 0


def test_mem_5_step_3_late_and_in_run_results_keep_call_order_rules() -> None:
    rows = [asst("a", "b", "c"), tool("c", "C"), user(), tool("a", "A")]
    result = normalize(rows)
    # results already in the run stay first, in place; the rest follow in declaration order
    assert result.messages == [
        asst("a", "b", "c"),
        tool("c", "C"),
        tool("a", "A"),
        synthetic("b"),
        user(),
    ]
    assert result.dropped == 0


def test_mem_5_step_3_duplicate_declaration_dropped_from_the_later_turn() -> None:
    rows = [asst("a"), tool("a"), asst("a", "b", content="again"), tool("b")]
    result = normalize(rows)
    assert result.messages == [
        asst("a"),
        tool("a"),
        {"role": "assistant", "content": "again", "tool_calls": [{"id": "b", "type": "function"}]},
        tool("b"),
    ]
    assert result.dropped == 1


def test_mem_5_step_3_duplicate_declaration_within_one_turn() -> None:
    result = normalize([asst("a", "a"), tool("a")])
    assert result.messages == [asst("a"), tool("a")]
    assert result.dropped == 1


def test_mem_5_step_3_turn_left_with_no_call_and_no_content_is_dropped() -> None:
    rows = [asst("a"), tool("a"), asst("a"), tool("a", "retry result"), user()]
    result = normalize(rows)
    # the retry's only call is removed (1), the empty turn is dropped (1), its result is a duplicate (1)
    assert result.messages == [asst("a"), tool("a"), user()]
    assert result.dropped == 3


def test_mem_5_step_3_turn_left_with_content_is_kept_without_tool_calls() -> None:
    result = normalize([asst("a"), tool("a"), asst("a", content="retrying")])
    assert result.messages[-1] == {"role": "assistant", "content": "retrying"}
    assert result.dropped == 1


def test_mem_5_step_3_unusable_call_ids_are_removed_and_counted() -> None:
    rows = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "0"}, {"id": None}, "junk", {"id": "ok"}],
        },
        tool("ok"),
    ]
    result = normalize(rows)
    assert result.messages == [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "ok"}]},
        tool("ok"),
    ]
    assert result.dropped == 3


def test_mem_5_step_3_result_without_usable_id_is_dropped() -> None:
    result = normalize(
        [asst("a"), tool("a"), tool(""), tool(None), {"role": "tool", "content": "x"}]
    )
    assert result.messages == [asst("a"), tool("a")]
    assert result.dropped == 3


def test_mem_5_step_3_result_ids_are_canonical() -> None:
    result = normalize([asst(" a ", 7), tool("a"), tool(7)])
    assert result.messages[1:] == [tool("a"), tool("7")]
    assert check_sendable(result.messages) == []


def test_mem_5_step_3_both_spellings_pair() -> None:
    rows = [asst("a", spelling="tool_call_id"), tool("a"), asst("b", spelling="id"), tool("b")]
    assert normalize(rows).dropped == 0
    assert check_sendable(normalize(rows).messages) == []


def test_mem_5_step_3_empty_assistant_without_calls_is_dropped() -> None:
    result = normalize([user(), {"role": "assistant", "content": ""}, user("2")])
    assert result.messages == [user(), user("2")]
    assert result.dropped == 1


# --- step 4: leading tool rows ---------------------------------------------------------------


def test_mem_5_step_4_leading_tool_rows_never_survive() -> None:
    result = normalize([tool("a"), tool("b"), user(), asst("a"), tool("a")])
    assert result.messages == [user(), asst("a"), tool("a")]
    assert result.dropped == 2


def test_mem_5_step_4_system_then_tool_is_fixed() -> None:
    result = normalize([tool("a"), system()])
    assert result.messages == [system()]
    assert result.dropped == 1


# --- the whole procedure ----------------------------------------------------------------------


def test_mem_5_all_four_steps_in_order() -> None:
    rows: list[Any] = [
        tool("zz", "stray"),  # orphan, leads: dropped (1)
        "garbage",  # step 1 (1)
        asst("a", "b"),
        system("rules"),  # step 2 moves it first
        tool("b", "B"),
        user("hmm"),
        tool("a", "A late"),  # moved into a's run
        asst("a", content="retry"),  # duplicate declaration removed (1)
        tool("a", "A again"),  # duplicate result (1)
    ]
    result = normalize(rows)
    assert result.messages == [
        system("rules"),
        asst("a", "b"),
        tool("b", "B"),
        tool("a", "A late"),
        user("hmm"),
        {"role": "assistant", "content": "retry"},
    ]
    assert result.dropped == 4
    assert check_sendable(result.messages) == []


def test_mem_5_normalize_is_idempotent() -> None:
    rows = [tool("x"), asst("a", "a", "b"), user(), tool("a"), system(), asst("b")]
    once = normalize(rows)
    twice = normalize(once.messages)
    assert twice.messages == once.messages
    assert twice.dropped == 0


def test_mem_5_inputs_are_not_mutated() -> None:
    rows = [
        asst("a", "a"),
        user(),
        tool("a", "late"),
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"id": "b"}]}},
    ]
    before = copy.deepcopy(rows)
    normalize(rows)
    repair_tool_pairing(rows)
    assert rows == before


def test_mem_5_output_rows_and_lists_are_new() -> None:
    rows = [asst("a"), tool("a"), user()]
    out = normalize(rows).messages
    assert all(o is not r for o in out for r in rows)
    out[0]["tool_calls"].append({"id": "b"})
    out[0]["content"] = "changed"
    assert rows[0] == asst("a")
    # a tool call entry passes through as given (nothing in the core changes it)
    assert out[0]["tool_calls"][0] == rows[0]["tool_calls"][0]


# --- repair on its own -------------------------------------------------------------------------


def test_mem_5_repair_reports_its_own_drops() -> None:
    result = repair_tool_pairing([asst("a"), tool("a"), tool("a"), tool("q"), asst("a")])
    assert result.messages == [asst("a"), tool("a")]
    assert result.dropped == 4  # duplicate result, orphan, duplicate declaration, empty turn


def test_mem_5_repair_is_idempotent() -> None:
    once = repair_tool_pairing([asst("a", "b"), user(), tool("b"), tool("b")])
    again = repair_tool_pairing(once.messages)
    assert again.messages == once.messages
    assert again.dropped == 0


def test_mem_5_repair_drops_entries_that_are_not_messages() -> None:
    result = repair_tool_pairing([user(), "junk", {"role": "robot"}])  # type: ignore[list-item]
    assert result.messages == [user()]
    assert result.dropped == 2


def test_mem_5_repair_ignores_tool_calls_that_are_not_a_list() -> None:
    result = repair_tool_pairing([{"role": "assistant", "content": "x", "tool_calls": "abc"}])
    assert result.messages == [{"role": "assistant", "content": "x"}]
    assert result.dropped == 0


def test_mem_5_repair_keeps_extra_keys_of_rows() -> None:
    rows = [asst("a"), {"role": "tool", "content": "r", "tool_call_id": "a", "name": "search"}]
    assert repair_tool_pairing(rows).messages[1]["name"] == "search"
