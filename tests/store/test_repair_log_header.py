"""The repair log's bytes kept in the buffer's header (decision 0135), and a write's entries in one statement.

Since PostgreSQL's migration 23 and SQLite's 24 ``buffers.log_bytes`` is the size of the buffer's log,
counted with its rows by the header's usage trigger: it must equal the entries' bytes
after every kind of write (an append's entries, a note, a compaction, a trim under a
store's own bound, the trim past ``KEPT`` in the insert's trigger), and the owner's usage
must be the rows' bytes plus it. A write's entries go in one statement, joined by
newlines; every backend reads them back as they were logged.

Since SQLite's migration 27 and PostgreSQL's 25 (decision 0148) the newest entries are
held in the header row itself (``log_held``, with ``log_count`` every entry the log
holds) and move to the table in batches: the same must hold with entries in both places,
and an upgrade keeps the entries a log had and numbers the next after them.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
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
from flowmem.store.repairs import sqlite as repairs_sqlite
from flowmem.store.sqlite.driver import add_quota_function
from flowmem.store.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from tests.store.undo_held import undo_held

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


_HELD = {  # the entries a header holds (decision 0148): their bytes and their number, per dialect
    "sqlite": ("(SELECT COALESCE(SUM(length(CAST(h.value AS BLOB))), 0) FROM json_each({held}) AS h)", "json_array_length({held})"),
    "postgres": ("(SELECT COALESCE(SUM(octet_length(h.e::text)), 0) FROM json_array_elements({held}::json) AS h(e))", "json_array_length({held}::json)"),
}  # fmt: skip


def _headers(url: str) -> list[tuple[int, int, int]]:
    """Each buffer's (id, log_bytes, the bytes of its entries: in the table and held in its header).

    Its count (``log_count``) is checked too: every entry it holds, in the table and the header.
    """
    dialect = "sqlite" if url.startswith("sqlite") else "postgres"
    size, number = (part.format(held="('[' || substr(b.log_held, 2) || ']')") for part in _HELD[dialect])
    found = _query(
        url,
        f"""SELECT b.id, b.log_bytes, (SELECT COALESCE(SUM(octet_length(r.entry)), 0)
            FROM buffer_repairs AS r WHERE r.buffer_id = b.id) + {size}, b.log_count,
            (SELECT COUNT(*) FROM buffer_repairs AS r WHERE r.buffer_id = b.id) + {number}
            FROM buffers AS b ORDER BY b.id""",
    )
    assert all(int(count) == int(held_and_table) for *_, count, held_and_table in found), found
    return [(int(i), int(kept), int(table)) for i, kept, table, *_ in found]


def _check_counted(store: Store, url: str) -> None:
    """Every header's log_bytes is its log's bytes, and alice's usage is her buffers' rows' and logs' bytes."""
    headers = _headers(url)
    assert headers and all(kept == table for _, kept, table in headers), headers
    (rows,) = _query(url, "SELECT COALESCE(SUM(b.bytes + b.log_bytes), 0) FROM buffers AS b WHERE b.owner = 'alice'")
    assert store.usage("alice").bytes == int(rows[0])


def test_the_headers_log_bytes_are_the_log_s_bytes_after_every_kind_of_write(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    try:
        store.append(CHAT, prepare([_user("hi"), _call("c1")], 1))
        store.append(CHAT, prepare([_user("next")], 2))  # a heal (MEM-3)
        store.append(CHAT, prepare([_result("c1", "late")], 3))  # a replacement (MEM-10)
        _check_counted(store, sql_store_url)
        store.append(CHAT, prepare([_user("more")], 4), max_messages=3)  # an eviction
        assert store.repairs.note(CHAT, Repair("MEM-5", (), 2))  # type: ignore[attr-defined]
        _check_counted(store, sql_store_url)
        service = MemoryService(store)
        service.append_raw("user", "alice", "chat", [_user(f"turn {i} " * 20) for i in range(6)])
        assert service.compact_raw("user", "alice", "chat", keep_tokens=60, summarize=lambda rows: "s").compacted
        _check_counted(store, sql_store_url)
        store.repairs.kept = 2  # type: ignore[attr-defined]
        store.append(CHAT, prepare([_call("c9"), _user("after c9")], 5))
        assert len(_log(store)) == 2
        _check_counted(store, sql_store_url)
        store.clear(CHAT)
        assert store.usage("alice").bytes == 0
    finally:
        store.close()


def test_the_trim_past_kept_takes_the_trimmed_bytes_off_the_header(sql_store_url: str) -> None:
    """Past ``KEPT`` the header's trigger trims the oldest, held entries moving or not, and uncounts them (0148)."""
    store = open_store(sql_store_url)
    try:
        store.append(CHAT, prepare([_user("start")], 1))
        (buffer_id,) = _query(sql_store_url, "SELECT id FROM buffers")[0]
        # a log at its bound, as ``KEPT`` entries logged one by one would leave it (and counted)
        text = entry_text(Repair("MEM-3", ("old",), 1, (), None, "heal"), 1.0)
        _query(
            sql_store_url,
            """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
                INSERT INTO buffer_repairs (buffer_id, seq, entry) SELECT %s, i, %s FROM n""",
            (KEPT, buffer_id, text),
        )
        _query(sql_store_url, "UPDATE buffers SET log_bytes = %s WHERE id = %s", (KEPT * len(text), buffer_id))
        # and its number (decision 0148), which decides the trim
        _query(sql_store_url, "UPDATE buffers SET log_count = %s WHERE id = %s", (KEPT, buffer_id))
        assert store.usage("alice").bytes == KEPT * len(text) + len(store.load_bodies(CHAT)[0][1])
        store.append(CHAT, prepare([_call("c1"), _user("after c1")], 1))  # one heal: entry KEPT + 1
        store.append(CHAT, prepare([_call("c2"), _user("after c2")], 1))
        logged = _log(store)
        assert len(logged) == KEPT and logged[0].seq == KEPT + 2 and logged[-1].seq == 3
        assert [e.call_ids for e in logged[:2]] == [["c2"], ["c1"]]
        assert _in_table(sql_store_url) == KEPT - 2 and _held_text(sql_store_url)  # trimmed with no move: exactly KEPT
        _check_counted(store, sql_store_url)
        n = 3
        while _held_text(sql_store_url):  # until the held entries move
            store.append(CHAT, prepare([_call(f"c{n}"), _user(f"after c{n}")], 1))
            n += 1
        logged = _log(store)
        assert _in_table(sql_store_url) == len(logged) == KEPT and logged[0].seq == KEPT + n - 1
        assert [e.call_ids for e in logged[: n - 1]] == [[f"c{i}"] for i in range(n - 1, 0, -1)]
        _check_counted(store, sql_store_url)
        rows = sum(len(b.encode()) for _, b in store.load_bodies(CHAT))
        assert store.usage("alice").bytes - rows == sum(len(entry_text(_stored(e), e.at).encode()) for e in logged)
    finally:
        store.close()


def _stored(entry: RepairEntry) -> Repair:
    """The repair an entry was logged from (a heal's positions are read, not stored)."""
    stored = tuple(entry.positions) if entry.kind in ("evict", "compact") else ()
    return Repair(entry.rule, tuple(entry.call_ids), entry.count, stored, entry.archived, entry.kind)


def _postgres_log_of_two_at(conn: psycopg.Connection[Any], version: int, text: str) -> int:
    """A PostgreSQL database at migration ``version`` with one buffer whose log holds ``text`` twice."""
    conn.execute(PostgresStore.SQL["schema_table"])
    for number, statements in enumerate(MIGRATIONS[:version], start=1):
        for statement in statements:
            conn.execute(statement)
        conn.execute(PostgresStore.SQL["schema_insert"], (number, time.time()))
    buffer_id = conn.execute(
        "INSERT INTO buffers (scope, scope_id, key) VALUES ('user', 'alice', 'chat') RETURNING id"
    ).fetchone()[0]  # type: ignore[index]
    conn.execute(
        "INSERT INTO buffer_repairs (buffer_id, seq, entry) VALUES (%s, 1, %s), (%s, 2, %s)",
        (buffer_id, text, buffer_id, text),
    )
    return int(buffer_id)


@pytest.mark.postgres
def test_an_upgrade_counts_an_existing_log_in_its_header_and_leaves_the_usage_as_it_was(
    postgres_db_url: str,
) -> None:
    text = entry_text(Repair("MEM-3", ("c1",), 1, (), None, "heal"), 1.0)
    with psycopg.connect(postgres_db_url) as conn:
        # as migration 19's ``repairs_log`` wrote them: the entries, their bytes in the usage
        buffer_id = _postgres_log_of_two_at(conn, 22, text)
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


# --- the newest entries held in the header (decision 0148) ---------------------------------


def _held_text(url: str) -> str:
    (found,) = _query(url, "SELECT log_held FROM buffers")
    return str(found[0])


def _in_table(url: str) -> int:
    (found,) = _query(url, "SELECT COUNT(*) FROM buffer_repairs")
    return int(found[0])


def test_the_newest_entries_are_held_in_the_header_and_move_to_the_table_in_batches(sql_store_url: str) -> None:
    """A logging append writes its entry into the header; past ``HELD_CHARS`` they move, numbered, byte for byte."""
    odd = ["c\n1 \u2028\t\"x\" \u00e9\U0001f600 \\", "plain"]
    store = open_store(sql_store_url)
    try:
        store.append(CHAT, prepare([_user("start")], 1))
        healed: list[list[str]] = []
        while _in_table(sql_store_url) == 0:
            assert len(healed) < 100, "the held entries never moved to the table"
            ids = [f"{odd[len(healed) % 2]}{len(healed)}"]
            store.append(CHAT, prepare([_call(*ids), _user(f"after {len(healed)}")], 1))  # one heal
            healed.append(ids)
            assert len(_held_text(sql_store_url)) <= repairs_sqlite.HELD_CHARS
            if _in_table(sql_store_url) == 0:
                assert _held_text(sql_store_url).count('"rule":"MEM-3"') == len(healed)
            _check_counted(store, sql_store_url)
        assert _held_text(sql_store_url) == "" and _in_table(sql_store_url) == len(healed) > 3
        store.append(CHAT, prepare([_call("c-last"), _user("after last")], 1))  # held again, after the moved ones
        logged = _log(store)
        assert [e.seq for e in logged] == list(range(len(healed) + 1, 0, -1))
        assert [e.call_ids for e in reversed(logged)] == [*healed, ["c-last"]]
        _check_counted(store, sql_store_url)
    finally:
        store.close()


def test_a_page_of_the_log_runs_on_from_the_held_entries_to_the_table_s(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    try:
        store.append(CHAT, prepare([_user("start")], 1))
        n = 0
        while _in_table(sql_store_url) == 0 or _held_text(sql_store_url).count("MEM-3") < 3:
            store.append(CHAT, prepare([_call(f"c{n}"), _user(f"after {n}")], 1))
            n += 1
        seen, before, more = [], None, True
        while more:
            page = store.repairs.page(CHAT, before=before, limit=4)  # type: ignore[attr-defined]
            seen += [(e.seq, e.call_ids) for e in page.entries]
            before, more = page.entries[-1].seq, page.more
        assert seen == [(seq, [f"c{seq - 1}"]) for seq in range(n, 0, -1)]
        assert store.repairs.page(CHAT, before=n - 1, limit=2).entries[0].seq == n - 2  # type: ignore[attr-defined]
    finally:
        store.close()


def test_a_note_is_not_repeated_whether_the_newest_entry_is_held_or_in_the_table(sql_store_url: str) -> None:
    store = open_store(sql_store_url)
    drop = Repair("MEM-5", (), 2)
    try:
        store.append(CHAT, prepare([_user("start")], 1))
        assert store.repairs.note(CHAT, drop)  # type: ignore[attr-defined]
        assert not store.repairs.note(CHAT, drop)  # type: ignore[attr-defined]  # the newest, held
        n = 0
        while _in_table(sql_store_url) == 0:
            store.append(CHAT, prepare([_call(f"c{n}"), _user(f"after {n}")], 1))
            n += 1
        assert store.repairs.note(CHAT, drop)  # type: ignore[attr-defined]
        _query(sql_store_url, "UPDATE buffers SET log_held = '', log_count = log_count - 1")  # as if it had moved
        _query(sql_store_url, "INSERT INTO buffer_repairs (buffer_id, seq, entry) SELECT id, %s, %s FROM buffers", (n + 2, entry_text(drop, 1.0)))
        assert not store.repairs.note(CHAT, drop)  # type: ignore[attr-defined]  # the newest, in the table
        assert [e.rule for e in _log(store)][:2] == ["MEM-5", "MEM-3"]
    finally:
        store.close()


def test_an_sqlite_log_at_migration_26_keeps_its_entries_and_numbers_after_the_upgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'older.db'}"
    store = open_store(url)
    for n in range(3):
        store.append(CHAT, prepare([_call(f"c{n}"), _user(f"after {n}")], 1))
    logged = [(e.seq, e.call_ids, e.at) for e in _log(store)]
    store.close()
    with sqlite3.connect(tmp_path / "older.db") as conn:  # back to migration 26: the entries in the table
        undo_held(conn)
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 27")
    assert _query(url, "SELECT COUNT(*) FROM buffer_repairs") == [(3,)]
    again = open_store(url)
    try:
        assert again.schema_version() == len(SQLITE_MIGRATIONS)  # type: ignore[attr-defined]
        assert [(e.seq, e.call_ids, e.at) for e in _log(again)] == logged
        again.append(CHAT, prepare([_call("c3"), _user("after 3")], 1))
        assert [e.seq for e in _log(again)] == [4, 3, 2, 1]
        _check_counted(again, url)
    finally:
        again.close()


@pytest.mark.postgres
def test_a_postgresql_log_at_migration_24_keeps_its_entries_and_numbers_after_the_upgrade(
    postgres_db_url: str,
) -> None:
    text = entry_text(Repair("MEM-3", ("c1",), 1, (), None, "heal"), 1.0)
    with psycopg.connect(postgres_db_url) as conn:
        buffer_id = _postgres_log_of_two_at(conn, 24, text)
        conn.execute("UPDATE buffers SET log_bytes = %s WHERE id = %s", (2 * len(text), buffer_id))
    store = open_store(postgres_db_url)
    try:
        assert store.schema_version() == len(MIGRATIONS)  # type: ignore[attr-defined]
        assert [e.seq for e in _log(store)] == [2, 1]
        store.append(CHAT, prepare([_call("c2"), _user("after c2")], 1))
        assert [(e.seq, e.call_ids) for e in _log(store)] == [(3, ["c2"]), (2, ["c1"]), (1, ["c1"])]
        _check_counted(store, postgres_db_url)
    finally:
        store.close()
