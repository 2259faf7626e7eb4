"""Text to message (MEM-16) and message assembly (MEM-4)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flowmem.core import assemble, text_to_message

# --- MEM-16 -------------------------------------------------------------------------------


def test_mem_16_emits_a_list_and_the_same_row() -> None:
    out = text_to_message("hello", "assistant")
    assert out.messages == [{"role": "assistant", "content": "hello"}]
    assert out.message == {"role": "assistant", "content": "hello"}
    assert out.message is not out.messages[0]


@pytest.mark.parametrize("role", ["user", "assistant", "system", "tool"])
def test_mem_16_the_four_roles_pass(role: str) -> None:
    assert text_to_message("x", role).message["role"] == role


@pytest.mark.parametrize(
    "role", [None, "", "USER", " user", "bot", "developer", 1, True, ["user"]], ids=repr
)
def test_mem_16_any_other_role_resolves_to_user(role: Any) -> None:
    assert text_to_message("x", role).message["role"] == "user"


def test_mem_16_absent_role_is_user() -> None:
    assert text_to_message("x").message == {"role": "user", "content": "x"}


@pytest.mark.parametrize(
    ("text", "content"),
    [
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        ({"a": 1}, '{"a": 1}'),
        ([1, "x"], '[1, "x"]'),
    ],
    ids=repr,
)
def test_mem_16_content_is_coerced_like_normalization(text: Any, content: str) -> None:
    assert text_to_message(text).message["content"] == content


@pytest.mark.parametrize(
    "text", ["", None, object()], ids=lambda v: "object()" if type(v) is object else repr(v)
)
def test_mem_16_empty_content_emits_nothing(text: Any) -> None:
    out = text_to_message(text, "user")
    assert out.messages == []
    assert out.message == {}


def test_mem_16_empty_tool_row_is_not_synthesized() -> None:
    out = text_to_message("", "tool", "c1")
    assert out.messages == []
    assert out.message == {}


def test_mem_16_tool_call_id_kept_on_tool_trimmed() -> None:
    out = text_to_message("42", "tool", "  c1 ")
    assert out.message == {"role": "tool", "content": "42", "tool_call_id": "c1"}
    assert text_to_message("42", "tool", 7).message["tool_call_id"] == "7"


@pytest.mark.parametrize("blank", [None, "", "   ", True, {}, 1.5], ids=repr)
def test_mem_16_blank_tool_call_id_is_omitted(blank: Any) -> None:
    assert text_to_message("42", "tool", blank).message == {"role": "tool", "content": "42"}


@pytest.mark.parametrize("role", ["user", "assistant", "system", None, "robot"])
def test_mem_16_tool_call_id_is_discarded_on_other_roles(role: Any) -> None:
    assert "tool_call_id" not in text_to_message("x", role, "c1").message


# --- MEM-4 --------------------------------------------------------------------------------


def test_mem_4_concatenates_in_declared_order() -> None:
    a = [{"role": "system", "content": "s"}, {"role": "user", "content": "1"}]
    b = {"role": "assistant", "content": "2"}
    c = [{"role": "user", "content": "3"}]
    assert assemble(a, b, c) == [*a, b, *c]
    assert assemble(c, b, a) == [*c, b, *a]


def test_mem_4_unwired_or_empty_inputs_contribute_nothing() -> None:
    m = {"role": "user", "content": "x"}
    assert assemble(None, m, None, [], m) == [m, m]
    assert assemble() == []


@pytest.mark.parametrize("value", ["text", 3, 1.5, True, b"x"], ids=repr)
def test_mem_4_non_message_values_contribute_nothing(value: Any) -> None:
    m = {"role": "user", "content": "x"}
    assert assemble(value, m) == [m]


def test_mem_4_non_map_items_inside_a_list_are_skipped() -> None:
    m = {"role": "user", "content": "x"}
    assert assemble([m, "junk", None, 5, [m], m]) == [m, m]


def test_mem_4_rows_pass_through_unchanged() -> None:
    odd = {"role": "robot", "content": {"k": 1}, "metadata": {"a": 1}, "extra": True}
    assert assemble([odd])[0] == odd
    assert assemble(odd) == [odd]


def test_mem_4_inputs_are_not_mutated() -> None:
    a = [{"role": "user", "content": "1"}]
    before = copy.deepcopy(a)
    out = assemble(a, a)
    out.append({"role": "user"})
    assert a == before


def test_mem_4_tuple_counts_as_a_list() -> None:
    m = {"role": "user", "content": "x"}
    assert assemble((m, m)) == [m, m]


@pytest.mark.parametrize("text", [float("nan"), float("inf"), float("-inf")], ids=repr)
def test_mem_16_unserializable_float_emits_nothing(text: float) -> None:
    assert text_to_message(text, "user") == ([], {})
