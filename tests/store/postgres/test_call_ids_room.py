"""PostgreSQL's migration 32 (decision 0181): ``buffer_call_ids`` keeps half of each page free.

A call's row gets a second version when its answer comes (a HOT update), and the first
write to a page after a checkpoint carries the page's image, holes left out: at the
default fillfactor the last page was filled to the brim with rows and their dead
versions. At 50 an insert starts a new page once half of the last one is used, so the
page an append's declaration goes to holds at most about half a page of rows. An upgrade
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
# the bytes of the live row versions on each page of the table
_PAGE_BYTES = """SELECT (ctid::text::point)[0]::int AS page, SUM(pg_column_size(c.*))
    FROM buffer_call_ids AS c GROUP BY 1 ORDER BY 1"""


def test_the_call_ids_table_keeps_half_of_each_page_for_its_answers(postgres_db_url: str) -> None:
    store = PostgresStore(postgres_db_url)
    try:
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=50"],)
    finally:
        store.close()


def test_mem_1_declarations_fill_a_page_to_half_and_their_answers_stay_on_it(
    postgres_store_url: str,
) -> None:
    """300 calls, each answered: the declarations go on until half a page is used, each
    answer is a HOT update on its declaration's page (the rows keep their pages)."""
    store = PostgresStore(postgres_store_url)
    messages: list[dict[str, Any]] = []
    try:
        for n in range(300):
            cid = f"call_{n:04d}_" + "x" * 20  # a provider's call id is ~29 characters
            messages += [_call(cid), {"role": "tool", "content": "r", "tool_call_id": cid}]
        expected: list[dict[str, Any]] = []
        for at, message in enumerate(messages):
            rows = prepare([message], at)
            store.append(ADDRESS, rows)
            expected = append(expected, rows).messages
        assert store.load(ADDRESS) == expected
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            pages = conn.execute(_PAGE_BYTES).fetchall()
            answered = conn.execute(
                "SELECT COUNT(*) FROM buffer_call_ids WHERE ord IS NOT NULL AND answer_pos IS NOT NULL"
            ).fetchone()
        assert answered == (300,)  # one row per call, holding its answer
        assert len(pages) >= 5
        # every page's live rows fill at most about half of it (8 KB pages)
        assert max(size for _, size in pages) <= 4_400
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
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=50"],)
        assert store.check_integrity() == []
    finally:
        store.close()
