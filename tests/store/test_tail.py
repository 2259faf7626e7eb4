"""``read_tail`` on every backend (issue 28 §1): a buffer read from its end, with its token counts.

Part of the conformance suite: the ``store`` fixture runs each test on memory,
SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import prepare
from flowmem.core.tokens import estimate_tokens
from flowmem.errors import BufferChangedError, InvalidInputError
from flowmem.store import Address, Store, open_store
from tests.store.test_conformance import call, call_both, result, stored_append, user

A = Address("session", "s1", "chat")


def _history() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for n in range(30):
        rows += [user(f"question {n} " * (n % 5 + 1)), call_both(f"a{n}", f"b{n}")]
        rows += [result(f"b{n}", "x" * n), result(f"a{n}")]
        if n % 10 == 3:
            rows.append({"role": "system", "content": f"note {n}"})
    return rows


def _tokens(store: Store, address: Address) -> list[int]:
    return [estimate_tokens(row) for row in store.load(address)]


def test_read_tail_gives_the_rows_newest_first_with_their_counts(store: Store) -> None:
    stored_append(store, A, _history())
    rows = store.load(A)
    tail = store.read_tail(A, batch=7)
    read = list(tail.rows)
    assert [item.row for item in read] == rows[::-1]
    assert [item.tokens for item in read] == [estimate_tokens(row) for row in rows][::-1]
    cursors = [item.cursor for item in read]
    assert cursors == sorted(cursors, reverse=True) and len(set(cursors)) == len(cursors)
    assert tail.count == len(rows) and tail.tokens == sum(_tokens(store, A))
    assert [item.row for item in tail.systems] == [r for r in rows if r["role"] == "system"]
    by_cursor = {item.cursor: item.row for item in read}
    assert all(by_cursor[item.cursor] == item.row for item in tail.systems)


def test_read_tail_of_a_missing_buffer_is_empty(store: Store) -> None:
    tail = store.read_tail(A)
    assert (tail.count, tail.tokens, tail.systems, list(tail.rows)) == (0, 0, [], [])


def test_read_tail_refuses_a_bad_batch(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        store.read_tail(A, batch=0)


def test_a_write_between_two_batches_is_seen_or_the_read_is_one_snapshot(store: Store) -> None:
    stored_append(store, A, [user(f"m{n}") for n in range(40)])
    before = store.load(A)
    tail = store.read_tail(A, batch=4)
    first = [next(tail.rows) for _ in range(4)]
    stored_append(store, A, [user("late")])
    try:
        rest = list(tail.rows)
    except BufferChangedError:
        return  # the SQL stores: read again
    assert [item.row for item in first + rest] == before[::-1]  # memory: one snapshot


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "system", "call", "late", "heal"]), st.integers(0, 9)),
        max_size=25,
    ),
    st.integers(0, 12),
)
def test_the_kept_total_follows_every_kind_of_append(
    store: Store, steps: list[tuple[str, int]], window: int
) -> None:
    """Appends that evict, heal, replace a placeholder or add: the total is the rows' sum."""
    address = Address("session", "prop", f"k{abs(hash((tuple(steps), window)))}")
    for n, (kind, size) in enumerate(steps):
        if kind == "user":
            batch: list[dict[str, Any]] = [user("u" * size * 9)]
        elif kind == "system":
            batch = [{"role": "system", "content": "s" * size}]
        elif kind == "call":
            batch = [call(f"c{n}"), result(f"c{n}", "r" * size * 5)]
        elif kind == "late":  # the result of the open call of an earlier step, if any
            batch = [result(f"c{n - 1}", "late" * size)]
        else:  # an open call, healed by the next turn
            batch = [call(f"h{n}"), user("next")]
        store.append(address, prepare(batch, None), window)
    tail = store.read_tail(address, batch=3)
    read = list(tail.rows)
    assert tail.tokens == sum(_tokens(store, address)) == sum(item.tokens for item in read)
    assert tail.count == store.count(address) == len(read)
    store.clear(address)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_rows_stored_before_migration_13_are_counted_when_read(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite" else request.getfixturevalue("postgres_db_url")
    store = open_store(url)
    try:
        stored_append(store, A, _history())
        expected = sum(_tokens(store, A))
        _forget_counts(url, tmp_path)
        tail = store.read_tail(A, batch=5)
        assert tail.tokens == expected
        assert [item.tokens for item in tail.rows] == _tokens(store, A)[::-1]
        stored_append(store, A, [user("after")])  # the total stays unknown, still counted
        assert store.read_tail(A).tokens == sum(_tokens(store, A))
    finally:
        store.close()


def _forget_counts(url: str, tmp_path: Path) -> None:
    """Make the database look like one written before migration 13 (no counts)."""
    statements = ("UPDATE buffer_rows SET tokens = NULL", "UPDATE buffers SET tokens = NULL")
    if url.startswith("sqlite"):
        with sqlite3.connect(tmp_path / "old.db") as conn:
            for statement in statements:
                conn.execute(statement)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)
