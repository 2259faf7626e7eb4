"""PostgreSQL's migration 35 (issue 42 §1, decision 0194): an answer is its tool row, found by the rows' key.

A result is found by a partial index on ``buffer_rows`` (the buffer and the row's
``call_id``, what ``result_id`` reads of it, written by the editor with the row) and carries
the declaration it answered in its row's own columns, so an append writes nothing to
``buffer_call_ids`` for it. The checks here: every row is keyed as ``result_id`` reads it
and ``buffer_answers`` reads ``is_healed`` (MEM-11), the readers
find answers on the key (no scan of the buffer), and the upgrade from migration 34 keeps
open, answered, twice-declared and healed calls and lets a late result replace its
placeholder. The layout's oracle after random edits and appends is
``tests/store/postgres/test_carried.py`` (``carried.layout_faults``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("psycopg.sql")

from flowmem.core import append, is_healed, prepare, result_id  # noqa: E402
from flowmem.store import Address  # noqa: E402
from flowmem.store.editor import SqlBufferEditor  # noqa: E402
from flowmem.store.postgres import MIGRATIONS, SQL, PostgresStore  # noqa: E402
from flowmem.store.sqlengine import StatementRunner  # noqa: E402
from tests.store.carried_cases import call, result  # noqa: E402
from tests.store.postgres.carried import append_as_the_rules, layout_faults  # noqa: E402
from tests.store.postgres.undo_answered_rows import undo_answered_rows  # noqa: E402

pytestmark = pytest.mark.postgres

CHAT = Address("user", "alice", "chat")

# every shape of id a tool row may give: top level or metadata, strings trimmed of any
# Unicode space, "0" and 0 (absent), integers, floats, booleans, null, nested values
_IDS: list[Any] = [
    "c1", "  c1 ", "\u3000c\u00a0", "\tc\n", "", "   ", "0", " 0 ", "00", "-0", 0, 7, -3, 10**30,
    1.5, 2.0, True, False, None, [], {}, ["c"], {"a": 1}, "\u2028", "é", 'q"uote', "back\\slash",
]  # fmt: skip


def _bodies() -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    for given in _IDS:
        bodies.append({"role": "tool", "content": "r", "metadata": {"tool_call_id": given}})
        bodies.append(
            {
                "role": "tool",
                "content": "r",
                "tool_call_id": given,
                "metadata": {"tool_call_id": "m"},
            }
        )
        bodies.append({"role": "tool", "content": "r", "tool_call_id": given})
    bodies.append({"role": "tool", "content": "r", "metadata": ["tool_call_id"]})
    bodies.append({"role": "tool", "content": "r", "metadata": "x"})
    for healed in (True, False, "true", 1, None):
        bodies.append(
            {"role": "tool", "content": "r", "metadata": {"tool_call_id": "h", "healed": healed}}
        )
        bodies.append(
            {"role": "tool", "content": "r", "healed": healed, "metadata": {"tool_call_id": "h"}}
        )
    return bodies


def test_mem_11_each_row_is_keyed_by_the_call_id_result_id_reads_and_healed_as_is_healed(
    postgres_store_url: str,
) -> None:
    """The editor writes ``result_id`` of every row as its key (NULL: none), and ``buffer_answers`` reads ``is_healed``, on every shape of id."""
    PostgresStore(postgres_store_url).close()  # the schema
    bodies = _bodies()
    address = Address("global", "", "shapes")
    with psycopg.connect(postgres_store_url) as conn:
        editor = SqlBufferEditor(StatementRunner(conn, SQL), address)
        for body in bodies:
            editor.append_row(body)
        editor.flush()
        keyed = conn.execute(
            """SELECT r.call_id, a.healed FROM buffer_rows AS r LEFT JOIN buffer_answers AS a
            ON a.buffer_id = r.buffer_id AND a.pos = r.pos ORDER BY r.pos"""
        ).fetchall()
        conn.rollback()
    expected = [(result_id(b), None if result_id(b) is None else is_healed(b)) for b in bodies]
    assert keyed == expected
    assert {cid for cid, _ in keyed} > {"c1", "c", "7", "-3", str(10**30), "m", "h", None}


def test_mem_1_an_answer_is_found_on_the_rows_key_not_by_reading_the_buffer(
    postgres_store_url: str,
) -> None:
    """The answers' questions (the editor's, the facts') run on ``buffer_rows_answers``: an index scan, whatever the buffer's length."""
    store = PostgresStore(postgres_store_url)
    try:
        for n in range(30):
            cid = f"c{n}"
            store.append(
                CHAT, prepare([{"role": "user", "content": "q"}, call(cid), result(cid)], 1)
            )
    finally:
        store.close()
    with psycopg.connect(postgres_store_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("SET enable_seqscan = off")
        bid = conn.execute("SELECT id FROM buffers").fetchone()[0]
        for name, params, types in (
            ("answer_of", (bid, "c7"), "bigint, text"),
            ("is_declared", (bid, "c7"), "bigint, text"),
            ("answer_other", (bid, "c7", 0), "bigint, text, bigint"),
        ):
            numbered = (
                SQL[name].replace("%s", "{}").format(*(f"${i + 1}" for i in range(len(params))))
            )
            conn.execute(f"PREPARE q ({types}) AS {numbered}")
            given = psycopg.sql.SQL(", ").join(psycopg.sql.Literal(p) for p in params)
            explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE q ({})").format(given)
            plan = json.dumps(conn.execute(explain).fetchone()[0])
            conn.execute("DEALLOCATE q")
            assert "buffer_rows_answers" in plan, (name, plan)
        assert conn.execute(SQL["answer_of"], (bid, "c7")).fetchone() is not None


def test_mem_1_2_3_10_an_upgrade_from_34_keeps_open_answered_twice_declared_and_healed_calls(
    postgres_db_url: str,
) -> None:
    """Migration 35 on a database of migration 34: answers become their rows, carried declarations move onto them, own rows stay; then the rules hold."""
    store = PostgresStore(postgres_db_url)
    batches: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "q"}, call("h1")],
        [{"role": "user", "content": "healed"}],  # MEM-3: h1's placeholder
        [call("c0", "c1", "c2"), result("c0"), result("c1")],  # c0, c1 answered; c2 open
        [call("c2", "c3")],  # c2 declared again while open, c3 new: both open
        [result("c5"), call("c5", "c6")],  # c5 answered before its call: a row of its own
    ]
    pure: list[Any] = []
    try:
        for batch in batches:
            pure = append(pure, batch, now=1).messages
            store.append(CHAT, prepare(batch, 1))
        assert store.load(CHAT) == pure
    finally:
        store.close()
    with psycopg.connect(postgres_db_url, autocommit=True) as conn:
        undo_answered_rows(conn)  # what migration 34 wrote: an answer's row of buffer_call_ids
        old = conn.execute(
            """SELECT call_id, declared_pos IS NOT NULL, answer_pos IS NOT NULL, healed
            FROM buffer_call_ids ORDER BY call_id, declared_pos"""
        ).fetchall()
        # c0, c1, h1: an answer's row carrying its declaration; c5: an answer and a declaration of its own
        assert old == [
            ("c0", True, True, False), ("c1", True, True, False), ("c5", True, False, None),
            ("c5", False, True, False), ("h1", True, True, True),
        ]  # fmt: skip
        assert conn.execute("SELECT MAX(version) FROM flowmem_schema").fetchone() == (34,)
    again = PostgresStore(postgres_db_url)
    try:
        assert again.schema_version() == len(MIGRATIONS)
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert layout_faults(conn) == []
            own = conn.execute("SELECT call_id FROM buffer_call_ids").fetchall()
            assert own == [("c5",)]
            carried = conn.execute(
                """SELECT a.call_id, a.healed FROM buffer_answers AS a JOIN buffer_rows AS r
                ON r.buffer_id = a.buffer_id AND r.pos = a.pos WHERE r.declared_pos IS NOT NULL
                ORDER BY a.call_id"""
            ).fetchall()
            assert carried == [("c0", False), ("c1", False), ("h1", True)]
        assert again.load(CHAT) == pure
        later: list[list[dict[str, Any]]] = [
            # MEM-10: a late result replaces the placeholder; MEM-1: c0 and c5 again dropped
            [result("h1", "late"), result("c0"), result("c5")],
            [call("c1", "c5")],  # MEM-2: both known (one carried, one a row of its own): refused
            [call("c1", "c4")],  # MEM-2: c1 known, c4 new: appended
            [result("c3")],
            [{"role": "user", "content": "next"}],  # MEM-3: c2 (twice declared), c4 and c6 healed
        ]
        append_as_the_rules(again, CHAT, pure, later, postgres_db_url)
        assert again.check_integrity() == []
    finally:
        again.close()
