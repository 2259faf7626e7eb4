"""``flowmem.store.conversations.lines``: an entry's rows prepared as ``flowmem.core.prepare`` does (decisions 0171, 0166).

``prepared`` proves an entry's rows storable from their JSON text (one C pass)
instead of walking every string in Python, and walks them only when the text does
not clear them: the same rows and the same refusal as ``prepare``, for any input.
The text is each row's own, made by the encoder the editor writes with (``DumpedRow``),
so a write serializes each row once (decision 0166).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.errors import FlowmemError, InvalidTextError
from flowmem.store import Store, editor
from flowmem.store.base import SESSION_SCOPE, Address, SessionClaim, WriteGuard
from flowmem.store.conversations import (
    LINE,
    ConversationWrite,
    NewEntry,
    StoredConversation,
    conversations_of,
    lines,
)
from flowmem.store.conversations.lines import prepared
from flowmem.store.rows import DumpedRow, dump_json

_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\ud800", "\udfff", "\udc80", "é", "\x00", '"', "\\"]),
    ),
    max_size=6,
)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _TEXT)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(_TEXT, st.integers()), inner, max_size=3),
        st.dictionaries(_TEXT, inner, max_size=2).map(MappingProxyType),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=8,
)
_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "tool"]),
            "content": _TEXT,
            "metadata": st.dictionaries(_TEXT, _VALUES, max_size=3),
        }
    ),
    min_size=1,
    max_size=3,
)


def _outcome(
    prepare_rows: Callable[[list[dict[str, Any]]], Any], rows: list[dict[str, Any]]
) -> Any:
    try:
        return ("rows", prepare_rows(rows))
    except FlowmemError as exc:
        return ("refused", type(exc), str(exc), exc.details)


@settings(max_examples=400, deadline=None)
@given(_ROWS)
def test_prepared_gives_what_prepare_gives_rows_or_refusal(rows: list[dict[str, Any]]) -> None:
    plain = _outcome(lambda given: prepare([dict(r) for r in given]), rows)
    assert _outcome(prepared, rows) == plain


def _text(row: dict[str, Any]) -> str | None:
    """What the editor writes for ``row`` (``dump_json``), None when it refuses it."""
    try:
        return dump_json(dict(row), "message")
    except FlowmemError:
        return None


@settings(max_examples=400, deadline=None)
@given(_ROWS)
def test_prepared_rows_carry_the_very_text_the_editor_would_write(
    rows: list[dict[str, Any]],
) -> None:
    try:
        made = prepared(rows)
    except FlowmemError:
        return  # refused as prepare refuses (the test above)
    texts = [_text(row) for row in made]
    if all(text is not None for text in texts):
        assert [type(row) for row in made] == [DumpedRow] * len(made)
        assert [row.text for row in made if isinstance(row, DumpedRow)] == texts
    else:  # a row JSON cannot spell: every row plain, the editor decides as before
        assert [type(row) for row in made] == [dict] * len(made)


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every storability walk made from now on (``check_storable``, as prepare or prepared call it)."""
    walked: list[object] = []
    real = lines.check_storable

    def counted(value: object, field: str) -> None:
        walked.append(value)
        real(value, field)

    monkeypatch.setattr(importlib.import_module("flowmem.core.append"), "check_storable", counted)
    monkeypatch.setattr(lines, "check_storable", counted)
    return walked


def _write(store: Store, entry: str, text: str) -> bool:
    record = StoredConversation("c1", "r1", None, 1, {"head_id": entry})
    row = {"role": "user", "content": text, "metadata": {"pydantic_ai": {"entry": entry}}}
    guard = WriteGuard(None, "c1", SessionClaim(owner=None, create=True, created_at=1.0))
    write = ConversationWrite(record, entry, None, [NewEntry(entry, [row])])
    return conversations_of(store).write(write, None, guard)


def test_a_write_of_storable_rows_walks_none_of_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked = _walks(monkeypatch)
    assert _write(store, "e1", "hello, 日本")
    assert walked == []
    assert [r["content"] for r in store.load(Address(SESSION_SCOPE, "c1", LINE))] == ["hello, 日本"]


def test_a_write_of_a_lone_surrogate_is_refused_by_the_walk_and_stores_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked = _walks(monkeypatch)
    with pytest.raises(InvalidTextError) as refused:
        _write(store, "e1", "bad \ud800")
    assert len(walked) == 1
    assert refused.value.details["field"] == "messages.0.content"
    assert conversations_of(store).get("c1") is None
    assert store.load(Address(SESSION_SCOPE, "c1", LINE)) == []


def test_a_write_serializes_each_row_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row's text made by ``prepared`` is what the editor writes: it serializes no row again."""
    again: list[object] = []
    real = editor.dump_json

    def counted(value: object, what: str, compact: bool = True) -> str:
        again.append(value)
        return real(value, what, compact)

    monkeypatch.setattr(editor, "dump_json", counted)
    assert _write(store, "e1", "hello, 日本")
    assert again == []
    stored = store.load(Address(SESSION_SCOPE, "c1", LINE))
    assert [r["content"] for r in stored] == ["hello, 日本"]
    assert stored[0]["metadata"]["pydantic_ai"] == {"entry": "e1"}
