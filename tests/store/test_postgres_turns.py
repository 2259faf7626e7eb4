"""PostgreSQL without the index of non-tool rows (migration 13, decision 0068).

A result run's end is found on the primary key, once per declaring turn: healing
a turn's open calls reads that turn's run once, whatever the number of open calls.
"""

from __future__ import annotations

import pytest

from flowmem.core import prepare, result_id
from flowmem.store import Address

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.test_postgres_facts_plans import pages  # noqa: E402


def _half_answered(store: PostgresStore, address: Address, calls: int) -> None:
    """A turn declaring ``calls`` calls, the first half of them answered."""
    declared = [{"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for n in range(calls)]  # fmt: skip
    turn = {"role": "assistant", "content": "", "tool_calls": declared}
    results = [{"role": "tool", "content": "r", "tool_call_id": f"c{n}"} for n in range(calls // 2)]
    store.append(address, prepare([{"role": "user", "content": "q"}, turn, *results], 1))


def test_healing_reads_a_turns_run_once_not_once_per_open_call(postgres_db_url: str) -> None:
    """Ten times the calls, half answered: the pages grow with the run, not with run × open calls."""
    store = PostgresStore(postgres_db_url)
    few, many = Address("user", "u", "few-open"), Address("user", "u", "many-open")
    try:
        _half_answered(store, few, 100)
        _half_answered(store, many, 1_000)
    finally:
        store.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        small = pages(conn, "append_facts@open", few, [])
        large = pages(conn, "append_facts@open", many, [])
    # once per turn: about 2.5x here; once per open call (what this replaced) ~25x
    assert large <= small * 10, (small, large)


def test_a_user_turn_heals_every_open_call_after_the_run(postgres_db_url: str) -> None:
    store = PostgresStore(postgres_db_url)
    address = Address("user", "u", "heal-after-run")
    try:
        _half_answered(store, address, 6)
        store.append(address, prepare({"role": "user", "content": "next"}, 1))
        rows = store.load(address)
    finally:
        store.close()
    roles = [(row["role"], result_id(row)) for row in rows]
    assert roles == [
        ("user", None),
        ("assistant", None),
        *[("tool", f"c{n}") for n in range(6)],  # c3..c5 healed right after c0..c2's run
        ("user", None),
    ]


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
        conn.execute("DELETE FROM flowmem_schema WHERE version = %s", (len(MIGRATIONS),))
    assert "buffer_rows_turns" in _indexes(postgres_db_url)
    again = PostgresStore(postgres_db_url)
    try:
        assert again.schema_version() == len(MIGRATIONS)
        again.append(address, prepare([{"role": "assistant", "content": "a"}], 1))
        assert [row["content"] for row in again.load(address)] == ["q", "a"]
    finally:
        again.close()
    assert "buffer_rows_turns" not in _indexes(postgres_db_url)
