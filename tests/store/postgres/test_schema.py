"""PostgreSQL's migration 31 (decision 0175): the headers' table keeps room on its pages.

A header's update is HOT (no new index entry, one WAL record) only when its new version
fits on its page. A header holding its repair log (decision 0148, up to ``HELD_CHARS``)
is ~2 KB a version; at the default fillfactor the server prunes a page's dead versions
only once less than a tenth of it is free, so the next version often did not fit: a
new page, an entry in each of the header's three indexes, and their full-page images
after a checkpoint. With fillfactor 50 the page is pruned once half of it is used, and
a heal's header stays where it is. An upgrade from 30 keeps every declaration, answer,
healed call and placeholder; the rules are checked against the pure ``append``.
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import is_healed

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.store.postgres.test_listed_calls import _call  # noqa: E402
from tests.store.postgres.upgrades import step, upgraded  # noqa: E402

pytestmark = pytest.mark.postgres

_FILLFACTOR = "SELECT reloptions FROM pg_class WHERE oid = 'buffers'::regclass"


def _header_pages(url: str) -> set[int]:
    """The pages the buffers' live headers are on now."""
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            int(str(at).strip("()").split(",")[0])
            for (at,) in conn.execute("SELECT ctid FROM buffers").fetchall()
        }


def test_the_headers_table_keeps_half_of_each_page_for_updates(postgres_db_url: str) -> None:
    store = PostgresStore(postgres_db_url)
    try:
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=50"],)
    finally:
        store.close()


def test_mem_3_a_buffer_healed_again_and_again_keeps_its_header_on_its_first_page(
    postgres_db_url: str,
) -> None:
    """Each heal logs a repair held in the header (up to ``HELD_CHARS``, then moved): the
    header's versions grow to ~2 KB, and every one of them is a HOT update on page 0."""
    store = PostgresStore(postgres_db_url)
    expected: list[dict[str, Any]] = []
    try:
        for n in range(60):
            expected = step(store, expected, _call(f"call_{n:04d}_" + "x" * 20), 2 * n)
            expected = step(store, expected, {"role": "user", "content": f"q{n}"}, 2 * n + 1)
        assert sum(1 for r in expected if is_healed(r)) == 60
        assert _header_pages(postgres_db_url) == {0}
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            # the repair log moved to its table in batches past the header's bound
            assert conn.execute("SELECT COUNT(*) FROM buffer_repairs").fetchone()[0] > 0  # type: ignore[index]
        assert store.check_integrity() == []
    finally:
        store.close()


def test_mem_3_an_upgrade_from_30_keeps_every_declaration_answer_healed_call_and_placeholder(
    postgres_db_url: str,
) -> None:
    def as_30_left_it(conn: psycopg.Connection[Any]) -> None:
        conn.execute("ALTER TABLE buffers RESET (fillfactor)")
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 31")
        assert conn.execute(_FILLFACTOR).fetchone() == (None,)

    store, _ = upgraded(postgres_db_url, as_30_left_it)
    try:
        assert store.schema_version() >= 31
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=50"],)
        assert store.check_integrity() == []
    finally:
        store.close()
