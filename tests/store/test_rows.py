"""``flowmem.store.rows``: a prepared row serialized once (``DumpedRow``, ``dumped_rows``; decision 0161)."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.errors import InvalidTextError, NotSerializableError
from flowmem.store.editor import dump_row
from flowmem.store.rows import DumpedRow, check_rows, dump_json, dumped_rows

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "héllo, 世界 \U0001f600"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    },
    {"role": "tool", "content": [{"type": "text", "text": "sunny"}], "tool_call_id": "c1"},
    {"role": "assistant", "content": "done", "metadata": {"n": 1.5, "k": [1, None, True]}},
]


def test_a_dumped_row_is_the_row_and_its_text_is_what_dump_json_writes() -> None:
    rows = prepare(MESSAGES, 7)
    made = dumped_rows(rows)
    assert made == rows
    for row, plain in zip(made, rows, strict=True):
        assert type(row) is DumpedRow
        assert row.text == dump_json(plain, "message")
        assert dump_row(row) == dump_row(plain)
        assert dump_json(row, "message") == row.text  # serialized as the plain dict


def test_a_copy_of_a_dumped_row_is_a_plain_row_again() -> None:
    (row,) = dumped_rows(prepare([MESSAGES[0]], 1))
    copied = dict(row)
    copied["content"] = "changed"
    assert type(copied) is dict
    assert dump_row(copied) != row.text


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"role": "user", "content": "a \ud800 b"}, "messages.1.content"),
        ({"role": "user", "content": "x", "metadata": {"\udc00": 1}}, "messages.1.metadata"),
    ],
)
def test_unstorable_text_is_refused_as_the_plain_check_refuses_it(bad: dict[str, Any], where: str) -> None:
    rows = [*prepare([MESSAGES[0]], 1), dict(bad, metadata=bad.get("metadata", {}), timestamp=1)]
    with pytest.raises(InvalidTextError) as plain:
        check_rows(rows)
    with pytest.raises(InvalidTextError) as dumped:
        dumped_rows(rows)
    assert dumped.value.details == plain.value.details
    assert str(dumped.value) == str(plain.value)
    assert str(plain.value.details["field"]).startswith(where)


def test_text_before_a_value_json_cannot_hold_is_refused_first_as_before() -> None:
    """An unstorable text in a later row wins over an unserializable value in an earlier one."""
    unserializable = {"role": "user", "content": "x", "metadata": {"v": {1, 2}}, "timestamp": 1}
    unstorable = {"role": "user", "content": "\ud800", "metadata": {}, "timestamp": 1}
    with pytest.raises(InvalidTextError):
        dumped_rows([unserializable, unstorable])
    with pytest.raises(NotSerializableError) as plain:
        dump_json(unserializable, "message")
    with pytest.raises(NotSerializableError) as dumped:
        dumped_rows([unserializable])
    assert str(dumped.value) == str(plain.value)


def test_check_rows_walks_plain_rows_and_rows_mixed_with_dumped_ones() -> None:
    (good,) = dumped_rows(prepare([MESSAGES[0]], 1))
    check_rows([good])
    bad = {"role": "user", "content": "\ud800", "metadata": {}}
    with pytest.raises(InvalidTextError):
        check_rows([good, bad])
    with pytest.raises(InvalidTextError):
        check_rows([bad, good])
