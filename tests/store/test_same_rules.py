"""The stored append and the pure append are the same rules (hypothesis).

Two proofs: random histories appended through every backend load exactly what the
core's pure ``append`` returns (rows, count, appended); and the SQL editor answers
every ``BufferEditor`` question exactly like the core's ``ListEditor`` under random
edits, including inserts in the middle of a turn's rows.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowmem.core import ListEditor, Message, append, prepare
from flowmem.service import MemoryService
from flowmem.store import Address, Quotas, Store, open_store
from flowmem.store import postgres as pg_backend
from flowmem.store import sqlite as sqlite_backend
from flowmem.store.editor import SqlBufferEditor
from flowmem.store.sqlbase import StatementRunner
from tests.store.edits import apply_edit, edits, stored_rows

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_keys = itertools.count()

IDS = st.sampled_from(["a", "b", "c", "d", " b ", 7])
CONTENT = st.sampled_from(["", "x", "hello", "ünï"])


def _assistant(content: str, ids: list[Any], flat: bool) -> dict[str, Any]:
    calls = [{("id" if i % 2 else "tool_call_id"): cid, "name": "f"} for i, cid in enumerate(ids)]
    row: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        if flat:
            row["tool_calls"] = calls
        else:
            row["metadata"] = {"tool_calls": calls}
    return row


def _tool(content: str, cid: Any, healed: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"role": "tool", "content": content, "tool_call_id": cid}
    if healed:
        row["metadata"] = {"healed": True}
    return row


MESSAGE = st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, CONTENT),
    st.builds(lambda c: {"role": "system", "content": c}, CONTENT),
    st.builds(_assistant, CONTENT, st.lists(IDS, max_size=3), st.booleans()),
    st.builds(_assistant, CONTENT, st.lists(IDS, max_size=3), st.booleans()),
    st.builds(_tool, CONTENT, IDS, st.booleans()),
    st.builds(_tool, CONTENT, IDS, st.just(False)),
)
BATCHES = st.lists(st.lists(MESSAGE, min_size=1, max_size=4), min_size=1, max_size=8)


@SETTINGS
@given(batches=BATCHES, window=st.sampled_from([0, 0, 3, 5]))
def test_mem_1_2_3_10_stored_append_equals_pure_append(
    store: Store, batches: list[list[dict[str, Any]]], window: int
) -> None:
    address = Address("user", "7", f"h{next(_keys)}")
    pure: list[Message] = []
    evicted: tuple[str, ...] = ()  # what the window evicted, remembered (MEM-1, MEM-2)
    for batch in batches:
        expected = append(pure, batch, max_messages=window, now=1, evicted=evicted)
        got = store.append(address, prepare(batch, 1), window)
        pure, evicted = expected.messages, expected.evicted
        assert (got.appended, got.count) == (expected.appended, expected.count)
        assert store.load(address) == pure
        assert store.count(address) == len(pure)
        assert store.load(address, last=2) == pure[-2:]


EMPTY = st.sampled_from(
    [{"role": "user", "content": ""}, {"role": "user"}, {"role": "system", "content": ""}]
)
# (batch, window) steps: a batch is sometimes all empty (a pure read, which must evict
# nothing: DESIGN.md §2), and the window changes between steps, so a buffer can hold
# more rows than the window of the next append
SERVICE_STEPS = st.lists(
    st.tuples(
        st.one_of(st.lists(MESSAGE, min_size=1, max_size=4), st.lists(EMPTY, max_size=2)),
        st.sampled_from([0, 0, 1, 3]),
    ),
    min_size=1,
    max_size=8,
)


@SETTINGS
@given(steps=SERVICE_STEPS)
def test_mem_14_service_append_equals_pure_append(
    store: Store, steps: list[tuple[list[dict[str, Any]], int]]
) -> None:
    """The service's append (over every backend) and the core's agree, pure reads included."""
    service = MemoryService(store, clock=lambda: 1.0)
    key = f"s{next(_keys)}"
    pure: list[Message] = []
    evicted: tuple[str, ...] = ()
    for batch, window in steps:
        expected = append(pure, batch, max_messages=window, now=1, evicted=evicted)
        got = service.append_raw("user", "7", key, batch, window, return_messages=True)
        pure, evicted = expected.messages, expected.evicted
        assert got.messages == pure
        assert (got.appended, got.count) == (expected.appended, expected.count)


def test_mem_14_empty_append_with_a_window_leaves_the_buffer_in_core_and_service(
    store: Store,
) -> None:
    """Issue 12: m0..m4, then an empty user append with max_messages=3, everywhere alike."""
    service = MemoryService(store, clock=lambda: 1.0)
    buffer = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    stored = service.append_raw("user", "7", "win", buffer, return_messages=True).messages
    empty = {"role": "user", "content": ""}
    assert append(stored, empty, max_messages=3).messages == stored
    assert service.append_raw("user", "7", "win", empty, 3, return_messages=True).messages == stored
    assert store.append(Address("user", "7", "win"), prepare(empty, 1), 3).count == 5
    assert store.load(Address("user", "7", "win")) == stored


# --- the editor itself against ListEditor ------------------------------------------------------


@contextmanager
def _sql_editor(kind: str, url: str) -> Iterator[tuple[SqlBufferEditor, Any]]:
    """An editor inside an open transaction, and a function listing positions in order."""
    address = Address("global", "", f"e{next(_keys)}")
    if kind == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        sqlite_backend.add_quota_function(conn, Quotas.off)  # what the quota triggers call
        conn.execute("BEGIN IMMEDIATE")
        editor = SqlBufferEditor(StatementRunner(conn, sqlite_backend.SQL), address)

        def positions() -> list[int]:
            return [
                p
                for (p,) in conn.execute(
                    "SELECT r.pos FROM buffer_rows r JOIN buffers b ON b.id = r.buffer_id "
                    "WHERE b.key = ? ORDER BY r.pos",
                    (address.key,),
                )
            ]

        try:
            yield editor, positions
        finally:
            conn.execute("ROLLBACK")
            conn.close()
    else:
        import psycopg

        with psycopg.connect(url) as pconn:
            editor = SqlBufferEditor(StatementRunner(pconn, pg_backend.SQL), address)

            def positions() -> list[int]:
                return [
                    p
                    for (p,) in pconn.execute(
                        "SELECT r.pos FROM buffer_rows r JOIN buffers b ON b.id = r.buffer_id "
                        "WHERE b.key = %s ORDER BY r.pos",
                        (address.key,),
                    )
                ]

            yield editor, positions
            pconn.rollback()


ROW = stored_rows(IDS, CONTENT)
OPS = edits(ROW)


@SETTINGS
@given(ops=OPS)
def test_mem_3_sql_editor_answers_like_list_editor(sql_store_url: str, ops: list[Any]) -> None:
    """Every BufferEditor answer of the SQL editor equals ListEditor's, edit after edit."""
    kind = "sqlite" if sql_store_url.startswith("sqlite") else "postgres"
    open_store(sql_store_url).close()  # creates the schema
    reference = ListEditor([])
    with _sql_editor(kind, sql_store_url) as (editor, positions):
        for op in ops:
            if not apply_edit(op, editor, reference, positions()):
                continue
            where = positions()
            index_of = {pos: i for i, pos in enumerate(where)}
            assert editor.count() == reference.count() == len(where)
            for cid in ["a", "b", "c", "d", "7"]:
                assert editor.is_declared(cid) == reference.is_declared(cid)
                got = editor.answer_of(cid)
                want = reference.answer_of(cid)
                assert (got and (index_of[got.position], got.healed)) == (
                    want and (want.position, want.healed)
                )
            assert [(d.call_id, index_of[d.after]) for d in editor.dangling()] == [
                (d.call_id, d.after) for d in reference.dangling()
            ]
            first, expected_first = editor.oldest(), reference.oldest()
            assert (first and first.row) == (expected_first and expected_first.row)


@pytest.mark.parametrize("gap", [1, 2, 3])
def test_mem_3_insert_after_mid_turn_shifts_only_that_turn(sql_store_url: str, gap: int) -> None:
    """An insert before rows of the same turn shifts them; later turns keep their positions."""
    kind = "sqlite" if sql_store_url.startswith("sqlite") else "postgres"
    open_store(sql_store_url).close()
    turn = {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"id": "a"}]}}
    tool = {"role": "tool", "content": "r", "metadata": {"tool_call_id": "a"}}
    later = {"role": "user", "content": "later", "metadata": {}}
    new = [{"role": "system", "content": f"n{i}", "metadata": {}} for i in range(gap)]
    with _sql_editor(kind, sql_store_url) as (editor, positions):
        editor.append_row(turn)
        editor.insert_after(positions()[0], [tool])
        editor.append_row(later)
        before = positions()
        editor.insert_after(before[0], new)
        after = positions()
        assert after[0] == before[0] and after[-1] == before[-1]
        assert after[-2] == before[1] + gap
        answer = editor.answer_of("a")
        assert answer is not None and answer.position == after[-2]
        assert editor.dangling() == []
        assert editor.count() == 3 + gap
