"""The repair log's bytes kept in the buffer's header (decision 0135), and a write's entries in one statement.

Since PostgreSQL's migration 23 and SQLite's 24 ``buffers.log_bytes`` is the size of the buffer's log,
counted with its rows by the header's usage trigger: it must equal the entries' bytes
after every kind of write (an append's entries, a note, a compaction, a trim under a
store's own bound, the trim past ``KEPT`` in the insert's trigger), and the owner's usage
must be the rows' bytes plus it. A write's entries go in one statement, joined by
newlines; every backend reads them back as they were logged.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import psycopg
import pytest

from flowmem.core import Repair, prepare
from flowmem.service import MemoryService
from flowmem.store import Address, Store, open_store
from flowmem.store.base import Quotas
from flowmem.store.postgres.schema import MIGRATIONS
from flowmem.store.postgres.store import PostgresStore
from flowmem.store.repairs import KEPT, RepairEntry, entry_text
from flowmem.store.sqlite.driver import add_quota_function

CHAT = Address("user", "alice", "chat")


def _call(*cids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": c} for c in cids]}


def _result(cid: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _log(store: Store, address: Address = CHAT) -> list[RepairEntry]:
    return store.repairs.page(address, limit=1000).entries  # type: ignore[attr-defined,no-any-return]


def _query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the store's database (SQLite's spelling made from PostgreSQL's); its rows."""
    if url.startswith("sqlite"):
        sql = sql.replace("%s", "?").replace("octet_length(r.entry)", "length(CAST(r.entry AS BLOB))")
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            add_quota_function(conn, Quotas)  # the store's own trigger functions (no quota set)
            return conn.execute(sql, params).fetchall()
    with psycopg.connect(url, autocommit=True) as pg:
        cursor = pg.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _headers(url: str) -> list[tuple[int, int, int]]:
    """Each buffer's (id, log_bytes, the bytes of its entries in the table)."""
    found = _query(
        url,
        """SELECT b.id, b.log_bytes, (SELECT COALESCE(SUM(octet_length(r.entry)), 0)
            FROM buffer_repairs AS r WHERE r.buffer_id = b.id) FROM buffers AS b ORDER BY b.id""",
    )
    return [(int(i), int(kept), int(table)) for i, kept, table in found]


def _check_counted(store: Store, url: str) -> None:
    """Every header's log_bytes is its log's bytes, and alice's usage is her buffers' rows' and logs' bytes."""
    headers = _headers(url)
    assert headers and all(kept == table for _, kept, table in headers), headers
    (rows,) = _query(url, "SELECT COALESCE(SUM(b.bytes + b.log_bytes), 0) FROM buffers AS b WHERE b.owner = 'alice'")
    assert store.usage("alice").bytes == int(rows[0])


def test_the_headers_log_bytes_are_the_log_s_bytes_after_every_kind_of_write(sql_url: str) -> None:
    store = open_store(sql_url)
    try:
        store.append(CHAT, prepare([_user("hi"), _call("c1")], 1))
        store.append(CHAT, prepare([_user("next")], 2))  # a heal (MEM-3)
        store.append(CHAT, prepare([_result("c1", "late")], 3))  # a replacement (MEM-10)
        _check_counted(store, sql_url)
        store.append(CHAT, prepare([_user("more")], 4), max_messages=3)  # an eviction
        assert store.repairs.note(CHAT, Repair("MEM-5", (), 2))  # type: ignore[attr-defined]
        _check_counted(store, sql_url)
        service = MemoryService(store)
        service.append_raw("user", "alice", "chat", [_user(f"turn {i} " * 20) for i in range(6)])
        assert service.compact_raw("user", "alice", "chat", keep_tokens=60, summarize=lambda rows: "s").compacted
        _check_counted(store, sql_url)
        store.repairs.kept = 2  # type: ignore[attr-defined]
        store.append(CHAT, prepare([_call("c9"), _user("after c9")], 5))
        assert len(_log(store)) == 2
        _check_counted(store, sql_url)
        store.clear(CHAT)
        assert store.usage("alice").bytes == 0
    finally:
        store.close()


def test_the_trim_past_kept_takes_the_trimmed_bytes_off_the_header(sql_url: str) -> None:
    """The insert's trigger trims past ``KEPT`` (a log under it pays nothing) and uncounts what it trimmed."""
    store = open_store(sql_url)
    try:
        store.append(CHAT, prepare([_user("start")], 1))
        (buffer_id,) = _query(sql_url, "SELECT id FROM buffers")[0]
        # a log at its bound, as ``KEPT`` entries logged one by one would leave it (and counted)
        text = entry_text(Repair("MEM-3", ("old",), 1, (), None, "heal"), 1.0)
        _query(
            sql_url,
            """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
                INSERT INTO buffer_repairs (buffer_id, seq, entry) SELECT %s, i, %s FROM n""",
            (KEPT, buffer_id, text),
        )
        _query(sql_url, "UPDATE buffers SET log_bytes = %s WHERE id = %s", (KEPT * len(text), buffer_id))
        assert store.usage("alice").bytes == KEPT * len(text) + len(store.load_bodies(CHAT)[0][1])
        store.append(CHAT, prepare([_call("c1"), _user("after c1")], 1))  # one heal: entry KEPT + 1
        store.append(CHAT, prepare([_call("c2"), _user("after c2")], 1))
        logged = _log(store)
        assert len(logged) == KEPT and logged[0].seq == KEPT + 2 and logged[-1].seq == 3
        assert [e.call_ids for e in logged[:2]] == [["c2"], ["c1"]]
        _check_counted(store, sql_url)
    finally:
        store.close()


@pytest.mark.postgres
def test_an_upgrade_counts_an_existing_log_in_its_header_and_leaves_the_usage_as_it_was(
    postgres_db_url: str,
) -> None:
    text = entry_text(Repair("MEM-3", ("c1",), 1, (), None, "heal"), 1.0)
    with psycopg.connect(postgres_db_url) as conn:
        conn.execute(PostgresStore.SQL["schema_table"])
        for version, statements in enumerate(MIGRATIONS[:22], start=1):
            for statement in statements:
                conn.execute(statement)
            conn.execute(PostgresStore.SQL["schema_insert"], (version, time.time()))
        buffer_id = conn.execute(
            "INSERT INTO buffers (scope, scope_id, key) VALUES ('user', 'alice', 'chat') RETURNING id"
        ).fetchone()[0]  # type: ignore[index]
        # as migration 19's ``repairs_log`` wrote them: the entries, their bytes in the usage
        conn.execute(
            "INSERT INTO buffer_repairs (buffer_id, seq, entry) VALUES (%s, 1, %s), (%s, 2, %s)",
            (buffer_id, text, buffer_id, text),
        )
        conn.execute("UPDATE user_usage SET bytes = bytes + %s WHERE user_id = 'alice'", (2 * len(text),))
    store = open_store(postgres_db_url)
    try:
        assert store.schema_version() >= 23  # type: ignore[attr-defined]
        assert _headers(postgres_db_url) == [(int(buffer_id), 2 * len(text), 2 * len(text))]
        assert store.usage("alice").bytes == 2 * len(text)
        _check_counted(store, postgres_db_url)
        store.clear(CHAT)  # the header's deletion uncounts its log
        assert store.usage("alice").bytes == 0
    finally:
        store.close()


def test_a_write_s_entries_are_logged_together_and_read_back_whole(store: Store) -> None:
    """Several entries of one append (one statement on PostgreSQL, joined by newlines) keep their text."""
    odd = "c\n1 \u2028\t\"x\""
    store.append(CHAT, prepare([_call(odd, "c2")], 1))
    used = store.usage("alice").bytes
    # a heal of both (MEM-3), a late duplicate result refused (MEM-1) and a duplicate turn (MEM-2)
    store.append(CHAT, prepare([_user("next"), _result(odd, "again"), _result(odd, "again")], 2))
    logged = _log(store)
    assert [(e.rule, e.call_ids) for e in logged][-1] == ("MEM-3", [odd, "c2"])
    assert [e.seq for e in logged] == list(range(len(logged), 0, -1)) and len(logged) >= 2
    rows = sum(len(b.encode()) for _, b in store.load_bodies(CHAT))
    stored = [
        Repair(e.rule, tuple(e.call_ids), e.count, tuple(e.positions) if e.kind == "evict" else (), e.archived, e.kind)
        for e in logged
    ]
    assert store.usage("alice").bytes - rows == sum(len(entry_text(r, e.at).encode()) for r, e in zip(stored, logged, strict=True))
    assert store.usage("alice").bytes > used
