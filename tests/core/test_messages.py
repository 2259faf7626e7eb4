"""Message shapes, content coercion and the single id readers (MEM-11)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.core import (
    append,
    call_ids,
    check_sendable,
    coerce_content,
    entry_id,
    is_healed,
    normalize,
    result_id,
    to_flat,
    to_row,
    usable_call_id,
)
from flowmem.core.fast import fast_entry_id
from flowmem.errors import InvalidMessageError, UnknownRoleError

UNUSABLE_IDS: list[Any] = [None, "", "  ", "0", 0, True, False, 1.5, {}, [], ["c1"]]


# --- MEM-11: both spellings, one definition -------------------------------------


def test_mem_11_reads_normalized_spelling() -> None:
    turn = {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c1"}]}
    assert call_ids(turn) == ["c1"]


def test_mem_11_reads_provider_flat_spelling() -> None:
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "type": "function"}],
    }
    assert call_ids(turn) == ["call_1"]


def test_mem_11_reads_both_spellings_under_metadata() -> None:
    turn = {
        "role": "assistant",
        "content": "",
        "metadata": {"tool_calls": [{"tool_call_id": "a"}, {"id": "b"}]},
    }
    assert call_ids(turn) == ["a", "b"]


def test_mem_11_normalized_spelling_wins_when_both_present() -> None:
    assert entry_id({"tool_call_id": "a", "id": "b"}) == "a"
    # an unusable normalized id falls back to the flat one
    assert entry_id({"tool_call_id": "0", "id": "b"}) == "b"
    assert entry_id({"tool_call_id": "  ", "id": "b"}) == "b"


def test_mem_11_top_level_tool_calls_win_over_metadata() -> None:
    turn = {
        "role": "assistant",
        "tool_calls": [{"id": "top"}],
        "metadata": {"tool_calls": [{"id": "meta"}]},
    }
    assert call_ids(turn) == ["top"]


@pytest.mark.parametrize("bad", UNUSABLE_IDS, ids=repr)
def test_mem_11_unusable_ids_are_skipped(bad: Any) -> None:
    turn = {
        "role": "assistant",
        "tool_calls": [{"tool_call_id": bad}, {"id": bad}, {"id": "ok"}],
    }
    assert call_ids(turn) == ["ok"]
    assert usable_call_id(bad) is None


def test_mem_11_usable_ids_are_trimmed_strings_or_ints() -> None:
    assert usable_call_id(" c1 ") == "c1"
    assert usable_call_id(7) == "7"
    assert usable_call_id(-3) == "-3"
    assert entry_id({"id": 12}) == "12"


class _Str(str):
    """A ``str`` subclass: the fast paths test ``type(x) is str`` and must not differ on it."""


# Every kind of id value: ids that trim to "0" or nothing, ints, bools, non-ids;
# the tricky ones listed, so every run meets each of them.
TRICKY_IDS: list[Any] = [
    None, True, False, 0, 1, -1, 1.5, [], {}, "0", " 0 ", "00", "-0", "", "  ", "\t0\n",
    "c1", " c1 ", _Str("0"), _Str(" c1 "), _Str(""),
]
ID_VALUES = st.one_of(
    st.sampled_from(TRICKY_IDS),
    st.integers(),
    st.text(alphabet=" 0a\t\u00a0\u2003", max_size=4),
    st.text(max_size=4).map(_Str),
    st.floats(),
    st.lists(st.integers(), max_size=1),
)


def _spec_usable_call_id(value: object) -> str | None:
    """DESIGN §1 as written: a str or int, never bool, non-empty trimmed, not "0"."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text if text and text != "0" else None


@settings(max_examples=500, deadline=None)  # a pause of a loaded worker is no failure
@given(ID_VALUES)
def test_mem_11_usable_call_id_is_the_rule_on_every_input(value: object) -> None:
    assert usable_call_id(value) == _spec_usable_call_id(value)


class _Call(dict[str, Any]):
    """A ``dict`` subclass: the fast reader's plain-dict path must not differ on it."""


CALL_ENTRIES = st.one_of(
    st.fixed_dictionaries({}, optional={"tool_call_id": ID_VALUES, "id": ID_VALUES}),
    st.fixed_dictionaries({}, optional={"tool_call_id": ID_VALUES, "id": ID_VALUES}).map(_Call),
    ID_VALUES,
)


@settings(max_examples=1000, deadline=None)
@given(CALL_ENTRIES)
def test_mem_11_the_fast_reader_equals_entry_id_on_every_input(call: object) -> None:
    assert fast_entry_id(call) == entry_id(call)


def test_mem_11_call_ids_are_unique_and_ordered() -> None:
    turn = {"role": "assistant", "tool_calls": [{"id": "b"}, {"id": "a"}, {"tool_call_id": "b"}]}
    assert call_ids(turn) == ["b", "a"]


def test_mem_11_only_assistant_turns_declare() -> None:
    for role in ("user", "system", "tool"):
        assert call_ids({"role": role, "tool_calls": [{"id": "x"}]}) == []


def test_mem_11_result_id_reads_top_level_then_metadata() -> None:
    assert result_id({"role": "tool", "tool_call_id": "a"}) == "a"
    assert result_id({"role": "tool", "metadata": {"tool_call_id": " b "}}) == "b"
    assert result_id({"role": "tool", "tool_call_id": "", "metadata": {"tool_call_id": "c"}}) == "c"
    assert result_id({"role": "tool", "tool_call_id": True}) is None
    assert result_id({"role": "user", "tool_call_id": "a"}) is None


def test_mem_11_dedup_dangling_and_recording_agree_on_flat_spelling() -> None:
    """The same flat-spelled turn is deduplicated (MEM-2), healed (MEM-3) and answered."""
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_9", "type": "function"}],
    }
    first = append([], turn)
    assert first.appended == 1
    again = append(
        first.messages,
        {
            "role": "assistant",
            "content": "",
            "metadata": {"tool_calls": [{"tool_call_id": "call_9"}]},
        },
    )
    assert again.appended == 0
    healed = append(again.messages, {"role": "user", "content": "hi"})
    assert healed.messages[1]["metadata"] == {"tool_call_id": "call_9", "healed": True}
    assert check_sendable(healed.messages) == []


def test_mem_11_unusable_ids_name_no_pairing_anywhere() -> None:
    turn = {"role": "assistant", "content": "x", "tool_calls": [{"id": "0"}, {"id": "  "}]}
    result = append([], [turn, {"role": "user", "content": "next"}])
    assert [r["role"] for r in result.messages] == ["assistant", "user"]  # nothing healed
    normalized = normalize([turn])
    assert normalized.messages == [{"role": "assistant", "content": "x"}]
    assert normalized.dropped == 2


# --- content coercion (MEM-5 step 1, MEM-16) -------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("hi", "hi"),
        ("", ""),
        (None, ""),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (42, "42"),
        (1.5, "1.5"),
        ({"a": [1, "é"]}, '{"a": [1, "é"]}'),
        ([1, 2], "[1, 2]"),
        (object(), ""),
        ({"x": math.nan}, ""),
        (b"bytes", ""),
    ],
    ids=lambda v: "object()" if type(v) is object else repr(v),  # stable across workers
)
def test_mem_5_content_is_cast_serialized_or_empty(value: Any, text: str) -> None:
    assert coerce_content(value) == text


def test_mem_5_content_that_recurses_falls_back_to_empty() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert coerce_content(loop) == ""


# --- to_row / to_flat ---------------------------------------------------------------


def test_to_row_moves_flat_tool_data_under_metadata() -> None:
    row = to_row({"role": "assistant", "content": None, "tool_calls": [{"id": "c"}], "name": "bot"})
    assert row == {
        "role": "assistant",
        "content": "",
        "metadata": {"tool_calls": [{"id": "c"}], "name": "bot"},
    }
    tool = to_row({"role": "tool", "content": 5, "tool_call_id": "c"}, now=100)
    assert tool == {
        "role": "tool",
        "content": "5",
        "metadata": {"tool_call_id": "c"},
        "timestamp": 100,
    }


def test_to_row_keeps_an_integer_timestamp_and_stamps_otherwise() -> None:
    assert to_row({"role": "user", "content": "a", "timestamp": 7}, now=9)["timestamp"] == 7
    assert to_row({"role": "user", "content": "a", "timestamp": True}, now=9)["timestamp"] == 9
    assert "timestamp" not in to_row({"role": "user", "content": "a"})


def test_to_row_copies_tool_calls() -> None:
    calls = [{"id": "c"}]
    row = to_row({"role": "assistant", "tool_calls": calls})
    row["metadata"]["tool_calls"][0]["id"] = "changed"
    assert calls == [{"id": "c"}]


def test_to_row_reads_metadata_id_when_top_level_is_null() -> None:
    row = to_row(
        {"role": "tool", "content": "r", "tool_call_id": None, "metadata": {"tool_call_id": "c"}}
    )
    assert result_id(row) == "c"


@pytest.mark.parametrize("entry", [None, "user", 3, ["role", "user"]], ids=repr)
def test_to_row_refuses_a_non_map(entry: Any) -> None:
    with pytest.raises(InvalidMessageError):
        to_row(entry)


@pytest.mark.parametrize("role", [None, "", "bot", "USER", 1, ["user"]], ids=repr)
def test_to_row_refuses_an_unknown_role_naming_it(role: Any) -> None:
    with pytest.raises(UnknownRoleError) as caught:
        to_row({"role": role, "content": "x"})
    assert repr(role) in str(caught.value)
    assert caught.value.code == "unknown_role"


@pytest.mark.parametrize("calls", ["c1", {"id": "c1"}, 3, ["c1"], [None]], ids=repr)
def test_to_row_refuses_tool_calls_that_are_not_a_list_of_maps(calls: Any) -> None:
    with pytest.raises(InvalidMessageError):
        to_row({"role": "assistant", "content": "", "tool_calls": calls})
    with pytest.raises(InvalidMessageError):
        to_row({"role": "assistant", "content": "", "metadata": {"tool_calls": calls}})


def test_to_row_refuses_metadata_that_is_not_a_map() -> None:
    with pytest.raises(InvalidMessageError):
        to_row({"role": "user", "content": "x", "metadata": "oops"})


def test_to_flat_drops_non_maps_and_unknown_roles() -> None:
    assert to_flat("x") is None  # type: ignore[arg-type]
    assert to_flat({"content": "no role"}) is None
    assert to_flat({"role": "robot", "content": "x"}) is None


def test_to_flat_lifts_stored_tool_data_to_the_top() -> None:
    stored = {
        "role": "tool",
        "content": "r",
        "metadata": {"tool_call_id": "c", "healed": True},
        "timestamp": 1,
    }
    assert to_flat(stored) == {"role": "tool", "content": "r", "tool_call_id": "c"}
    turn = {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c"}]}}
    assert to_flat(turn) == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "c"}],
    }


def test_is_healed_reads_the_marking() -> None:
    assert is_healed({"role": "tool", "metadata": {"healed": True}})
    assert is_healed({"role": "tool", "healed": True})
    assert not is_healed({"role": "tool", "metadata": {"healed": "yes"}})
    assert not is_healed({"role": "tool", "metadata": {}})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=repr)
def test_mem_5_non_json_float_content_falls_back_to_empty(value: float) -> None:
    # NaN and infinities have no JSON text: they cannot be serialized (decision 0001)
    assert coerce_content(value) == ""
    assert normalize([{"role": "user", "content": value}]).messages == [
        {"role": "user", "content": ""}
    ]
