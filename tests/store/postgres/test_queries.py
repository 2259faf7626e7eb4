"""PostgreSQL's append writes its tables itself, never through the views (decisions 0164, 0194).

Since migration 28 (decision 0159) ``buffer_calls`` and ``buffer_answers`` were views
whose writes ran a PL/pgSQL ``INSTEAD OF`` trigger; since decision 0164 an append's
answers and deletions were plain statements on the table, and since migration 35
(decision 0194) the views read ``buffer_rows`` too (an answer is its tool row) and have
no write trigger at all: every append below works and leaves what the pure ``append``
gives, each call id where the layout says (an answer's row, carrying its declaration or
not; a declaration of its own).
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
    """Where the call ids are: (call id, holds a declaration, holds an answer, healed) each.

    An answer is its tool row (holding the declaration it carries, if any); a declaration of
    its own is a row of ``buffer_call_ids`` (migration 35, decision 0194).
    """
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            """SELECT call_id, TRUE, FALSE, NULL::boolean FROM buffer_call_ids
            UNION ALL SELECT a.call_id, r.declared_pos IS NOT NULL, TRUE, a.healed FROM buffer_answers AS a
                JOIN buffer_rows AS r ON r.buffer_id = a.buffer_id AND r.pos = a.pos
            ORDER BY 1, 2, 3"""
        ).fetchall()


@pytest.fixture
def store(postgres_db_url: str) -> Iterator[PostgresStore]:
    """A store whose views have no write trigger (none since migration 35)."""
    made = PostgresStore(postgres_db_url)
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        triggers = conn.execute(
            """SELECT COUNT(*) FROM pg_trigger
            WHERE tgrelid IN ('buffer_calls'::regclass, 'buffer_answers'::regclass)"""
        ).fetchone()
        assert triggers == (0,)
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


def test_a_merged_write_s_own_with_list_is_lifted_and_its_parameters_numbered_first() -> None:
    """``calls_delete``'s WITH list (its call ids' rows) goes to the merged statement's top; its two parameters come before the header's five."""
    from flowmem.store.postgres.pipeline import _merged
    from flowmem.store.postgres.queries import SQL

    text = _merged("calls_delete+header_update", SQL)
    assert "%" not in text
    assert text.startswith("WITH calls_at AS (")
    assert text.index("calls_drop AS (") < text.index("w0 AS (")  # its own WITH lifted first
    assert "$2::bigint" in text and "$7" in text and "$8" not in text
