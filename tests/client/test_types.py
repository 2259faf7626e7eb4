"""The client's answer types read their JSON with one reader (``types._Answer.from_json``)."""

from __future__ import annotations

import pytest

from flowmem.client.types import BufferRead, RepairEntry, Session, SessionPage, TranscriptPage
from flowmem.results import TokenWindow

SESSION = {
    "id": "s1",
    "name": "",
    "owner": "alice",
    "status": "idle",
    "agent": None,
    "metadata": {"a": 1},
    "created_at": 1.0,
    "updated_at": 2.0,
}


def test_a_field_without_a_default_is_required() -> None:
    with pytest.raises(KeyError, match="updated_at"):
        Session.from_json({k: v for k, v in SESSION.items() if k != "updated_at"})


def test_a_field_with_a_default_takes_it_when_left_out_or_null() -> None:
    absent = BufferRead.from_json({"messages": [], "count": 0, "resolved_scope_id": "a"})
    null = BufferRead.from_json(
        {"messages": [], "count": 0, "resolved_scope_id": "a", "format": None, "dropped": None, "not_carried": None}
    )
    assert absent == null == BufferRead([], 0, "a")
    assert (absent.format, absent.dropped, absent.not_carried) == ("rows", 0, {})


def test_a_field_is_read_by_its_converter() -> None:
    read = BufferRead.from_json(
        {
            "messages": [],
            "count": 1,
            "resolved_scope_id": "a",
            "format": "",
            "refused": 5,
            "window": {"budget": 9, "tokens": 3, "start": 0, "cut_messages": 1, "cut_tokens": None},
        }
    )
    assert read.format == "rows" and read.refused is None
    assert read.window == TokenWindow(9, 3, 0, 1, None)
    entry = RepairEntry.from_json({"seq": 1, "at": 1.0, "rule": "MEM-3", "call_ids": ("c",), "count": 1, "archived": ["2", 3]})
    assert (entry.call_ids, entry.positions, entry.kind, entry.archived) == (["c"], [], "", (2, 3))


def test_nested_answers_and_the_sessions_pagination_are_read() -> None:
    page = SessionPage.from_json(
        {"data": [SESSION], "pagination": {"total": 1, "limit": 20, "offset": 0, "has_more": False}}
    )
    assert page.data[0].metadata == {"a": 1} and (page.total, page.has_more) == (1, False)
    rows = TranscriptPage.from_json({"data": [{"seq": 1, "role": "user", "content": "x"}], "has_more": False})
    assert rows.data[0].metadata == {} and rows.next_since is None
