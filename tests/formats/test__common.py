"""The formats read tool call ids with the core's reader (MEM-11)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import usable_call_id
from flowmem.errors import InvalidMessageError
from flowmem.formats import from_anthropic, from_openai, from_responses
from flowmem.formats._common import required_call_id

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
