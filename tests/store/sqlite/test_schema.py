"""SQLite's migration 23 (issue 42 §1, decision 0137): the pages an append writes.

An append writes its row, the buffer's header and, for a call or a result, the one
index entry that finds it by id (MEM-1): no usage row (an owner's bytes are summed
from their buffers' headers), no index of declarations by position (a row's call ids
are on the row), no index of unanswered calls and no answered flag (the header lists
them, and every append writes the header anyway). Counted, not timed: the WAL is
emptied before an append and its frames named by ``dbstat`` after it.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from pathlib import Path

import pytest

from flowmem.core import prepare, result_id
from flowmem.errors import QuotaExceededError
from flowmem.store import Address, Quotas, SessionRecord
from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite import SqliteStore, reserved
from flowmem.store.sqlite.schema import CARRIED_CALLS, LISTED_CALLS
from tests.store.runs import half_answered
from tests.store.undo_listed import undo_listed_calls

CHAT = Address("session", "s1", "chat")


def _store(tmp_path: Path) -> SqliteStore:
    store = SqliteStore(f"sqlite:///{tmp_path}/pages.db")
    store.create_session(SessionRecord("s1", "s1", "alice"))
    store.append(CHAT, prepare({"role": "user", "content": "first"}, 1))
    return store


def _pages_of(store: SqliteStore, rows: list[dict[str, object]]) -> set[str]:
    """The tables and indexes whose pages the append of ``rows`` wrote to the WAL."""
    side = sqlite3.connect(store.path, isolation_level=None)
    try:
        busy = side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        assert busy == 0 and Path(f"{store.path}-wal").stat().st_size == 0
        store.append(CHAT, prepare(rows, 2))
        data = Path(f"{store.path}-wal").read_bytes()
        size = int(side.execute("PRAGMA page_size").fetchone()[0]) + 24
        pages = {struct.unpack(">I", data[32 + i * size : 36 + i * size])[0] for i in range((len(data) - 32) // size)}
        marks = ",".join(map(str, pages))
        names = side.execute(f"SELECT DISTINCT name FROM dbstat WHERE pageno IN ({marks})").fetchall()
    finally:
        side.close()
    assert pages
    return {str(name) for (name,) in names} - {"sqlite_schema"}  # page 1: the file's size


def _call(cid: str) -> dict[str, object]:
    call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def _listed(store: SqliteStore) -> list[list[object]]:
    with sqlite3.connect(store.path) as conn:
        found: list[list[object]] = json.loads(conn.execute("SELECT unanswered FROM buffers").fetchone()[0])
    return found


def test_an_owned_append_writes_its_row_and_header_and_no_usage_row(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        before = store.usage("alice").bytes
        assert _pages_of(store, [{"role": "user", "content": "again"}]) == {"buffer_rows", "buffers"}
        grown = store.usage("alice").bytes - before
        assert grown == sum(len(body.encode()) for _, body in store.load_bodies(CHAT)[-1:]) > 0
    finally:
        store.close()


def test_mem_1_a_call_writes_no_index_entry_and_its_result_one_for_both(tmp_path: Path) -> None:
    """Migration 28 (decision 0180): the header's list is an open call's entry; its answer carries it."""
    store = _store(tmp_path)
    try:
        assert _pages_of(store, [_call("c1")]) == {"buffer_rows", "buffers"}
        assert _listed(store) == [["c1", 2 << 20, 0]]
        result = {"role": "tool", "content": "ok", "tool_call_id": "c1"}
        assert _pages_of(store, [result]) == {"buffer_rows", "buffers", "buffer_answers"}
        assert _listed(store) == []
        with sqlite3.connect(store.path) as conn:
            entries = conn.execute("SELECT call_id, pos, declared_pos, ord FROM buffer_answers")
            assert entries.fetchall() == [("c1", 3 << 20, 2 << 20, 0)]
            assert conn.execute("SELECT COUNT(*) FROM buffer_calls").fetchone() == (0,)
        store.append(CHAT, prepare([result, _call("c1")], 3))  # a second result, a repeated call id
        assert [result_id(r) for r in store.load(CHAT)] == [None, None, "c1"]
    finally:
        store.close()


def test_mem_3_the_header_lists_the_unanswered_calls_and_a_user_turn_heals_them(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        half_answered(store, CHAT, 4)
        assert [(cid, order) for cid, _, order in _listed(store)] == [("c2", 2), ("c3", 3)]
        store.append(CHAT, prepare({"role": "user", "content": "next"}, 3))
        rows = store.load(CHAT)
        assert [result_id(r) for r in rows if r["role"] == "tool"] == ["c0", "c1", "c2", "c3"]
        assert rows[-1]["content"] == "next"
        assert _listed(store) == []
    finally:
        store.close()


def test_the_bytes_quota_counts_the_buffers_rows_with_the_records(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        used = store.usage("alice").bytes
        store.set_quotas(Quotas(bytes=used + 150))
        store.put_record(Address("session", "s1", "note"), "x" * 100, None)
        with pytest.raises(QuotaExceededError):
            store.append(CHAT, prepare({"role": "user", "content": "y" * 40}, 2))
        assert store.count(CHAT) == 1
        with pytest.raises(QuotaExceededError):  # and a record past the rows and the record
            store.put_record(Address("session", "s1", "more"), "z" * 60, None)
    finally:
        store.close()


def test_a_database_from_before_gets_its_calls_listed_and_its_usage_summed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append(CHAT, prepare([_call("h1"), {"role": "user", "content": "healed"}], 2))  # logged
    half_answered(store, CHAT, 4)
    usage = store.usage("alice")
    logged = store.repairs.page(CHAT).entries
    tail = store.read_tail_facts(CHAT)
    facts = (tail.count, list(tail.facts))
    store.close()
    with sqlite3.connect(store.path, isolation_level=None) as conn:
        undo_listed_calls(conn)  # as before migration 23, with the old flags and indexes
        assert conn.execute("SELECT SUM(answered = 0) FROM buffer_calls").fetchone()[0] == 2
        # migrations 23, 24 (the log's bytes in the header, decision 0135), 25 (the
        # reservation, decision 0137), 26 (its growth trigger gated, decision 0144) and 27
        # (the newest entries held in the header, decision 0148) and 28 (a declaration's entry
        # written with its answer, decision 0180) on it, as an upgrade runs them
        upgrade = (*LISTED_CALLS, *repairs_sqlite.IN_THE_HEADER, *reserved.MIGRATION, *reserved.GATED)
        for statement in (*upgrade, *repairs_sqlite.HELD, *CARRIED_CALLS):
            conn.execute(statement)
    again = SqliteStore(f"sqlite:///{store.path}")
    try:
        assert again.usage("alice") == usage
        assert again.repairs.page(CHAT).entries == logged and logged
        found = again.read_tail_facts(CHAT)
        assert (found.count, list(found.facts)) == facts
        with sqlite3.connect(store.path) as conn:
            found = conn.execute("SELECT calls FROM buffer_rows WHERE role = 'assistant' ORDER BY pos")
            assert [calls for (calls,) in found] == ['["h1"]', '["c0","c1","c2","c3"]']
        assert [cid for cid, _, _ in _listed(again)] == ["c2", "c3"]
        again.append(CHAT, prepare({"role": "user", "content": "next"}, 3))
        rows = again.load(CHAT)
        assert [result_id(r) for r in rows if r["role"] == "tool"] == ["h1", "c0", "c1", "c2", "c3"]
        assert rows[-1]["content"] == "next"
    finally:
        again.close()
