"""A window's facts read in SQL (``read_tail_facts``, issue 38 §2) against the rows parsed (``plain_facts``).

SQLite gives a row's window facts from its stored role and count and the call ids
``buffer_calls`` indexes, so a window's cut parses no JSON for most rows; the oracle
is ``read_tail``'s rows parsed and their facts taken as ``fast_row_facts`` takes them.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core.window_cut import CutScan
from flowmem.errors import StoreCorruptError, WindowTooSmallError
from flowmem.store import Address, open_store
from flowmem.store.sqlite.store import SqliteStore
from flowmem.store.tail import FactsTail, SupportsTailFacts, plain_facts
from flowmem.store.window import WindowAsk, read_cut, tail_facts
from tests.core.test_window import histories
from tests.store.test_conformance import stored_append

_ADDRESSES = itertools.count()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    """One SQLite store for the module: each example writes its own buffer."""
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('facts') / 'f.db'}")
    assert isinstance(store, SqliteStore)
    yield store
    store.close()


def _read(tail: FactsTail) -> tuple[Any, ...]:
    return tail.count, tail.tokens, tail.systems, list(tail.facts), tail.version


def _odd_rows() -> st.SearchStrategy[list[dict[str, Any]]]:
    """Rows the append rules keep or repair: ids twice in a turn, blank and padded ids, unknown roles."""
    cid = st.sampled_from(["a", " a ", "b", "0", "", "c d"])
    call = st.builds(lambda i: {"id": i, "function": {"name": "f", "arguments": "{}"}}, cid)
    assistant = st.builds(lambda calls: {"role": "assistant", "content": "x", "tool_calls": calls}, st.lists(call, max_size=3))
    tool = st.builds(lambda i: {"role": "tool", "content": "r", "tool_call_id": i}, cid)
    other = st.sampled_from([{"role": "user", "content": "u"}, {"role": "system", "content": "s"}])
    return st.lists(st.one_of(assistant, tool, other), max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(histories().map(lambda h: h[0]), _odd_rows()), st.integers(0, 300), st.integers(1, 9))
def test_the_facts_sqlite_reads_in_sql_are_the_facts_of_the_rows_parsed(
    sqlite_store: SqliteStore, rows: list[dict[str, Any]], budget: int, batch: int
) -> None:
    address = Address("session", f"s{next(_ADDRESSES)}", "chat")
    if rows:
        stored_append(sqlite_store, address, rows)
    fast = sqlite_store.read_tail_facts(address, batch, budget)
    plain = plain_facts(sqlite_store.read_tail(address, batch, budget))
    assert _read(fast) == _read(plain)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories().map(lambda h: h[0]), st.integers(0, 300), st.booleans(), st.sampled_from([None, "user"]))
def test_a_cut_read_in_sql_is_the_cut_of_the_rows_parsed(
    sqlite_store: SqliteStore, rows: list[dict[str, Any]], budget: int, keep: bool, first: str | None
) -> None:
    """``read_cut`` through the seam and a ``CutScan`` fed the parsed rows' facts find the same cut."""
    address = Address("session", f"s{next(_ADDRESSES)}", "chat")
    if rows:
        stored_append(sqlite_store, address, rows)
    plain = plain_facts(sqlite_store.read_tail(address, 64, budget))
    scan = CutScan(budget, {item.cursor: item.tokens for item in plain.systems}, keep, first)
    scan.feed_rows(plain.facts)
    try:
        expected = scan.cut(plain.count, plain.tokens)
    except WindowTooSmallError as refused:
        with pytest.raises(WindowTooSmallError) as also:
            read_cut(sqlite_store, address, WindowAsk(budget, keep, first))
        assert str(also.value) == str(refused)
        return
    assert read_cut(sqlite_store, address, WindowAsk(budget, keep, first)).cut == expected


class WithoutSeam:
    """A store seen without ``read_tail_facts`` (as PostgreSQL's is): its other calls pass through."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name == "read_tail_facts":
            raise AttributeError(name)
        return getattr(self.store, name)


def test_only_a_store_that_reads_facts_in_sql_takes_the_seam(tmp_path: Path) -> None:
    memory = open_store("memory://")  # SQLite on a private database (decision 0138)
    sqlite = open_store(f"sqlite:///{tmp_path / 'f.db'}")
    plain = WithoutSeam(sqlite)
    try:
        assert isinstance(sqlite, SupportsTailFacts) and isinstance(memory, SupportsTailFacts)
        assert not isinstance(plain, SupportsTailFacts)
        address = Address("session", "s", "chat")
        stored_append(sqlite, address, [{"role": "user", "content": "hi"}])
        stored_append(memory, address, [{"role": "user", "content": "hi"}])
        for store in (memory, sqlite, plain):
            assert [f.role for _, f in tail_facts(store, address, 10).facts] == ["user"]
    finally:
        sqlite.close()
        memory.close()


def _damage(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)
    conn.close()


def test_a_row_without_a_stored_count_or_with_a_damaged_text_is_parsed_as_the_plain_read_parses_it(
    tmp_path: Path,
) -> None:
    """An uncounted row is counted from its text; a text that is not JSON is store_corrupt on both paths."""
    path = tmp_path / "d.db"
    address = Address("session", "s", "chat")
    store = open_store(f"sqlite:///{path}")
    rows = [{"role": "user", "content": f"q{n} " * n} for n in range(6)]
    stored_append(store, address, rows)
    store.close()
    _damage(path, "UPDATE buffer_rows SET tokens = NULL WHERE pos % 2 = 0")
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    try:
        assert _read(store.read_tail_facts(address, 2)) == _read(plain_facts(store.read_tail(address, 2)))
    finally:
        store.close()
    _damage(path, "UPDATE buffer_rows SET body = '{\"role\": \"us' WHERE pos = (SELECT max(pos) FROM buffer_rows)")
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    try:
        for tail in (store.read_tail_facts(address, 2), plain_facts(store.read_tail(address, 2))):
            with pytest.raises(StoreCorruptError):
                list(tail.facts)
    finally:
        store.close()
