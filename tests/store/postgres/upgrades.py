"""An upgrade of a store holding calls in every state, checked against the pure ``append``.

``BEFORE`` (an answered call, a healed one with its placeholder, an open one, a second
open one) is stored on a fresh schema, the schema taken back below a migration by the
test's own ``take_back``, and the store opened again: its calls, answers and rows must
be what they were, and the rules must hold on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from flowmem.core import Message, append, is_healed, prepare, result_id
from flowmem.store import Address
from flowmem.store.postgres import MIGRATIONS, PostgresStore
from tests.store.postgres.test_listed_calls import BEFORE, _call
from tests.store.postgres.undo_carried import undo_carried

ADDRESS = Address("user", "alice", "chat")
CALLS = "SELECT call_id, declared_pos, ord, answered FROM buffer_calls ORDER BY 1, 2"
ANSWERS = "SELECT call_id, pos, healed FROM buffer_answers ORDER BY 1, 2"


def declarations(conn: psycopg.Connection[Any]) -> list[tuple[str, int, int]]:
    """Every declaration stored: a row's (``buffer_calls``) or the header's list's (open calls)."""
    rows = conn.execute("SELECT call_id, declared_pos, ord FROM buffer_calls").fetchall()
    listed = conn.execute(
        """SELECT o.e ->> 0, (o.e ->> 1)::bigint, (o.e ->> 2)::integer
        FROM buffers AS b, json_array_elements(b.unanswered::json) AS o(e)"""
    ).fetchall()
    return sorted({(str(c), int(p), int(o)) for c, p, o in [*rows, *listed]})


def step(
    store: PostgresStore,
    expected: list[dict[str, Any]],
    message: dict[str, Any],
    at: int,
    window: int = 0,
) -> list[dict[str, Any]]:
    """Append one message to the store and to the pure buffer; the two must be equal."""
    rows = prepare([message], at)
    store.append(ADDRESS, rows, max_messages=window)
    expected = append(expected, rows, max_messages=window).messages
    assert store.load(ADDRESS) == expected
    return expected


def upgraded(
    url: str, take_back: Callable[[psycopg.Connection[Any]], None]
) -> tuple[PostgresStore, list[Message]]:
    """``BEFORE`` stored, the schema taken back by ``take_back``, the store opened again (upgraded).

    Asserts the upgrade kept the calls, answers and rows, then that the rules hold on the
    upgraded rows: a duplicate result dropped (MEM-1), the placeholder replaced by the real
    result (MEM-10), a duplicate turn refused (MEM-2), an open call answered, the other
    healed by a user turn (MEM-3). Returns the open store (the caller closes it) and its buffer.
    """
    stored = append([], prepare(BEFORE, 1)).messages  # the healed placeholder of c_heal among them
    assert [result_id(r) for r in stored if is_healed(r)] == ["c_heal"]
    store = PostgresStore(url)
    try:
        store.append(ADDRESS, prepare(BEFORE, 1))
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        undo_carried(conn)  # migration 34 first (decision 0190): every declaration a row
        take_back(conn)
        calls, answers = conn.execute(CALLS).fetchall(), conn.execute(ANSWERS).fetchall()
        declared = declarations(conn)
    assert [c[0] for c in calls] == ["c_ans", "c_heal", "c_open", "c_two"]
    assert [(a[0], a[2]) for a in answers] == [("c_ans", False), ("c_heal", True)]
    store = PostgresStore(url)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        with psycopg.connect(url, autocommit=True) as conn:
            assert declarations(conn) == declared
            assert conn.execute(ANSWERS).fetchall() == answers
        assert store.load(ADDRESS) == stored
        expected = stored
        later = [
            {"role": "tool", "content": "again", "tool_call_id": "c_ans"},
            {"role": "tool", "content": "late", "tool_call_id": "c_heal"},
            _call("c_ans"),
            {"role": "tool", "content": "two", "tool_call_id": "c_two"},
            {"role": "user", "content": "and now?"},
        ]
        for n, message in enumerate(later, start=2):
            expected = step(store, expected, message, n)
        assert [result_id(r) for r in expected if is_healed(r)] == ["c_open"]
    except BaseException:
        store.close()
        raise
    return store, expected
