"""PostgreSQL without the index of non-tool rows (migration 13, decision 0068).

A result run's end is found on the primary key, once per declaring turn: healing
a turn's open calls reads that turn's run once, whatever the number of open calls.
"""

from __future__ import annotations

import pytest

from flowmem.core import prepare
from flowmem.store import Address

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.runs import half_answered  # noqa: E402
from tests.store.test_postgres_facts_plans import pages  # noqa: E402
from tests.store.undo_call_ids import undo_call_ids  # noqa: E402
from tests.store.undo_kept import undo_kept  # noqa: E402


def test_healing_reads_a_turns_run_once_not_once_per_open_call(postgres_store_url: str) -> None:
    """Ten times the calls, half answered: the pages grow with the run, not with run × open calls."""
    store = PostgresStore(postgres_store_url)
    few, many = Address("user", "u", "few-open"), Address("user", "u", "many-open")
    try:
        half_answered(store, few, 100)
        half_answered(store, many, 1_000)
    finally:
        store.close()
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        small = pages(conn, "append_facts@open", few, [])
        large = pages(conn, "append_facts@open", many, [])
    # once per turn: about 2.5x here; once per open call (what this replaced) ~25x
    assert large <= small * 10, (small, large)


def _indexes(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'buffer_rows'"
            " AND schemaname = current_schema()"
        ).fetchall()
    return {str(row[0]) for row in found}


def test_a_database_from_before_loses_the_index_and_keeps_its_rows(postgres_db_url: str) -> None:
    store = PostgresStore(postgres_db_url)
    address = Address("user", "u", "upgraded")
    store.append(address, prepare([{"role": "user", "content": "q"}], 1))
    store.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:  # as version 12 left it
        conn.execute(
            "CREATE INDEX buffer_rows_turns ON buffer_rows (buffer_id, pos) WHERE role <> 'tool'"
        )
        undo_kept(conn, sqlite=False)  # the adapters' kept JSON (decisions 0131, 0133) undone
        conn.execute("DROP TABLE buffer_repairs")  # migration 17 (the repair log) undone
        conn.execute("DROP FUNCTION flowmem_repairs_usage()")
        conn.execute("DROP INDEX adk_sessions_key")  # and migration 16 (ADK keys) undone
        conn.execute("ALTER TABLE adk_sessions DROP COLUMN adk_id")
        undo_call_ids(conn)  # and migration 28 (decision 0159)
        conn.execute("DROP INDEX buffer_calls_moved")  # and migration 24 (decision 0139) undone
        conn.execute("CREATE INDEX buffer_calls_pos ON buffer_calls (buffer_id, declared_pos)")
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 15")
    assert "buffer_rows_turns" in _indexes(postgres_db_url)
    again = PostgresStore(postgres_db_url)
    try:
        assert again.schema_version() == len(MIGRATIONS)
        again.append(address, prepare([{"role": "assistant", "content": "a"}], 1))
        assert [row["content"] for row in again.load(address)] == ["q", "a"]
    finally:
        again.close()
    assert "buffer_rows_turns" not in _indexes(postgres_db_url)
