"""PostgreSQL's migration 32 (decision 0181): ``buffer_call_ids`` keeps a tenth of each page for answers.

A call's row gets a second version when its answer comes: a HOT update (one record, no
key entry) only while the new version fits on the row's page. Once a vacuum has recorded
the room pruning left on older pages, new declarations fill it; at fillfactor 100 an
answer then often no longer fit and went to another page with a new key entry (and that
page's image after a checkpoint). At 90 each page keeps room for its answers. An upgrade
from 31 keeps every declaration, answer, healed call and placeholder; the rules are
checked against the pure ``append``.
"""

from __future__ import annotations

from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from flowmem.core import append, prepare  # noqa: E402
from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.postgres.test_listed_calls import _call  # noqa: E402
from tests.store.postgres.upgrades import ADDRESS, upgraded  # noqa: E402

pytestmark = pytest.mark.postgres

_FILLFACTOR = "SELECT reloptions FROM pg_class WHERE oid = 'buffer_call_ids'::regclass"
_PAGE_OF = "SELECT (ctid::text::point)[0]::int FROM buffer_call_ids WHERE call_id = %s"
_CARRIED = "SELECT declared_pos FROM buffer_rows WHERE call_id = %s AND declared_pos IS NOT NULL"


def _pair(n: int) -> tuple[str, list[dict[str, Any]]]:
    cid = f"call_{n:05d}_" + "x" * 19  # a provider's call id is ~29 characters
    return cid, [_call(cid), {"role": "tool", "content": f"r{n}", "tool_call_id": cid}]


def test_the_call_ids_table_keeps_no_room_for_answers_once_they_carry_their_declarations(
    postgres_db_url: str,
) -> None:
    """Migration 32 kept a tenth of each page for the answers' updates; since 34 (decision
    0190) an answer is a row of its own, never an update, and the room goes."""
    store = PostgresStore(postgres_db_url)
    try:
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=100"],)
    finally:
        store.close()


def test_mem_1_after_a_vacuum_each_answer_is_one_row_holding_its_declaration(
    postgres_db_url: str,
) -> None:
    """300 answered calls, a VACUUM (the free-space map learns the pruned room), then 80
    more: each declaration is listed only and its answer one row holding both, so no
    answer moves a declaration's row to another page (since migration 34, decision 0190;
    migration 32's room kept the answers' updates on their declarations' pages before);
    since migration 35 (decision 0194) that row is the result's own, none of the table's."""
    store = PostgresStore(postgres_db_url)
    expected: list[dict[str, Any]] = []
    at = 0

    def add(message: dict[str, Any]) -> None:
        nonlocal expected, at
        rows = prepare([message], at)
        store.append(ADDRESS, rows)
        expected = append(expected, rows).messages
        at += 1

    try:
        for n in range(300):
            for message in _pair(n)[1]:
                add(message)
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            conn.execute("VACUUM buffer_call_ids")
            moved = []
            for n in range(300, 380):
                cid, (call, result) = _pair(n)
                add(call)
                declared = conn.execute(_PAGE_OF, (cid,)).fetchall()
                add(result)
                # since migration 35 (decision 0194) the answer's own row holds the declaration
                assert conn.execute(_PAGE_OF, (cid,)).fetchall() == []
                assert len(conn.execute(_CARRIED, (cid,)).fetchall()) == 1
                if declared:  # a row before its answer: one the answer would update
                    moved.append(cid)
        assert moved == []
        assert store.load(ADDRESS) == expected
        assert store.check_integrity() == []
    finally:
        store.close()


def test_mem_3_an_upgrade_from_31_keeps_every_declaration_answer_healed_call_and_placeholder(
    postgres_db_url: str,
) -> None:
    def as_31_left_it(conn: psycopg.Connection[Any]) -> None:
        conn.execute("ALTER TABLE buffer_call_ids RESET (fillfactor)")
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 32")
        assert conn.execute(_FILLFACTOR).fetchone() == (None,)

    store, _ = upgraded(postgres_db_url, as_31_left_it)
    try:
        assert store.schema_version() >= 32
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            # 32's room, then 34's none (decision 0190)
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=100"],)
        assert store.check_integrity() == []
    finally:
        store.close()
