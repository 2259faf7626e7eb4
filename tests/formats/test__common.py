"""The formats read tool call ids with the core's reader (MEM-11)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import usable_call_id
from flowmem.errors import InvalidInputError, InvalidMessageError
from flowmem.formats import from_anthropic, from_openai, from_responses
from flowmem.formats._common import entries, lossless_part, provider_part, required_call_id

ID_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["0", " 0 ", "", "  ", "c1", " c1 ", "00", "-0"]),
    st.text(max_size=4),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=1),
)


@given(ID_VALUES)
def test_mem_11_formats_and_core_agree_on_every_id(value: object) -> None:
    expected = usable_call_id(value)
    if expected is None:
        with pytest.raises(InvalidMessageError):
            required_call_id(value, "here")
    else:
        assert required_call_id(value, "here") == expected


def _openai(cid: object) -> list[dict[str, Any]]:
    call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return from_openai([{"role": "assistant", "content": None, "tool_calls": [call]}])


def _openai_result(cid: object) -> list[dict[str, Any]]:
    return from_openai([{"role": "tool", "tool_call_id": cid, "content": "x"}])


def _anthropic(cid: object) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": cid, "name": "f", "input": {}}
    return from_anthropic(None, [{"role": "assistant", "content": [block]}])


def _anthropic_result(cid: object) -> list[dict[str, Any]]:
    block = {"type": "tool_result", "tool_use_id": cid, "content": "x"}
    return from_anthropic(None, [{"role": "user", "content": [block]}])


def _responses(cid: object) -> list[dict[str, Any]]:
    return from_responses([{"type": "function_call", "call_id": cid, "name": "f", "arguments": "{}"}])


def _responses_result(cid: object) -> list[dict[str, Any]]:
    return from_responses([{"type": "function_call_output", "call_id": cid, "output": "x"}])


READERS = [_openai, _openai_result, _anthropic, _anthropic_result, _responses, _responses_result]


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize("cid", ["0", 0, " 0 "])
def test_mem_11_from_x_refuses_an_id_the_core_treats_as_absent(
    read: Callable[[object], list[dict[str, Any]]], cid: object
) -> None:
    with pytest.raises(InvalidMessageError):
        read(cid)


@pytest.mark.parametrize("read", READERS)
def test_mem_11_from_x_keeps_a_usable_id_trimmed(
    read: Callable[[object], list[dict[str, Any]]],
) -> None:
    rows = read(" c1 ")
    row = rows[0]
    found = row["tool_calls"][0]["tool_call_id"] if row["role"] == "assistant" else row["tool_call_id"]
    assert found == "c1"


def test_entries_names_each_entry_by_its_noun_or_by_its_index_in_the_list() -> None:
    listed = [(index, where) for index, where, _ in entries([{}, {"a": 1}], "messages", "message")]
    assert listed == [(0, "message 0"), (1, "message 1")]
    assert [where for _, where, _ in entries([{}], "m.tool_calls")] == ["m.tool_calls[0]"]


def test_entries_refuses_a_value_that_is_not_a_list_and_an_entry_that_is_not_an_object() -> None:
    with pytest.raises(InvalidInputError, match="messages must be a list"):
        list(entries({"role": "user"}, "messages", "message"))
    with pytest.raises(InvalidMessageError, match="message 1: must be an object"):
        list(entries([{}, "hi"], "messages", "message"))


def test_lossless_part_keeps_a_part_that_writes_back_exactly_with_its_unread_fields_in_extra() -> None:
    block = {"type": "text", "text": "hi", "cache": 1}
    part = lossless_part("f", block, ({"type": "text", "text": "hi"}, {"type", "text"}), _written)
    assert part == {"type": "text", "text": "hi", "extra": {"f": {"cache": 1}}}


def test_lossless_part_keeps_the_block_verbatim_when_no_part_reads_it_or_it_does_not_write_back() -> None:
    block = {"type": "text", "text": "hi"}
    assert lossless_part("f", block, None, _written) == provider_part("f", block)
    assert lossless_part("f", block, ({"type": "text", "text": "?"}, {"type", "text"}), _written) == provider_part(
        "f", block
    )


def _written(part: dict[str, Any]) -> dict[str, Any]:
    """The block a text part writes: its text, and its ``extra.f`` fields."""
    return {"type": "text", "text": part["text"], **part.get("extra", {}).get("f", {})}
