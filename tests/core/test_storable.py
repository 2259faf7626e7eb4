"""``flowmem.core.storable``: the one decision on which text flowmem can store (issue 12)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import append, check_storable, prepare, storable_text, unstorable_path
from flowmem.errors import InvalidInputError, InvalidTextError


@pytest.mark.parametrize("text", ["", "plain", "Zoë", "😀", "\x00", "\uffff", "\U0010ffff"])
def test_text_utf8_can_encode_is_storable(text: str) -> None:
    assert storable_text(text)
    check_storable(text, "x")


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udc00\ud800", "\ud83d\ude00", "x\udbff"])
def test_surrogate_code_points_are_not_storable(text: str) -> None:
    assert not storable_text(text)
    with pytest.raises(InvalidTextError) as caught:
        check_storable(text, "content")
    assert caught.value.code == "invalid_text"
    assert isinstance(caught.value, InvalidInputError)
    assert caught.value.details["field"] == "content"
    json.dumps(caught.value.message, ensure_ascii=False).encode("utf-8")  # the message is servable


@pytest.mark.parametrize(
    "value,path",
    [
        ({"a": [1, {"b": "\ud800"}]}, ["a", "1", "b"]),
        ({"ok": "x", "\udc00": 1}, ["\\udc00"]),
        ([["x"], ("y", "\udfff")], ["1", "1"]),
    ],
)
def test_check_storable_names_the_path_of_the_first_unstorable_text(
    value: Any, path: list[str]
) -> None:
    assert unstorable_path(value) is not None
    with pytest.raises(InvalidTextError) as caught:
        check_storable(value, "body")
    assert caught.value.details["field"] == ".".join(["body", *path])


def test_values_without_text_or_with_only_storable_text_pass() -> None:
    for value in (None, 1, 1.5, True, [], {}, {"a": ["b", {"c": "é"}]}, {1: "x"}, {"o": object()}):
        check_storable(value, "value")
        assert unstorable_path(value) is None


def test_prepare_and_the_pure_append_refuse_unstorable_text() -> None:
    for message in (
        {"role": "user", "content": "\ud800"},
        {"role": "user", "content": "x", "metadata": {"\ud800": 1}},
        {"role": "tool", "content": "x", "tool_call_id": "c\ud800"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "\udc00", "name": "f"}]},
        {"role": "user", "content": [{"type": "text", "text": "\ud800"}]},
    ):
        with pytest.raises(InvalidTextError):
            prepare(message)
        with pytest.raises(InvalidTextError):
            append([], [{"role": "user", "content": "ok"}, message])


@given(
    st.one_of(st.text(), st.text(alphabet=st.characters(categories=["Cs", "Ll", "Nd"]), max_size=8))
)
def test_storable_text_is_exactly_utf8_encodability(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        encodable = False
    else:
        encodable = True
    assert storable_text(text) == encodable
