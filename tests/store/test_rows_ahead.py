"""``flowmem.store.rows.dumped_ahead``: a store's rows serialized before its lock (decision 0163).

A speed trick behind a seam: the rows it gives are the plain rows (equal, each with the
text ``dump_json`` writes), or the rows as given whenever the plain checks might
decide otherwise, so an append's outcome and its errors are the plain path's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.errors import InvalidTextError, NotSerializableError
from flowmem.store import Store
from flowmem.store.editor import dump_row
from flowmem.store.rows import DumpedRow, check_rows, dump_json, dumped_ahead, dumped_rows

TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=6)  # surrogates too
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3)
    | st.tuples(inner, inner)
    | st.dictionaries(TEXT | st.integers(), inner, max_size=3),
    max_leaves=8,
)
ROWS = st.lists(st.dictionaries(TEXT, VALUES, max_size=4), max_size=3)


def _plain_verdict(rows: Any) -> tuple[str, str | None]:
    """What the plain checks say of ``rows``: refused (and the field), or each row's text."""
    try:
        check_rows(rows)
    except InvalidTextError as exc:
        return "refused", str(exc.details["field"])
    return "passed", None


@settings(max_examples=300, deadline=None)
@given(ROWS)
def test_rows_dumped_ahead_are_the_plain_rows_with_the_plain_text_or_the_rows_as_given(rows: list[dict[str, Any]]) -> None:
    made = dumped_ahead(rows)
    if made is rows:  # given back: the plain checks run on them as before
        return
    assert made == rows
    assert _plain_verdict(rows) == ("passed", None)  # a refused row is never dumped ahead
    assert _plain_verdict(made) == ("passed", None)
    for row, plain in zip(made, rows, strict=True):
        assert type(row) is DumpedRow
        assert row.text == dump_json(plain, "message") == dump_row(row)


def test_a_row_with_a_lone_surrogate_is_given_back_so_the_plain_check_refuses_it_as_before() -> None:
    rows = [*prepare([{"role": "user", "content": "ok"}], 1), {"role": "user", "content": "bad \ud800"}]
    assert dumped_ahead(rows) is rows
    with pytest.raises(InvalidTextError) as refused:
        check_rows(rows)
    assert refused.value.details["field"] == "messages.1.content"


@pytest.mark.parametrize(
    "rows",
    [
        [{"role": "user", "content": "x", "metadata": {"at": object()}}],  # not JSON
        [{"role": "user", "content": float("nan")}],  # JSON without NaN
        ({"role": "user", "content": "x"},),  # not a list
        [{"role": "user", "content": "x"}, ("role", "user")],  # a row that is not a dict
    ],
)
def test_rows_the_fast_path_cannot_prove_are_given_back_unchanged(rows: Any) -> None:
    assert dumped_ahead(rows) is rows


def test_rows_dumped_already_are_kept_and_plain_ones_dumped_beside_them() -> None:
    (done,) = dumped_rows(prepare([{"role": "user", "content": "a"}], 1))
    plain = prepare([{"role": "assistant", "content": "b"}], 2)[0]
    made = dumped_ahead([done, plain])
    assert made[0] is done
    assert type(made[1]) is DumpedRow and made[1].text == dump_json(plain, "message")


def test_an_empty_row_json_cannot_hold_appends_nothing_and_raises_nothing_as_before(store: Store) -> None:
    """The rules skip an empty row without writing it, so its value is never serialized (MEM-14)."""
    address = ("session", "s", "ahead")
    empty = {"role": "user", "content": "", "metadata": {"at": object()}}
    assert store.append(address, [empty]).appended == 0
    assert store.count(address) == 0


def test_an_unstorable_row_is_refused_naming_its_field_and_nothing_is_written(store: Store) -> None:
    address = ("session", "s", "ahead-bad")
    rows = [*prepare([{"role": "user", "content": "fine"}], 1), {"role": "user", "content": "x \udfff"}]
    with pytest.raises(InvalidTextError) as refused:
        store.append(address, rows)
    assert refused.value.details["field"] == "messages.1.content"
    assert store.count(address) == 0


def test_a_row_json_cannot_hold_that_the_rules_write_is_refused_as_not_serializable(store: Store) -> None:
    address = ("session", "s", "ahead-json")
    bad = {"role": "user", "content": "hi", "metadata": {"at": object()}}
    with pytest.raises(NotSerializableError):
        store.append(address, [bad])
    assert store.count(address) == 0


def test_an_append_of_dumped_ahead_rows_stores_the_plain_rows(store: Store) -> None:
    address = ("session", "s", "ahead-ok")
    rows = prepare(
        [
            {"role": "user", "content": "héllo \U0001f600"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        ],
        5,
    )
    assert store.append(address, rows).appended == 3
    again = store.append(address, rows)  # MEM-1, MEM-2: the call and its result known already
    assert (again.appended, again.deduplicated) == (1, 2)
    loaded = store.load(address)
    assert loaded == [*rows, rows[0]]
    assert all(type(row) is dict for row in loaded)  # what the store reads back is plain


def test_a_postgresql_append_hands_its_rules_rows_serialized_ahead_and_sqlite_the_rows_as_given(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.store.postgres import PostgresStore

    seen: list[list[Any]] = []
    plain_append = type(store)._append

    def recording(self: Any, ask: Any) -> Any:
        seen.append(list(ask.rows))
        return plain_append(self, ask)

    monkeypatch.setattr(type(store), "_append", recording)
    rows = [{"role": "user", "content": "hi"}]
    store.append(("session", "s", "ahead-seam"), rows)
    if isinstance(store, PostgresStore):  # the seam (``_rows_ahead``) wired in (decision 0163)
        assert [type(row) for row in seen[0]] == [DumpedRow]
        assert seen[0] == rows
    else:
        assert seen == [rows]
