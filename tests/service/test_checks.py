"""``flowmem.service.checks``: ``prepared`` (the service's rows, each serialized once) equals the plain path.

Decision 0161: ``MemoryService.append`` prepares its rows with ``prepared`` (a
``DumpedRow`` each: the row and its JSON text) instead of ``prepare`` then a second
serialization in ``check_message_sizes`` and a third in the store. The rows, the
errors and the stored bytes are the plain path's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.errors import (
    InvalidInputError,
    InvalidMessageError,
    InvalidTextError,
    MessageTooLargeError,
    NotSerializableError,
    UnknownRoleError,
)
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.service.checks import check_message_sizes, prepared
from flowmem.store import Address, open_store
from flowmem.store.rows import DumpedRow


def _call(cid: str, name: str = "f") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{\"a\": \"é\"}"}}


TURNS: list[object] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi 世界", "timestamp": 5},
    {"role": "assistant", "content": "", "tool_calls": [_call("c1"), _call("c2", "g")]},
    {"role": "tool", "content": "one", "tool_call_id": "c1"},
    {"role": "user", "content": "next"},  # heals c2 (MEM-3)
    {"role": "tool", "content": "late two", "tool_call_id": "c2"},  # replaces the placeholder (MEM-10)
    {"role": "tool", "content": "again", "tool_call_id": "c1"},  # a second result, dropped (MEM-1)
    {"role": "assistant", "content": [{"type": "text", "text": "parts"}], "metadata": {"k": [1, 2.5, None]}},
    [{"role": "user", "content": "two at once"}, {"role": "assistant", "content": "ok", "extra": {"x": 1}}],
    {"role": "user", "content": ""},  # empty: nothing appended
]


def test_prepared_gives_prepare_s_rows_each_with_its_text() -> None:
    for turn in TURNS:
        rows = prepared(turn, 9)
        assert rows == prepare(turn, 9)
        assert all(type(row) is DumpedRow for row in rows)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("not a message", InvalidInputError),
        (["not a message"], InvalidMessageError),
        ({"role": "robot", "content": "x"}, UnknownRoleError),
        ({"role": "user", "content": "x", "metadata": 3}, InvalidMessageError),
        ([{"role": "user", "content": "ok"}, {"role": "user", "content": "\ud800"}], InvalidTextError),
        ({"role": "user", "content": "x", "metadata": {"v": {1}}}, NotSerializableError),
        ([{"role": "user", "content": "x", "metadata": {"v": {1}}}, {"role": "user", "content": "\udfff"}], InvalidTextError),
    ],
)
def test_prepared_refuses_what_prepare_and_the_size_check_refuse_with_the_same_error(
    bad: object, error: type[Exception]
) -> None:
    with pytest.raises(error) as plain:
        check_message_sizes(prepare(bad, 1), 1000)
    with pytest.raises(error) as fast:
        prepared(bad, 1)
    assert str(fast.value) == str(plain.value)
    assert getattr(fast.value, "details", None) == getattr(plain.value, "details", None)


def test_a_message_over_the_limit_is_refused_alike_from_its_text() -> None:
    big = [{"role": "user", "content": "small"}, {"role": "user", "content": "é" * 600}]
    with pytest.raises(MessageTooLargeError) as plain:
        check_message_sizes(prepare(big, 1), 1000)
    with pytest.raises(MessageTooLargeError) as fast:
        check_message_sizes(prepared(big, 1), 1000)
    assert str(fast.value) == str(plain.value)
    assert fast.value.details == plain.value.details
    check_message_sizes(prepared(big, 1), 1300)  # 1,213 bytes: fits


def _stored(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT pos, role, body, tokens, calls FROM buffer_rows ORDER BY buffer_id, pos"
        ).fetchall()


def test_the_service_s_prepared_rows_store_the_bytes_plain_rows_store(tmp_path: Path) -> None:
    """The seam against the plain version: the same rows, bodies, tokens and call ids on disk."""
    fast_store = open_store(f"sqlite:///{tmp_path / 'fast.db'}")
    plain_store = open_store(f"sqlite:///{tmp_path / 'plain.db'}")
    service = MemoryService(fast_store, clock=lambda: 1000.0)
    context = ExecutionContext(user_id="u1", session_id="s1")
    address = Address("session", "s1", "chat")
    try:
        for turn in TURNS:
            service.append("session", "chat", turn, context)
            rows = prepare(turn, 1000)
            assert all(type(row) is dict for row in rows)
            if not all(row["content"] in ("", None) and not row["metadata"].get("tool_calls") for row in rows):
                plain_store.append(address, rows)
        assert fast_store.load(address) == plain_store.load(address)
    finally:
        fast_store.close()
        plain_store.close()
    fast, plain = _stored(tmp_path / "fast.db"), _stored(tmp_path / "plain.db")
    assert len(fast) == 9
    assert fast == plain
