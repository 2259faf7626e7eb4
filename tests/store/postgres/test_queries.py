"""PostgreSQL's append writes ``buffer_call_ids`` itself, not through its views (decision 0164).

Since migration 28 (decision 0159) ``buffer_calls`` and ``buffer_answers`` are views
whose writes run a PL/pgSQL ``INSTEAD OF`` trigger; an append's answer (a result, a
healing insert's placeholder) and its deletions (a declaration's or an answer's: a
row replaced, a window's eviction) are now plain statements on the table. With the
views' triggers dropped every append below still works and leaves what the pure
``append`` gives (before decision 0164 a result was stored as a row of its own, the
simple view taking the insert, and a deletion failed).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.core import append, prepare

psycopg = pytest.importorskip("psycopg")

from flowmem.store import Address  # noqa: E402
from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.postgres.test_call_ids import _result  # noqa: E402
from tests.store.postgres.test_listed_calls import _call  # noqa: E402

pytestmark = pytest.mark.postgres

ADDRESS = Address("user", "alice", "chat")
_CLOCK = itertools.count(1)  # each message's time: later than the one before


def _table(url: str) -> list[tuple[Any, ...]]:
    """The rows of ``buffer_call_ids``: (call id, holds a declaration, holds an answer, healed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            """SELECT call_id, ord IS NOT NULL, answer_pos IS NOT NULL, healed FROM buffer_call_ids
            ORDER BY 1, 2, 3"""
        ).fetchall()


@pytest.fixture
def store(postgres_db_url: str) -> Iterator[PostgresStore]:
    """A store whose views of ``buffer_call_ids`` have no trigger: dropped."""
    made = PostgresStore(postgres_db_url)
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER buffer_answers_write ON buffer_answers")
        conn.execute("DROP TRIGGER buffer_calls_write ON buffer_calls")
    try:
        yield made
    finally:
        made.close()


def _steps(
    store: PostgresStore,
    messages: list[dict[str, Any]],
    window: int = 0,
    expected: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Append each message to the store and to the pure buffer; the two must be equal."""
    expected = expected or []
    for message in messages:
        at = next(_CLOCK)
        rows = prepare([message], at)
        store.append(ADDRESS, rows, max_messages=window)
        expected = append(expected, rows, max_messages=window).messages
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


def test_mem_3_a_late_result_replaces_its_placeholder_without_the_views_triggers(
    store: PostgresStore, postgres_db_url: str
) -> None:
    late = _steps(
        store, [_call("open"), {"role": "user", "content": "next"}, _result("open", "late")]
    )
    assert [row.get("content") for row in late if row["role"] == "tool"] == ["late"]
    assert _table(postgres_db_url) == [("open", True, True, False)]
    assert store.check_integrity() == []


def test_a_window_evicts_turns_and_results_without_the_views_triggers(
    store: PostgresStore, postgres_db_url: str
) -> None:
    """The turn goes first (its row keeps the answer), then its result: no row is left behind."""
    messages: list[dict[str, Any]] = []
    for n in range(5):
        messages += [
            {"role": "user", "content": f"q{n}"},
            _call(f"c{n}"),
            _result(f"c{n}"),
            {"role": "assistant", "content": f"a{n}"},
        ]
    kept = _steps(store, messages, window=3)
    assert [row["role"] for row in kept] == ["assistant", "tool", "assistant"]
    assert _table(postgres_db_url) == [("c4", True, True, False)]
    _steps(store, [{"role": "user", "content": "x"}] * 3, window=2, expected=kept)
    assert _table(postgres_db_url) == []
    assert store.check_integrity() == []


def test_a_merged_answer_reads_its_own_parameters_after_the_parts_before_it() -> None:
    """``%1``…``%4`` of the answer's statement are numbered after the row's six, each used twice."""
    from flowmem.store.postgres.pipeline import _merged
    from flowmem.store.postgres.queries import SQL

    text = _merged("row_insert+answer_insert+header_update", SQL)
    assert "%" not in text
    assert text.index("answer_set AS (") < text.index("w1 AS (")  # its own WITH lifted first
    assert [text.count(f"${n}::") for n in range(7, 11)] == [2, 2, 2, 2]
    assert "$11" in text and "$16" not in text  # the header's five after them
