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

from flowmem.core import append, is_healed, prepare, result_id
from flowmem.store import Address

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.postgres.test_listed_calls import BEFORE, _call  # noqa: E402

pytestmark = pytest.mark.postgres

ADDRESS = Address("user", "alice", "chat")
_CALLS = "SELECT call_id, declared_pos, ord, answered FROM buffer_calls ORDER BY 1, 2"
_ANSWERS = "SELECT call_id, pos, healed FROM buffer_answers ORDER BY 1, 2"
_FILLFACTOR = "SELECT reloptions FROM pg_class WHERE oid = 'buffers'::regclass"


def _step(
    store: PostgresStore, expected: list[dict[str, Any]], message: dict[str, Any], at: int
) -> list[dict[str, Any]]:
    """Append one message to the store and to the pure buffer; the two must be equal."""
    rows = prepare([message], at)
    store.append(ADDRESS, rows)
    expected = append(expected, rows).messages
    assert store.load(ADDRESS) == expected
    return expected


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
            expected = _step(store, expected, _call(f"call_{n:04d}_" + "x" * 20), 2 * n)
            expected = _step(store, expected, {"role": "user", "content": f"q{n}"}, 2 * n + 1)
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
    stored = append([], prepare(BEFORE, 1)).messages  # the healed placeholder of c_heal among them
    assert [result_id(r) for r in stored if is_healed(r)] == ["c_heal"]
    store = PostgresStore(postgres_db_url)
    try:
        store.append(ADDRESS, prepare(BEFORE, 1))
    finally:
        store.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:  # as migration 30 left it
        conn.execute("ALTER TABLE buffers RESET (fillfactor)")
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 31")
        assert conn.execute(_FILLFACTOR).fetchone() == (None,)
        calls, answers = conn.execute(_CALLS).fetchall(), conn.execute(_ANSWERS).fetchall()
    assert [c[0] for c in calls] == ["c_ans", "c_heal", "c_open", "c_two"]
    assert [(a[0], a[2]) for a in answers] == [("c_ans", False), ("c_heal", True)]
    store = PostgresStore(postgres_db_url)
    try:
        assert store.schema_version() == len(MIGRATIONS) >= 31
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert conn.execute(_FILLFACTOR).fetchone() == (["fillfactor=50"],)
            assert conn.execute(_CALLS).fetchall() == calls
            assert conn.execute(_ANSWERS).fetchall() == answers
        assert store.load(ADDRESS) == stored
        # the rules on the upgraded rows: a duplicate result dropped (MEM-1), the placeholder
        # replaced by the real result (MEM-10), a duplicate turn refused (MEM-2), an open call
        # answered, the other healed by a user turn (MEM-3)
        expected = stored
        later = [
            {"role": "tool", "content": "again", "tool_call_id": "c_ans"},
            {"role": "tool", "content": "late", "tool_call_id": "c_heal"},
            _call("c_ans"),
            {"role": "tool", "content": "two", "tool_call_id": "c_two"},
            {"role": "user", "content": "and now?"},
        ]
        for n, message in enumerate(later, start=2):
            expected = _step(store, expected, message, n)
        assert [result_id(r) for r in expected if is_healed(r)] == ["c_open"]
        assert store.check_integrity() == []
    finally:
        store.close()
