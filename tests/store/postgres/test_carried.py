"""PostgreSQL's migrations 34 and 35 (issue 42 §1, decisions 0190, 0194): a call's declaration carried by its answer's row.

An open call's only entry is the header's list; the answer of a listed call carries the
declaration it answers: since migration 35 in its own tool row of ``buffer_rows`` (found by
the rows' ``call_id`` key), no row of ``buffer_call_ids``. Every declaration is in exactly
one place: the list (its call unanswered), its answer's row, or a row of its own. The
checks here recompute that from the stored rows alone (``carried.layout_faults``, the
oracle) after random edits of the editor (inserts in the middle of a turn, replacements,
deletions), after random appends through the store (its pipeline and its appends on
known facts), after a compaction and after the upgrade from migration 33; and a fresh
editor, reading only what is stored, answers every ``BufferEditor`` question as the
core's ``ListEditor`` does. The twin of ``tests/store/sqlite/test_carried.py``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

psycopg = pytest.importorskip("psycopg")

from flowmem.core import ListEditor, append, prepare  # noqa: E402
from flowmem.store import Address  # noqa: E402
from flowmem.store.editor import SqlBufferEditor  # noqa: E402
from flowmem.store.postgres import MIGRATIONS, SQL, PostgresStore  # noqa: E402
from flowmem.store.sqlengine import StatementRunner  # noqa: E402
from tests.store.carried_cases import appended_messages, call, compact_around_a_cut, result  # noqa: E402
from tests.store.edits import edit_like_the_list, edits, stored_rows  # noqa: E402
from tests.store.postgres.carried import append_as_the_rules, layout_faults  # noqa: E402
from tests.store.postgres.undo_carried import undo_carried  # noqa: E402

pytestmark = pytest.mark.postgres

CHAT = Address("user", "alice", "chat")
IDS = st.sampled_from(["a", "b", "c", "d"])
ROW = stored_rows(IDS, st.sampled_from(["", "x"]))
OPS = edits(ROW)


@contextmanager
def _editing(url: str) -> Iterator[tuple[Any, StatementRunner]]:
    """A transaction on the schema of ``url``, rolled back at the end (each example its own)."""
    with psycopg.connect(url) as conn:
        try:
            yield conn, StatementRunner(conn, SQL)
        finally:
            conn.rollback()


def _positions(conn: Any, address: Address) -> list[int]:
    return [
        int(p)
        for (p,) in conn.execute(
            """SELECT r.pos FROM buffer_rows AS r JOIN buffers AS b ON b.id = r.buffer_id
            WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s ORDER BY r.pos""",
            tuple(address),
        )
    ]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_mem_1_2_3_each_declaration_is_listed_or_in_one_row_after_any_edit(
    postgres_store_url: str, ops: list[Any]
) -> None:
    """After every edit the rows of ``buffer_call_ids`` match the buffer's, and a fresh editor answers like ListEditor."""
    PostgresStore(postgres_store_url).close()  # the schema
    edited = Address("global", "", f"edited-{uuid.uuid4().hex[:8]}")
    reference = ListEditor([])
    with _editing(postgres_store_url) as (conn, runner):
        edit_like_the_list(
            ops,
            SqlBufferEditor(runner, edited),
            reference,
            lambda: _positions(conn, edited),
            lambda: layout_faults(conn),
            lambda: SqlBufferEditor(runner, edited),
        )


_MESSAGE = appended_messages(IDS)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    appends=st.lists(st.lists(_MESSAGE, min_size=1, max_size=3), min_size=1, max_size=12),
    window=st.sampled_from([0, 0, 4]),
)
def test_mem_1_2_3_appends_through_the_store_keep_each_declaration_in_one_place(
    postgres_store_url: str, appends: list[list[dict[str, Any]]], window: int
) -> None:
    """The store's appends (pipelined, on known facts, healing, evicting) leave the oracle's layout and the pure append's rows."""
    store = PostgresStore(postgres_store_url)
    address = Address("user", "alice", f"prop-{uuid.uuid4().hex[:8]}")
    # one connection an example, and the example's buffer dropped at its end: the oracle
    # reads every buffer of the schema, which all examples of this test share
    conn = psycopg.connect(postgres_store_url, autocommit=True)
    try:
        expected: list[dict[str, Any]] = []
        evicted: tuple[str, ...] = ()
        for n, messages in enumerate(appends, start=1):
            rows = prepare(messages, n)
            got = store.append(address, rows, max_messages=window)
            done = append(expected, rows, max_messages=window, evicted=evicted)
            expected, evicted = done.messages, done.evicted
            assert (got.appended, got.count) == (done.appended, done.count)
            assert store.load(address) == expected
            assert layout_faults(conn) == []
    finally:
        conn.close()
        store.clear(address)
        store.close()


def _listed(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        text = conn.execute("SELECT unanswered FROM buffers").fetchone()[0]
    return [str(cid) for cid, _, _ in json.loads(text)]


def test_mem_1_a_call_and_its_result_write_no_call_id_row_the_result_s_row_carries_the_declaration(
    postgres_store_url: str,
) -> None:
    """Since migration 35 neither a call nor its result writes ``buffer_call_ids``: the result's own row carries the declaration, found by the rows' key."""
    store = PostgresStore(postgres_store_url)
    try:
        store.append(CHAT, prepare([{"role": "user", "content": "q"}, call("a", "b")], 1))
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            assert conn.execute("SELECT COUNT(*) FROM buffer_call_ids").fetchone() == (0,)
        assert _listed(postgres_store_url) == ["a", "b"]
        store.append(CHAT, prepare(result("a"), 2))
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            assert conn.execute("SELECT COUNT(*) FROM buffer_call_ids").fetchone() == (0,)
            found = conn.execute(
                """SELECT pos, declared_pos, declared_ord FROM buffer_rows
                WHERE declared_pos IS NOT NULL"""
            ).fetchall()
            answers = conn.execute("SELECT call_id, pos, healed FROM buffer_answers").fetchall()
        assert found == [(3 << 20, 2 << 20, 0)]
        assert answers == [("a", 3 << 20, False)]
        assert _listed(postgres_store_url) == ["b"]
        # MEM-1: the result again is dropped (found on the rows' key), nothing written
        assert store.append(CHAT, prepare(result("a"), 3)).appended == 0
    finally:
        store.close()


def test_a_compaction_keeps_the_rows_exact_around_its_cut(postgres_store_url: str) -> None:
    """Archived declarations leave the list and the answers' rows; a live one answered by an archived result is listed."""
    store = PostgresStore(postgres_store_url)

    def faults() -> list[str]:
        with psycopg.connect(postgres_store_url, autocommit=True) as conn:
            return layout_faults(conn)

    try:
        compact_around_a_cut(store, CHAT, faults, lambda: _listed(postgres_store_url))
    finally:
        store.close()


def test_an_upgrade_from_33_keeps_open_answered_twice_declared_and_healed_calls_and_a_placeholder(
    postgres_db_url: str,
) -> None:
    """Migration 34 on a database of migration 33: open calls' rows go, answered ones stay one row each."""
    store = PostgresStore(postgres_db_url)
    batches: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "q"}, call("h1")],
        [{"role": "user", "content": "healed"}],  # MEM-3: h1's placeholder
        [call("c0", "c1", "c2"), result("c0"), result("c1")],  # c0, c1 answered; c2 open
        [call("c2", "c3")],  # c2 declared again, c3 new: both open
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
        undo_carried(conn)  # what migration 33 wrote: a row per declaration
        conn.execute("ALTER TABLE buffer_call_ids SET (fillfactor = 90)")  # migration 32's room
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 34")
        assert conn.execute("SELECT COUNT(*) FROM buffer_calls").fetchone() == (6,)
        assert conn.execute("SELECT COUNT(*) FROM buffer_call_ids").fetchone() == (6,)
    again = PostgresStore(postgres_db_url)
    try:
        assert again.schema_version() == len(MIGRATIONS)
        with psycopg.connect(postgres_db_url, autocommit=True) as conn:
            assert layout_faults(conn) == []
            room = "SELECT reloptions FROM pg_class WHERE oid = 'buffer_call_ids'::regclass"
            assert conn.execute(room).fetchone() == (["fillfactor=100"],)  # rows never updated
            carried = conn.execute(
                """SELECT a.call_id, a.healed FROM buffer_answers AS a JOIN buffer_rows AS r
                ON r.buffer_id = a.buffer_id AND r.pos = a.pos WHERE r.declared_pos IS NOT NULL
                ORDER BY a.call_id"""
            ).fetchall()
            assert carried == [("c0", False), ("c1", False), ("h1", True)]
            assert conn.execute("SELECT COUNT(*) FROM buffer_call_ids").fetchone() == (0,)
        assert again.load(CHAT) == pure
        later: list[list[dict[str, Any]]] = [
            # MEM-10: a late result replaces the placeholder; MEM-1: c0 again dropped
            [result("h1", "late"), result("c0")],
            [call("c1", "c4")],  # MEM-2: c1 known, c4 new: appended
            [result("c3")],
            [{"role": "user", "content": "next"}],  # MEM-3: c2 (twice declared) and c4 healed
        ]
        append_as_the_rules(again, CHAT, pure, later, postgres_db_url)
        assert again.check_integrity() == []
    finally:
        again.close()


def test_mem_2_a_call_healed_then_declared_again_in_one_append_is_known(
    postgres_store_url: str,
) -> None:
    """The facts' ``declared`` reads the header's list: an open call healed by the append's
    user turn and declared again after it is a duplicate turn (MEM-2), as in the pure append."""
    turn = [{"role": "user", "content": "again"}, call("c", "a"), result("d")]
    store = PostgresStore(postgres_store_url)
    expected: list[Any] = []
    evicted: tuple[str, ...] = ()
    try:
        for n in (1, 2):
            rows = prepare(turn, n)
            got = store.append(CHAT, rows, max_messages=4)
            done = append(expected, rows, max_messages=4, evicted=evicted)
            expected, evicted = done.messages, done.evicted
            assert (got.appended, got.count) == (done.appended, done.count)
            assert store.load(CHAT) == expected
    finally:
        store.close()
