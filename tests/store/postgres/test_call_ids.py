"""PostgreSQL's migration 28 (decision 0159): a call's declaration and its answer in one row.

An answer is set on a row of its call id that has none (one row per call and answer,
no row and key of its own); a declaration's deletion keeps the answer its row holds;
an upgrade from migration 27 keeps every declaration, answer, healed call and
placeholder. The rules (MEM-1, MEM-2, MEM-3, MEM-10, the window) are checked against
the pure ``append``.
"""

from __future__ import annotations

from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.postgres.test_listed_calls import _call  # noqa: E402
from tests.store.postgres.upgrades import step, upgraded  # noqa: E402
from tests.store.undo_call_ids import undo_call_ids  # noqa: E402

pytestmark = pytest.mark.postgres


def _result(cid: str, text: str = "r") -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": cid}


def _table(url: str) -> list[tuple[Any, ...]]:
    """Where the call ids are: (call id, holds a declaration, holds an answer) each.

    Since migration 35 (decision 0194) an answer is its tool row (holding the declaration it
    carries, if any), and ``buffer_call_ids`` holds declarations of their own.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            """SELECT call_id, TRUE, FALSE FROM buffer_call_ids
            UNION ALL SELECT a.call_id, r.declared_pos IS NOT NULL, TRUE FROM buffer_answers AS a
                JOIN buffer_rows AS r ON r.buffer_id = a.buffer_id AND r.pos = a.pos
            ORDER BY 1, 2, 3"""
        ).fetchall()


def test_mem_1_a_result_is_set_on_its_declarations_row_and_a_second_result_is_dropped(
    postgres_store_url: str,
) -> None:
    store = PostgresStore(postgres_store_url)
    try:
        expected = step(store, [], _call("c1"), 1)
        expected = step(store, expected, _result("c1"), 2)
        assert _table(postgres_store_url) == [("c1", True, True)]  # one row: no answer row and key
        expected = step(store, expected, _result("c1", "again"), 3)  # MEM-1
        assert [r["content"] for r in expected if r["role"] == "tool"] == ["r"]
        assert _table(postgres_store_url) == [("c1", True, True)]
        assert store.check_integrity() == []
    finally:
        store.close()


def test_mem_2_a_result_before_its_call_keeps_a_row_of_its_own_and_the_turn_again_is_refused(
    postgres_store_url: str,
) -> None:
    store = PostgresStore(postgres_store_url)
    try:
        expected = step(store, [], {"role": "user", "content": "u"}, 1)
        expected = step(
            store, expected, _result("early"), 2
        )  # no declaration yet: a row of its own
        expected = step(store, expected, _call("early"), 3)
        assert _table(postgres_store_url) == [("early", False, True), ("early", True, False)]
        expected = step(store, expected, _call("early"), 4)  # MEM-2: declared already
        expected = step(store, expected, {"role": "user", "content": "v"}, 5)  # nothing to heal
        assert [r["role"] for r in expected] == ["user", "tool", "assistant", "user"]
    finally:
        store.close()


def test_mem_3_a_window_evicting_an_answered_turn_keeps_its_answer_until_it_goes_too(
    postgres_store_url: str,
) -> None:
    """The turn goes first (its row keeps the answer), then its result: no row is left behind."""
    store = PostgresStore(postgres_store_url)
    try:
        expected: list[dict[str, Any]] = []
        at = 0
        for n in range(6):
            for message in (
                {"role": "user", "content": f"q{n}"},
                _call(f"c{n}"),
                _result(f"c{n}"),
                {"role": "assistant", "content": f"a{n}"},
            ):
                at += 1
                expected = step(store, expected, message, at, window=5)
        # an open call, healed by the next user turn (MEM-3), then evicted with its placeholder
        for message in (
            _call("open"),
            {"role": "user", "content": "next"},
            {"role": "user", "content": "x"},
        ):
            at += 1
            expected = step(store, expected, message, at, window=3)
        kept = {r.get("tool_call_id") for r in expected if r["role"] == "tool"}
        assert {row[0] for row in _table(postgres_store_url)} == kept - {None}
        assert store.check_integrity() == []
    finally:
        store.close()


def test_mem_3_an_upgrade_from_27_keeps_every_declaration_answer_healed_call_and_placeholder(
    postgres_db_url: str,
) -> None:
    def as_27_left_it(conn: psycopg.Connection[Any]) -> None:
        undo_call_ids(conn)
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 28")

    store, expected = upgraded(postgres_db_url, as_27_left_it)
    try:  # then a window evicting them
        expected = step(store, expected, {"role": "user", "content": "last"}, 9, window=4)
        assert store.check_integrity() == []
        kept = {r.get("tool_call_id") for r in expected if r["role"] == "tool"}
        assert {row[0] for row in _table(postgres_db_url)} == kept - {None}
    finally:
        store.close()
