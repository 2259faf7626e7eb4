"""The buffer append: MEM-1, MEM-2, MEM-3, MEM-10, MEM-14, the window, bad input."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flowmem.core import (
    EVICTED_CALLS_KEPT,
    HEALED_CONTENT,
    Answer,
    AppendResult,
    Dangling,
    ListEditor,
    Oldest,
    append,
    apply_append,
    check_sendable,
    heal,
    normalize,
    prepare,
)
from flowmem.errors import InvalidInputError, InvalidMessageError, UnknownRoleError

Row = dict[str, Any]


def asst(*ids: str, content: str = "", meta: bool = True) -> Row:
    calls = [{"tool_call_id": cid, "name": "search"} for cid in ids]
    if meta:
        return {"role": "assistant", "content": content, "metadata": {"tool_calls": calls}}
    return {"role": "assistant", "content": content, "tool_calls": calls}


def tool(cid: str, content: str = "result", healed: bool = False) -> Row:
    meta: dict[str, Any] = {"tool_call_id": cid}
    if healed:
        meta["healed"] = True
    return {"role": "tool", "content": content, "metadata": meta}


def user(content: str = "hi") -> Row:
    return {"role": "user", "content": content, "metadata": {}}


def placeholder(cid: str) -> Row:
    return tool(cid, HEALED_CONTENT, healed=True)


def roles(rows: list[Row]) -> list[str]:
    return [r["role"] for r in rows]


# --- MEM-3: the seed example, reproduced exactly -------------------------------------

SEED_BEFORE = [
    {
        "role": "assistant",
        "content": "",
        "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
    },
    {"role": "user", "content": "anything?", "metadata": {}},
    {"role": "assistant", "content": "sorry, lost it", "metadata": {}},
]
SEED_AFTER = [
    {
        "role": "assistant",
        "content": "",
        "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "search"}]},
    },
    {
        "role": "tool",
        "content": "Tool call was interrupted; no result.",
        "metadata": {"tool_call_id": "c1", "healed": True},
    },
    {"role": "user", "content": "anything?", "metadata": {}},
    {"role": "assistant", "content": "sorry, lost it", "metadata": {}},
    {"role": "user", "content": "try again", "metadata": {}},
]


def test_mem_3_seed_example_heals_mid_buffer() -> None:
    result = append(SEED_BEFORE, {"role": "user", "content": "try again"})
    assert result.messages == SEED_AFTER
    assert result.count == 5
    assert result.appended == 1
    assert result.appended_any is True


def test_mem_3_seed_example_stored_shape_incoming() -> None:
    result = append(SEED_BEFORE, {"role": "user", "content": "try again", "metadata": {}})
    assert result.messages == SEED_AFTER


def test_mem_3_seed_example_tool_append_leaves_the_call_unanswered() -> None:
    late = {"role": "tool", "content": "found it", "metadata": {"tool_call_id": "zz"}}
    result = append(SEED_BEFORE, late)
    assert result.messages == [*SEED_BEFORE, late]
    assert all(not r["metadata"].get("healed") for r in result.messages)
    assert any(
        v.code == "unanswered_call" and v.index == 0 for v in check_sendable(result.messages)
    )


def test_mem_3_seed_example_tool_message_for_the_call_does_not_heal() -> None:
    # the seed's closing sentence: a tool message against the same dangling call
    result = append(SEED_BEFORE, {"role": "tool", "content": "found", "tool_call_id": "c1"})
    assert result.messages == [*SEED_BEFORE, tool("c1", "found")]
    assert HEALED_CONTENT not in [r["content"] for r in result.messages]
    # no result sits next to the call: a provider would still reject the history
    codes = [(v.index, v.code) for v in check_sendable(result.messages)]
    assert (0, "unanswered_call") in codes


def test_mem_3_assistant_append_never_heals() -> None:
    result = append(SEED_BEFORE, {"role": "assistant", "content": "still here"})
    assert HEALED_CONTENT not in [r["content"] for r in result.messages]
    assert result.count == 4


def test_mem_3_healed_text_and_marking() -> None:
    result = append([asst("c1")], user())
    assert result.messages[1] == {
        "role": "tool",
        "content": "Tool call was interrupted; no result.",
        "metadata": {"tool_call_id": "c1", "healed": True},
    }


def test_mem_3_placeholder_goes_after_existing_results_in_declaration_order() -> None:
    buffer = [user("q"), asst("a", "b", "c"), tool("b"), user("again?")]
    result = append(buffer, user("hello"))
    assert result.messages == [
        user("q"),
        asst("a", "b", "c"),
        tool("b"),
        placeholder("a"),
        placeholder("c"),
        user("again?"),
        user("hello"),
    ]
    assert check_sendable(result.messages) == []


def test_mem_3_heals_every_turn_at_its_own_place() -> None:
    buffer = [asst("a"), user("1"), asst("b"), tool("b"), asst("c", content="thinking")]
    result = append(buffer, user("2"))
    assert result.messages == [
        asst("a"),
        placeholder("a"),
        user("1"),
        asst("b"),
        tool("b"),
        asst("c", content="thinking"),
        placeholder("c"),
        user("2"),
    ]
    assert result.appended == 1


def test_mem_3_result_anywhere_in_buffer_counts_as_an_answer() -> None:
    # the result is stored before the declaring turn: the call is not dangling
    buffer = [tool("a"), asst("a")]
    result = append(buffer, user())
    assert result.messages == [tool("a"), asst("a"), user()]


def test_mem_3_a_call_declared_twice_is_healed_once_after_the_first() -> None:
    buffer = [asst("a"), asst("a", "b")]
    result = append(buffer, user())
    assert result.messages == [
        asst("a"),
        placeholder("a"),
        asst("a", "b"),
        placeholder("b"),
        user(),
    ]


def test_mem_3_heals_before_the_user_turn_within_one_batch() -> None:
    result = append([], [asst("a"), user("u"), tool("a", "late")])
    # healing happened before the user turn; the late real result then replaces it (MEM-10)
    assert result.messages == [asst("a"), tool("a", "late"), user("u")]
    assert result.appended == 2


def test_mem_3_empty_user_turn_is_a_pure_read_and_does_not_heal() -> None:
    buffer = [asst("a")]
    for empty in (
        {"role": "user", "content": ""},
        {"role": "user"},
        {"role": "user", "content": None},
    ):
        result = append(buffer, empty)
        assert result.messages == buffer
        assert result.appended == 0


def test_mem_14_empty_user_turn_with_a_window_is_a_pure_read_and_evicts_nothing() -> None:
    """DESIGN.md §2: the append that appends nothing leaves the buffer alone (issue 12)."""
    buffer = [user(f"m{i}") for i in range(5)]
    for incoming in ({"role": "user", "content": ""}, [], [{"role": "tool", "content": ""}]):
        result = append(buffer, incoming, max_messages=3)
        assert result.messages == buffer
        assert (result.count, result.appended) == (5, 0)
    # a message that is appended applies the window as before
    assert append(buffer, user("m5"), max_messages=3).messages == [*buffer[3:], user("m5")]


def test_mem_3_heal_on_list_editor_is_idempotent() -> None:
    editor = ListEditor([asst("a", "b"), tool("a")])
    heal(editor)
    heal(editor)
    assert editor.rows == [asst("a", "b"), tool("a"), placeholder("b")]


# --- MEM-1: a tool result twice is appended once --------------------------------------


def test_mem_1_second_result_for_a_stored_id_is_dropped() -> None:
    buffer = [asst("a"), tool("a", "first")]
    result = append(buffer, {"role": "tool", "content": "second", "tool_call_id": "a"})
    assert result.messages == buffer
    assert result.count == 2
    assert result.appended == 0
    assert result.appended_any is False


def test_mem_1_duplicate_within_the_same_append_is_dropped() -> None:
    batch = [asst("a"), tool("a", "one"), tool("a", "two")]
    result = append([], batch)
    assert result.messages == [asst("a"), tool("a", "one")]
    assert result.count == 2
    assert result.appended == 2


def test_mem_1_dedup_reads_both_shapes_and_trims() -> None:
    buffer = [asst("a"), {"role": "tool", "content": "r", "tool_call_id": "a"}]
    result = append(buffer, tool(" a ", "again"))
    assert result.appended == 0
    assert result.count == 2


def test_mem_1_result_without_usable_id_is_not_deduplicated() -> None:
    orphan = {"role": "tool", "content": "stray"}
    result = append([], [orphan, orphan])
    assert result.appended == 2
    assert result.count == 2


def test_mem_1_result_for_an_undeclared_id_is_stored() -> None:
    result = append([user()], {"role": "tool", "content": "r", "tool_call_id": "nobody"})
    assert result.appended == 1
    assert result.messages[-1] == tool("nobody", "r")


# --- MEM-2: an assistant turn is a duplicate only when every call is known ----------------


def test_mem_2_turn_with_only_known_calls_is_dropped() -> None:
    buffer = [asst("a", "b"), tool("a"), tool("b")]
    result = append(buffer, asst("b", "a", meta=False))
    assert result.messages == buffer
    assert result.appended == 0


def test_mem_2_turn_with_one_new_call_is_appended() -> None:
    buffer = [asst("a"), tool("a")]
    result = append(buffer, asst("a", "b"))
    assert result.appended == 1
    assert result.messages[-1] == asst("a", "b")


def test_mem_2_known_across_turns_counts() -> None:
    buffer = [asst("a"), tool("a"), asst("b"), tool("b")]
    assert append(buffer, asst("a", "b")).appended == 0


def test_mem_2_retry_within_the_same_append_is_dropped() -> None:
    result = append([], [asst("a"), asst("a")])
    assert result.messages == [asst("a")]
    assert result.appended == 1


def test_mem_2_turn_without_calls_is_never_a_duplicate() -> None:
    buffer = [{"role": "assistant", "content": "same", "metadata": {}}]
    result = append(buffer, {"role": "assistant", "content": "same"})
    assert result.appended == 1
    assert result.count == 2


def test_mem_2_unusable_ids_do_not_make_a_turn_a_duplicate() -> None:
    buffer = [asst("a"), tool("a")]
    turn = {"role": "assistant", "content": "x", "tool_calls": [{"id": "0"}]}
    assert append(buffer, turn).appended == 1


def test_mem_2_declared_elsewhere_means_declared_not_answered() -> None:
    # the declaration counts even though the call is still unanswered
    assert append([asst("a")], asst("a")).appended == 0


# --- MEM-1, MEM-2: the call ids of evicted turns are remembered (issue 24 §2) -------------


def test_mem_1_a_late_result_of_an_evicted_call_is_a_duplicate() -> None:
    first = append([asst("c1"), tool("c1"), user("a"), user("b")], user("c"), max_messages=4)
    assert roles(first.messages) == ["user"] * 3 and first.evicted == ("c1",)
    late = append(first.messages, tool("c1", "late"), max_messages=4, evicted=first.evicted)
    assert (late.appended, late.messages, late.evicted) == (0, first.messages, ("c1",))
    # without the memory (a caller that does not pass it back) it would be an orphan
    forgot = append(first.messages, tool("c1", "late"), max_messages=4)
    assert forgot.appended == 1 and check_sendable(forgot.messages) != []


def test_mem_2_a_re_delivered_evicted_turn_is_a_duplicate() -> None:
    first = append([asst("c1", "c2"), tool("c1"), tool("c2"), user()], user(), max_messages=2)
    assert first.evicted == ("c1", "c2")
    again = append(first.messages, asst("c2", "c1"), max_messages=2, evicted=first.evicted)
    assert again.appended == 0 and again.messages == first.messages
    # one id not known makes it a new turn (MEM-2); its results then pair with it
    fresh = append(first.messages, [asst("c1", "c3"), tool("c1"), tool("c3")], evicted=("c1",))
    assert fresh.appended == 3 and check_sendable(fresh.messages) == []


def test_mem_1_mem_2_the_memory_keeps_the_latest_evicted_ids_only() -> None:
    editor = ListEditor([], evicted=["old"])
    editor.remember_evicted([f"k{i}" for i in range(EVICTED_CALLS_KEPT)])
    assert not editor.was_evicted("old") and editor.was_evicted("k0")
    editor.remember_evicted(["k0"])  # remembered again: the newest now
    editor.remember_evicted(["new"])
    assert editor.was_evicted("k0") and not editor.was_evicted("k1")
    assert len(editor.evicted) == EVICTED_CALLS_KEPT and list(editor.evicted)[-2:] == ["k0", "new"]


def test_append_refuses_one_string_as_the_evicted_ids() -> None:
    with pytest.raises(InvalidInputError):
        append([], user(), evicted="c1")


# --- MEM-10: a real result replaces its placeholder in place ---------------------------


def test_mem_10_real_result_replaces_placeholder_in_place() -> None:
    buffer = [asst("a"), placeholder("a"), user("u")]
    result = append(buffer, {"role": "tool", "content": "42", "tool_call_id": "a"})
    assert result.messages == [asst("a"), tool("a", "42"), user("u")]
    assert "healed" not in result.messages[1]["metadata"]
    assert result.appended == 0
    assert result.appended_any is False
    assert result.count == 3


def test_mem_10_second_real_result_is_then_deduplicated() -> None:
    buffer = [asst("a"), placeholder("a"), user("u")]
    first = append(buffer, tool("a", "42"))
    second = append(first.messages, tool("a", "43"))
    assert second.messages == first.messages
    assert second.appended == 0


def test_mem_10_incoming_healed_row_never_replaces() -> None:
    buffer = [asst("a"), placeholder("a"), user("u")]
    other = tool("a", "another placeholder", healed=True)
    result = append(buffer, other)
    assert result.messages == buffer
    assert result.appended == 0


def test_mem_10_healed_marking_given_top_level_also_never_replaces() -> None:
    buffer = [asst("a"), placeholder("a")]
    result = append(buffer, {"role": "tool", "content": "x", "tool_call_id": "a", "healed": True})
    assert result.messages == buffer


def test_mem_10_real_result_over_a_real_result_is_not_a_replacement() -> None:
    buffer = [asst("a"), tool("a", "real")]
    result = append(buffer, tool("a", "newer"))
    assert result.messages == buffer


def test_mem_10_replacement_keeps_the_caller_metadata_without_healed() -> None:
    buffer = [asst("a"), placeholder("a")]
    incoming = {
        "role": "tool",
        "content": "ok",
        "metadata": {"tool_call_id": "a", "source": "retry", "healed": False},
    }
    result = append(buffer, incoming)
    assert result.messages[1]["metadata"] == {"tool_call_id": "a", "source": "retry"}


def test_mem_10_replacement_within_the_healing_batch() -> None:
    result = append([asst("a", "b")], [user("u"), tool("b", "B")])
    assert result.messages == [asst("a", "b"), placeholder("a"), tool("b", "B"), user("u")]
    assert result.appended == 1


# --- MEM-14: how much of the append was new ---------------------------------------------


def test_mem_14_counts_new_rows_not_buffer_growth() -> None:
    buffer = [user("1"), user("2"), user("3")]
    result = append(buffer, [user("4"), user("5")], max_messages=3)
    assert result.appended == 2
    assert result.count == 3
    assert result.appended_any is True
    assert result.messages == [user("3"), user("4"), user("5")]


def test_mem_14_dedup_and_replacement_count_zero() -> None:
    buffer = [asst("a", "b"), placeholder("a"), tool("b")]
    result = append(buffer, [tool("a", "real"), tool("b", "dup"), asst("a")])
    assert result.appended == 0
    assert result.appended_any is False
    assert result.count == 3


def test_mem_14_placeholders_are_not_counted_as_appended() -> None:
    result = append([asst("a", "b", "c")], user())
    assert result.count == 5
    assert result.appended == 1


def test_mem_14_empty_messages_count_zero() -> None:
    result = append([], [user(""), {"role": "assistant", "content": ""}, tool("x", "")])
    assert result.appended == 0
    assert result.messages == []
    assert result.to_dict() == {"messages": [], "count": 0, "appended": 0, "appended_any": False}


def test_mem_14_result_dict_has_the_four_fields() -> None:
    result = append([], user())
    assert result.to_dict() == {
        "messages": [user()],
        "count": 1,
        "appended": 1,
        "appended_any": True,
    }
    assert isinstance(result, AppendResult)


# --- empty content rules -----------------------------------------------------------------


def test_empty_assistant_turn_declaring_calls_is_appended() -> None:
    result = append([], {"role": "assistant", "content": "", "tool_calls": [{"id": "x"}]})
    assert result.appended == 1


def test_empty_assistant_turn_with_only_unusable_calls_is_skipped() -> None:
    result = append([], {"role": "assistant", "content": "", "tool_calls": [{"id": ""}]})
    assert result.appended == 0


def test_empty_system_and_tool_rows_are_skipped() -> None:
    result = append([asst("a")], [{"role": "system", "content": ""}, tool("a", "")])
    assert result.messages == [asst("a")]


def test_whitespace_content_is_not_empty() -> None:
    assert append([], user(" ")).appended == 1


# --- the window -----------------------------------------------------------------------


def test_window_evicts_oldest_rows() -> None:
    buffer = [user(str(i)) for i in range(5)]
    result = append(buffer, user("5"), max_messages=3)
    assert result.messages == [user("3"), user("4"), user("5")]
    assert result.count == 3


def test_window_evicting_a_turn_evicts_its_results() -> None:
    buffer = [asst("a", "b"), tool("a"), tool("b"), user("1")]
    result = append(buffer, user("2"), max_messages=4)
    assert result.messages == [user("1"), user("2")]
    assert result.count == 2
    assert result.appended == 1


def test_window_evicts_results_moved_away_from_their_turn() -> None:
    buffer = [asst("a"), user("1"), tool("a"), user("2")]
    result = append(buffer, user("3"), max_messages=4)
    assert result.messages == [user("1"), user("2"), user("3")]


def test_window_never_starts_with_a_tool_row() -> None:
    buffer = [user("0"), tool("orphan"), user("1")]
    result = append(buffer, user("2"), max_messages=3)
    assert result.messages == [user("1"), user("2")]
    assert result.count == 2


def test_window_after_healing_keeps_pairs_together() -> None:
    buffer = [user("0"), asst("a")]
    result = append(buffer, user("1"), max_messages=3)
    assert result.messages == [asst("a"), placeholder("a"), user("1")]
    result = append(result.messages, user("2"), max_messages=3)
    assert result.messages == [user("1"), user("2")]
    assert check_sendable(result.messages) == []


def test_window_zero_is_unlimited() -> None:
    buffer = [user(str(i)) for i in range(50)]
    assert append(buffer, user("x"), max_messages=0).count == 51


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None], ids=repr)
def test_window_must_be_a_non_negative_integer(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        append([], user(), max_messages=bad)


# --- timestamps -------------------------------------------------------------------------


def test_now_stamps_new_rows_and_placeholders_get_the_healing_turns_time() -> None:
    result = append([asst("a")], user(), now=1755000000)
    assert result.messages[-1]["timestamp"] == 1755000000
    assert result.messages[1]["timestamp"] == 1755000000
    assert "timestamp" not in result.messages[0]


def test_placeholders_have_no_timestamp_when_the_healing_turn_has_none() -> None:
    result = append([asst("a")], user())
    assert "timestamp" not in result.messages[1]


# --- inputs are never mutated -------------------------------------------------------------


def test_inputs_are_never_mutated() -> None:
    buffer = [asst("a", "b"), placeholder("a"), user("u")]
    incoming = [tool("a", "real"), user("next"), asst("c", meta=False)]
    buffer_before = copy.deepcopy(buffer)
    incoming_before = copy.deepcopy(incoming)
    result = append(buffer, incoming, max_messages=4, now=5)
    assert buffer == buffer_before
    assert incoming == incoming_before
    # and the result shares nothing mutable with the inputs
    for row in result.messages:
        row["metadata"]["poke"] = 1
        for call in row["metadata"].get("tool_calls", []):
            call["poke"] = 1
    assert buffer == buffer_before
    assert incoming == incoming_before


def test_flat_buffer_rows_come_back_as_stored_rows() -> None:
    buffer = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}]
    result = append(buffer, {"role": "tool", "content": "r", "tool_call_id": "a"})
    assert result.messages == [
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"id": "a"}]}},
        {"role": "tool", "content": "r", "metadata": {"tool_call_id": "a"}},
    ]


def test_incoming_may_be_one_map_a_list_a_tuple_or_none() -> None:
    assert append([], user()).count == 1
    assert append([], [user(), user("2")]).count == 2
    assert append([], (user(),)).count == 1
    assert append([user()], None).messages == [user()]


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["hello", 3, None, ["role", "user"]], ids=repr)
def test_non_map_entry_is_refused_and_nothing_changes(entry: Any) -> None:
    buffer = [user()]
    with pytest.raises(InvalidMessageError):
        append(buffer, [user("ok"), entry])
    assert buffer == [user()]


def test_unknown_role_is_refused_naming_the_role() -> None:
    with pytest.raises(UnknownRoleError) as caught:
        append([], [user("fine"), {"role": "robot", "content": "beep"}])
    assert "'robot'" in str(caught.value)
    assert caught.value.details["role"] == "robot"


def test_missing_role_is_refused() -> None:
    with pytest.raises(UnknownRoleError):
        append([], {"content": "no role"})


@pytest.mark.parametrize(
    ("content", "stored"),
    [(42, "42"), (True, "true"), ({"k": "v"}, '{"k": "v"}'), ([1], "[1]"), (2.5, "2.5")],
    ids=repr,
)
def test_non_string_content_is_coerced(content: Any, stored: str) -> None:
    result = append([], {"role": "user", "content": content})
    assert result.messages[0]["content"] == stored


def test_unserializable_content_is_empty_and_skipped() -> None:
    result = append([], {"role": "user", "content": object()})
    assert result.appended == 0


@pytest.mark.parametrize("calls", ["c1", {"id": "c1"}, 5, ["c1"]], ids=repr)
def test_tool_calls_not_a_list_of_maps_is_refused(calls: Any) -> None:
    with pytest.raises(InvalidMessageError):
        append([], {"role": "assistant", "content": "x", "tool_calls": calls})


@pytest.mark.parametrize("bad_id", [None, "", "  ", "0", 0, True, 1.5, {}], ids=repr)
def test_wrong_id_types_name_no_pairing(bad_id: Any) -> None:
    turn = {"role": "assistant", "content": "x", "tool_calls": [{"id": bad_id}]}
    result = append([], [turn, {"role": "tool", "content": "r", "tool_call_id": bad_id}, user()])
    # the turn declares nothing, so nothing is healed; the tool row answers nothing
    assert roles(result.messages) == ["assistant", "tool", "user"]
    assert result.appended == 3


@pytest.mark.parametrize("incoming", ["text", 5, {1, 2}], ids=repr)
def test_incoming_of_the_wrong_type_is_refused(incoming: Any) -> None:
    with pytest.raises(InvalidInputError):
        append([], incoming)


def test_bad_buffer_row_is_refused() -> None:
    with pytest.raises(InvalidMessageError):
        append(["not a row"], user())  # type: ignore[list-item]
    with pytest.raises(UnknownRoleError):
        append([{"role": "bot", "content": "x"}], user())
    with pytest.raises(InvalidInputError):
        append("buffer", user())  # type: ignore[arg-type]


def test_prepare_is_all_or_nothing() -> None:
    with pytest.raises(UnknownRoleError):
        prepare([user(), {"role": "nobody"}])
    assert prepare(user(), now=3) == [{**user(), "timestamp": 3}]


# --- the editor protocol ------------------------------------------------------------------


class GappedEditor:
    """A BufferEditor whose positions are sparse keys, like an SQL store's order column."""

    def __init__(self, rows: list[Row]) -> None:
        self.keys: list[int] = [1000 * (i + 1) for i in range(len(rows))]
        self.by_key: dict[int, Row] = dict(zip(self.keys, rows, strict=True))
        self.evicted = ListEditor([])

    @property
    def rows(self) -> list[Row]:
        return [self.by_key[k] for k in self.keys]

    def count(self) -> int:
        return len(self.keys)

    def is_declared(self, call_id: str) -> bool:
        return ListEditor(self.rows).is_declared(call_id)

    def answer_of(self, call_id: str) -> Answer | None:
        found = ListEditor(self.rows).answer_of(call_id)
        return None if found is None else Answer(self.keys[found.position], found.healed)

    def dangling(self) -> list[Dangling]:
        return [Dangling(d.call_id, self.keys[d.after]) for d in ListEditor(self.rows).dangling()]

    def oldest(self) -> Oldest | None:
        return Oldest(self.keys[0], self.by_key[self.keys[0]]) if self.keys else None

    def index_of(self, position: int) -> int:
        return self.keys.index(position)

    def was_evicted(self, call_id: str) -> bool:
        return self.evicted.was_evicted(call_id)

    def remember_evicted(self, call_ids: Any) -> None:
        self.evicted.remember_evicted(call_ids)

    def append_row(self, row: Row) -> None:
        key = (self.keys[-1] if self.keys else 0) + 1000
        self.keys.append(key)
        self.by_key[key] = row

    def insert_after(self, position: int, rows: Any) -> None:
        index = self.keys.index(position)
        upper = self.keys[index + 1] if index + 1 < len(self.keys) else position + 1000
        step = (upper - position) / (len(rows) + 1)
        for offset, row in enumerate(rows, start=1):
            key = position + int(step * offset)
            assert key not in self.by_key  # the test's own invariant, not input validation
            self.keys.insert(index + offset, key)
            self.by_key[key] = row

    def replace(self, position: int, row: Row) -> None:
        self.by_key[position] = row

    def delete(self, position: int) -> None:
        self.keys.remove(position)
        del self.by_key[position]


def test_apply_append_runs_the_same_rules_on_any_editor() -> None:
    buffer = [user("0"), asst("a", "b"), tool("b"), asst("c"), user("1")]
    incoming = prepare([user("2"), tool("a", "late"), asst("a"), user("3")])
    expected = append(buffer, incoming, max_messages=6)
    editor = GappedEditor(copy.deepcopy(buffer))
    outcome = apply_append(editor, copy.deepcopy(incoming), max_messages=6)
    assert editor.rows == expected.messages
    assert (outcome.appended, outcome.count) == (expected.appended, expected.count)
    listed = apply_append(ListEditor(copy.deepcopy(buffer)), copy.deepcopy(incoming), max_messages=6)
    assert outcome.repairs == listed.repairs and outcome.repairs[-1].kind == "evict"


def test_list_editor_answers_the_protocol_questions() -> None:
    editor = ListEditor([asst("a", "b"), tool("a"), placeholder("x"), user(), asst("c")])
    assert editor.count() == 5
    assert editor.is_declared("b") and not editor.is_declared("x")
    assert editor.answer_of("a") == Answer(1, False)
    assert editor.answer_of("x") == Answer(2, True)
    assert editor.answer_of("b") is None
    assert editor.dangling() == [Dangling("b", 2), Dangling("c", 4)]
    assert editor.oldest() == Oldest(0, asst("a", "b"))
    assert ListEditor([]).oldest() is None


def test_normalize_after_append_is_sendable() -> None:
    result = append(SEED_BEFORE, {"role": "user", "content": "try again"})
    assert check_sendable(result.messages) == []
    assert normalize(result.messages).dropped == 0


# --- what the outcome reports besides ``appended`` (the metrics: flowmem.metrics) ----


def _outcome(buffer: list[Row], incoming: list[Row]) -> tuple[int, int, int, int]:
    editor = ListEditor(prepare(buffer))
    outcome = apply_append(editor, prepare(incoming))
    return outcome.appended, outcome.healed, outcome.replaced, outcome.deduplicated


def test_mem_3_the_outcome_counts_each_placeholder_a_user_turn_inserts() -> None:
    assert _outcome([asst("a", "b"), asst("c")], [user()]) == (1, 3, 0, 0)


def test_mem_10_the_outcome_counts_a_placeholder_replaced_by_a_late_result() -> None:
    assert _outcome([asst("a"), placeholder("a"), user()], [tool("a")]) == (0, 0, 1, 0)


def test_mem_1_mem_2_the_outcome_counts_duplicate_results_and_turns() -> None:
    stored = [asst("a"), tool("a")]
    assert _outcome(stored, [tool("a", "again"), asst("a"), user()]) == (1, 0, 0, 2)


def test_mem_1_a_healed_copy_of_an_answered_call_is_a_duplicate_not_a_replacement() -> None:
    assert _outcome([asst("a"), placeholder("a"), user()], [placeholder("a")]) == (0, 0, 0, 1)


def test_an_empty_row_is_neither_appended_nor_a_duplicate() -> None:
    assert _outcome([user()], [{"role": "user", "content": ""}, user("x")]) == (1, 0, 0, 0)
