"""PostgreSQL keeps no index of declarations by position (migration 24, decision 0139).

A declared call is found by its id (the primary key) and, while unanswered, by the
partial index of open calls; the declarations of a row that is replaced, evicted or
moved are found by the call ids its body names. What the store keeps must be exactly
what ``flowmem.core.call_ids`` gives for each stored row, however the ids are spelled
(MEM-11), and a row's declarations must cost the same to find on a long buffer as on
a short one.
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import call_ids, prepare
from flowmem.store import Address

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")

from flowmem.store.editor import load_row  # noqa: E402
from flowmem.store.postgres import MIGRATIONS, PostgresStore  # noqa: E402
from tests.store.test_postgres_facts_plans import turn  # noqa: E402
from tests.store.undo_call_ids import undo_call_ids  # noqa: E402

# ids as a caller may spell them: padded with what str.strip trims (not only spaces),
# a number, under either key, at the top level or in the metadata
SPELLINGS: list[Any] = [" a ", "\u00a0b\u3000", "\x1cc\x85", 7, "d\u2028", "e"]


def _assistant(n: int) -> dict[str, Any]:
    first, second = SPELLINGS[n % len(SPELLINGS)], SPELLINGS[(n + 1) % len(SPELLINGS)]
    calls = [
        {"id": f"{first}{n}" if isinstance(first, str) else first + 10 * n},
        {"tool_call_id": f"{second}x{n}" if isinstance(second, str) else second + 10 * n + 1},
    ]
    if n % 2:
        return {"role": "assistant", "content": "", "tool_calls": calls}
    return {"role": "assistant", "content": "", "metadata": {"tool_calls": calls}}


def _stored(url: str, address: Address) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The declarations the rows' ids make, and the ones ``buffer_calls`` and the header's list hold."""
    with psycopg.connect(url, autocommit=True) as conn:
        bid = conn.execute(
            "SELECT id FROM buffers WHERE scope = %s AND scope_id = %s AND key = %s", tuple(address)
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT pos, body FROM buffer_rows WHERE buffer_id = %s", (bid,)
        ).fetchall()
        # a row's (its call answered) or, since migration 34 (decision 0190), the header's list
        held = conn.execute(
            """SELECT call_id, declared_pos FROM buffer_calls WHERE buffer_id = %s
            UNION ALL SELECT o.e ->> 0, (o.e ->> 1)::bigint FROM buffers AS b,
                json_array_elements(b.unanswered::json) AS o(e) WHERE b.id = %s""",
            (bid, bid),
        ).fetchall()
    made = {(cid, int(pos)) for pos, body in rows for cid in call_ids(load_row(body))}
    return made, {(str(cid), int(pos)) for cid, pos in held}


def test_mem_11_an_evicted_turn_takes_its_declarations_whatever_the_spelling_of_its_ids(
    postgres_store_url: str,
) -> None:
    """A window evicts old turns: the calls left declared are exactly the stored rows' ids."""
    store = PostgresStore(postgres_store_url)
    address = Address("user", "u", "spelled")
    try:
        for n in range(30):
            rows = [{"role": "user", "content": f"q{n}"}, _assistant(n)]
            store.append(address, prepare(rows, 1_755_000_000 + n), max_messages=9)
        made, held = _stored(postgres_store_url, address)
    finally:
        store.close()
    assert made and held == made


def test_a_row_s_declarations_are_found_in_as_many_pages_on_a_long_buffer_as_on_a_short_one(
    postgres_store_url: str,
) -> None:
    """Generic plans, no statistics: deleting a row's declarations reads by id, not the buffer's calls."""
    store = PostgresStore(postgres_store_url)
    try:
        rows = [prepare(turn(i), 1_755_000_000 + i)[0] for i in range(4_000)]
        short, long = Address("user", "u", "short"), Address("user", "u", "long")
        store.append(short, rows[:40])
        for start in range(0, len(rows), 500):
            store.append(long, rows[start : start + 500])
    finally:
        store.close()
    with psycopg.connect(postgres_store_url) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        few, many = _delete_pages(conn, short), _delete_pages(conn, long)
        conn.rollback()
    # the row, its ids, one key lookup each; a scan of the long buffer's 1,000 calls costs tens
    assert many <= few + 4, (few, many)


def _delete_pages(conn: Any, address: Address) -> int:
    """Pages a generic-plan ``calls_delete`` of the buffer's first declaring row touched."""
    import json

    from psycopg import sql

    from flowmem.store.postgres import SQL

    bid = conn.execute(
        "SELECT id FROM buffers WHERE scope = %s AND scope_id = %s AND key = %s", tuple(address)
    ).fetchone()[0]
    pos = conn.execute(
        "SELECT declared_pos FROM buffer_calls WHERE buffer_id = %s AND call_id = 'call_0'", (bid,)
    ).fetchone()[0]
    parts = SQL["calls_delete"].split("%s")
    numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
    name = f"calls_delete_{bid}"
    conn.execute(f"PREPARE {name} AS {numbered}")
    run = sql.SQL("EXECUTE {} ({}, {})").format(
        sql.Identifier(name), sql.Literal(bid), sql.Literal(pos)
    )
    for _ in range(6):  # past the point where a custom plan could still be chosen
        conn.execute(run)
    found = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + run).fetchone()[0]
    plan = (json.loads(found) if isinstance(found, str) else found)[0]["Plan"]
    gone = conn.execute(
        "SELECT COUNT(*) FROM buffer_calls WHERE buffer_id = %s AND declared_pos = %s", (bid, pos)
    )
    assert gone.fetchone()[0] == 0  # the row's declaration was deleted
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def test_a_database_from_before_keeps_its_declarations_and_loses_the_index_by_position(
    postgres_db_url: str,
) -> None:
    """Migration 24 on a database with open and answered calls: the same calls, one index fewer."""
    store = PostgresStore(postgres_db_url)
    address = Address("user", "u", "upgraded")
    try:
        store.append(
            address, prepare([turn(i) for i in range(6)], 1)
        )  # call_0 answered, call_1 open
    finally:
        store.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:  # as migration 23 left it
        undo_call_ids(conn)  # migration 28 (decision 0159) first
        conn.execute("DROP INDEX buffer_calls_moved")
        conn.execute("CREATE INDEX buffer_calls_pos ON buffer_calls (buffer_id, declared_pos)")
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 24")
        before = conn.execute(
            "SELECT call_id, declared_pos, answered FROM buffer_calls ORDER BY 1"
        ).fetchall()
    again = PostgresStore(postgres_db_url)
    try:
        assert again.schema_version() == len(MIGRATIONS)
        # the open call is healed by the next user turn, the answered one is not
        again.append(address, prepare([{"role": "user", "content": "next"}], 2), max_messages=5)
        kept = again.load(address)
    finally:
        again.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        indexes = {
            str(r[0])
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'buffer_call_ids'"
                " AND schemaname = current_schema()"
            ).fetchall()
        }
    assert [cid for cid, _, answered in before] == ["call_0", "call_1"] and before[1][2] is False
    # and since migration 26 (decision 0153) no index of the open calls: the header lists them;
    # since 28 (decision 0159) the declarations are rows of buffer_call_ids, found by call id
    assert indexes == {"buffer_call_ids_key", "buffer_call_ids_moved"}
    assert [row["role"] for row in kept][-3:] == ["assistant", "tool", "user"]
    made, held = _stored(postgres_db_url, address)
    assert held == made


def test_every_write_the_pipeline_may_merge_prepares_in_either_place(
    postgres_store_url: str,
) -> None:
    """A held write runs as a WITH sub-statement or as the last one: each must be valid as both.

    Pairs the pipeline never merges (one writes a table the other touches: ``Pipeline.run``)
    are not made; two writes' own WITH lists would share their names (decision 0164). A
    known path's ``?`` write follows the check's ``known`` CTE (``known_again``'s here).
    """
    from flowmem.store.postgres.pipeline import WRITES, _merged
    from flowmem.store.postgres.queries import SQL

    PostgresStore(postgres_store_url).close()  # the schema
    failed = []
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        for name in sorted(WRITES):
            for merged in (f"row_insert+{name}", f"call_insert+{name}", f"{name}+header_update"):
                first, last = (WRITES[part] for part in merged.split("+"))
                if first[1] & (last[0] | last[1]) or last[1] & first[0]:
                    continue  # never merged
                if (
                    "?" in merged
                ):  # the known path's writes read its check's ``known`` (decision 0165)
                    merged = f"known_again+{merged}"
                parts = _merged(merged, SQL).split("%s")
                text = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
                try:
                    conn.execute(f"PREPARE probe AS {text}")
                    conn.execute("DEALLOCATE probe")
                except psycopg.Error as exc:
                    failed.append((merged, str(exc).splitlines()[0]))
    assert failed == []
