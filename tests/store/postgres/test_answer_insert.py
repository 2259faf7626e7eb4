"""PostgreSQL's append writes an answer into ``buffer_call_ids``, not through its view (decision 0164).

Since migration 28 (decision 0159) ``buffer_answers`` is a view whose writes run a
PL/pgSQL ``INSTEAD OF`` trigger; an append's answer (a result, a healing insert's
placeholder) is now one plain statement: set on a row of its call id without an
answer, else a row of its own. With the view's trigger dropped every append below
still works and leaves what the pure ``append`` gives (before decision 0164 the first
result failed: a view without an ``INSTEAD OF INSERT`` trigger takes no insert).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.core import append, prepare

psycopg = pytest.importorskip("psycopg")

from flowmem.store import Address  # noqa: E402
from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.postgres.test_listed_calls import _call  # noqa: E402

pytestmark = pytest.mark.postgres

ADDRESS = Address("user", "alice", "chat")


def _result(cid: str, text: str = "r") -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": cid}


def _table(url: str) -> list[tuple[Any, ...]]:
    """The rows of ``buffer_call_ids``: (call id, holds a declaration, holds an answer, healed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            """SELECT call_id, ord IS NOT NULL, answer_pos IS NOT NULL, healed FROM buffer_call_ids
            ORDER BY 1, 2, 3"""
        ).fetchall()


@pytest.fixture
def store(postgres_db_url: str) -> Iterator[PostgresStore]:
    """A store whose ``buffer_answers`` view takes no write: its trigger dropped."""
    made = PostgresStore(postgres_db_url)
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER buffer_answers_write ON buffer_answers")
    try:
        yield made
    finally:
        made.close()


def _steps(store: PostgresStore, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append each message to the store and to the pure buffer; the two must be equal."""
    expected: list[dict[str, Any]] = []
    for at, message in enumerate(messages, 1):
        rows = prepare([message], at)
        store.append(ADDRESS, rows)
        expected = append(expected, rows).messages
        assert store.load(ADDRESS) == expected
    return expected


def test_mem_1_a_result_is_set_on_its_declarations_row_without_the_views_trigger(
    store: PostgresStore, postgres_db_url: str
) -> None:
    _steps(store, [_call("c1"), _result("c1"), _result("c1", "again"), _call("c2"), _result("c2")])
    assert _table(postgres_db_url) == [("c1", True, True, False), ("c2", True, True, False)]
    assert store.check_integrity() == []


def test_mem_2_a_result_before_its_call_keeps_a_row_of_its_own_without_the_views_trigger(
    store: PostgresStore, postgres_db_url: str
) -> None:
    _steps(store, [{"role": "user", "content": "u"}, _result("early"), _call("early")])
    assert _table(postgres_db_url) == [("early", False, True, False), ("early", True, False, None)]
    assert store.check_integrity() == []


def test_mem_3_a_healing_inserts_placeholder_is_set_on_its_calls_row_without_the_views_trigger(
    store: PostgresStore, postgres_db_url: str
) -> None:
    kept = _steps(store, [_call("open"), {"role": "user", "content": "next"}])
    assert [row["role"] for row in kept] == ["assistant", "tool", "user"]
    assert _table(postgres_db_url) == [("open", True, True, True)]
    assert store.check_integrity() == []
