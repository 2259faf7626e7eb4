"""``flowmem.core.storable``: the one decision on which text flowmem can store (issue 12)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowmem.core import append, check_storable, prepare, storable_text, unstorable_path
from flowmem.core.storable import json_text_may_hold_surrogates
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


TRICKY = st.text(
    alphabet=st.one_of(
        st.characters(categories=["Cs"]),
        st.sampled_from(["\\", "u", "d", "8", "0", "c", '"', "😀", "é", "\ud7ff", "x"]),
    ),
    max_size=12,
)


@given(texts=st.lists(TRICKY, min_size=1, max_size=3), ascii_escapes=st.booleans())
def test_the_json_scan_never_misses_a_surrogate(texts: list[str], ascii_escapes: bool) -> None:
    """``json_text_may_hold_surrogates`` False guarantees a storable document."""
    document = {"k": texts, texts[0]: 1}
    if ascii_escapes:
        body = json.dumps(document).encode("ascii")
    else:
        body = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if not json_text_may_hold_surrogates(body):
        assert unstorable_path(json.loads(body)) is None


@given(st.lists(st.text(), max_size=4), st.booleans())
def test_the_json_scan_passes_storable_text_in_one_pass(
    texts: list[str], ascii_escapes: bool
) -> None:
    """Text without surrogates is never walked, escaped pairs (😀 as \\ud83d\\ude00) included."""
    body = json.dumps({"messages": texts, "x": "\\ud800"}, ensure_ascii=ascii_escapes).encode()
    assert not json_text_may_hold_surrogates(body)


@pytest.mark.parametrize(
    "body",
    [
        b'"\\ud800"',
        b'"\\\\ud800\\udc00"',  # an escaped backslash, then a lone low escape
        b'"\\\\\\udc00"',
        b'"\\ud800\\\\udc00"',
        b'"\xed\xa0\x80"',
        '"\ud800"'.encode("utf-16", "surrogatepass"),
    ],
)
def test_the_json_scan_flags_lone_surrogates(body: bytes) -> None:
    assert json_text_may_hold_surrogates(body)
    assert unstorable_path(json.loads(body)) is not None
