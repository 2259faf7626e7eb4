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

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from flowmem.core import is_healed

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from tests.conftest import _admin_execute  # noqa: E402
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


@contextmanager
def _own_database(postgres_url: str) -> Iterator[str]:
    """A URL to a new database of its own, dropped on exit.

    The server prunes a page's dead versions only past the oldest snapshot of any
    connection to the same database: in the suite's shared one, another test's
    connection or an autovacuum ANALYZE of another schema's table can hold the horizon
    back for a moment, and a header's next version then lands on a new page.
    """
    name = f"t_{uuid.uuid4().hex[:16]}"
    _admin_execute(postgres_url, f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    finally:
        _admin_execute(postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _no_autovacuum(url: str) -> None:
    """Keep autovacuum (whose ANALYZE holds a snapshot) off every table of ``url``'s database."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables"
            " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        for (table,) in tables:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def test_the_headers_table_keeps_half_of_each_page_for_updates(postgres_db_url: str) -> None:
    store = PostgresStore(postgres_db_url)
    try:
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=50"],)
    finally:
        store.close()


def test_mem_3_a_buffer_healed_again_and_again_keeps_its_header_on_its_first_page(
    postgres_url: str,
) -> None:
    """Each heal logs a repair held in the header (up to ``HELD_CHARS``, then moved): the
    header's versions grow to ~2 KB, and every one of them is a HOT update on page 0.

    On a database of its own: what the test proves is the room the page keeps, which
    needs the server free to prune the header's dead versions (``_own_database``)."""
    with _own_database(postgres_url) as url:
        store = PostgresStore(url)
        _no_autovacuum(url)
        expected: list[dict[str, Any]] = []
        try:
            for n in range(60):
                expected = step(store, expected, _call(f"call_{n:04d}_" + "x" * 20), 2 * n)
                expected = step(store, expected, {"role": "user", "content": f"q{n}"}, 2 * n + 1)
            assert sum(1 for r in expected if is_healed(r)) == 60
            assert _header_pages(url) == {0}
            with psycopg.connect(url, autocommit=True) as conn:
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
