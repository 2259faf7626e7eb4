"""PostgreSQL's repair log (decision 0175): a log that has moved to its table goes on there.

Until a header's held entries first move to ``buffer_repairs`` (decision 0148) a write's
entries are held in the header; from then on they are rows of the table at once
(``repairs.postgres.DIRECT``, a trigger before the header's update), not held and written
a second time when they move. The log read back, its numbers, its bytes and count in the
header and the owner's usage are the same as the held path's, which the same writes
take on a schema without the trigger.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from flowmem.core import Repair, prepare
from flowmem.store import Address

psycopg = pytest.importorskip("psycopg")

from flowmem.store.postgres import PostgresStore  # noqa: E402
from flowmem.store.repairs.postgres import HELD_ONLY  # noqa: E402

pytestmark = pytest.mark.postgres


def _call(cid: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": cid}]}


def _query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _header(url: str, address: Address) -> tuple[str, int, int]:
    """The header's held text, its log's bytes and count, each checked against its entries."""
    ((held, size, count, in_table, table_bytes, held_count, held_bytes),) = _query(
        url,
        """SELECT b.log_held, b.log_bytes, b.log_count,
            (SELECT COUNT(*) FROM buffer_repairs AS r WHERE r.buffer_id = b.id),
            (SELECT COALESCE(SUM(octet_length(r.entry)), 0) FROM buffer_repairs AS r WHERE r.buffer_id = b.id),
            json_array_length(('[' || substr(b.log_held, 2) || ']')::json),
            (SELECT COALESCE(SUM(octet_length(h.e::text)), 0)
                FROM json_array_elements(('[' || substr(b.log_held, 2) || ']')::json) AS h(e))
        FROM buffers AS b WHERE b.scope = %s AND b.scope_id = %s AND b.key = %s""",
        tuple(address),
    )
    assert (int(size), int(count)) == (
        int(table_bytes) + int(held_bytes),
        int(in_table) + int(held_count),
    )
    return str(held), int(size), int(count)


def _heals(store: PostgresStore, address: Address, first: int, n: int, late: bool = False) -> None:
    """``n`` heals, one an append; ``late``: each append also answers the call healed before it
    (its placeholder replaced, MEM-10): two entries in one write."""
    for k in range(first, first + n):
        before = [{"role": "tool", "content": "late", "tool_call_id": f"call_{k - 1}"}]
        turn = [_call(f"call_{k}"), {"role": "user", "content": f"q{k}"}]
        store.append(address, prepare([*(before if late and k else []), *turn], k))


def test_mem_3_once_the_held_entries_moved_a_heal_s_entry_is_a_row_of_the_table_at_once(
    postgres_store_url: str,
) -> None:
    address = Address("user", f"alice-{uuid.uuid4().hex[:8]}", "moved")
    store = PostgresStore(postgres_store_url)
    try:
        n = 0
        while n == 0 or _header(postgres_store_url, address)[0] != "":  # until the entries move
            _heals(store, address, n, 1)
            n += 1
            assert n < 100, "the held entries never moved to the table"
        assert n > 3
        _heals(store, address, n, 3)  # three more heals: each entry in the table, none held
        held, _, count = _header(postgres_store_url, address)
        assert (held, count) == ("", n + 3)
        assert store.repairs.note(address, Repair("MEM-5", (), 2))  # a note too
        assert not store.repairs.note(address, Repair("MEM-5", (), 2))  # the newest, not repeated
        assert _header(postgres_store_url, address)[::2] == ("", n + 4)
        entries = store.repairs.page(address, limit=1000).entries
        assert [e.seq for e in entries] == list(range(n + 4, 0, -1))
        assert [e.call_ids for e in reversed(entries)][: n + 3] == [
            [f"call_{k}"] for k in range(n + 3)
        ]
        assert entries[0].rule == "MEM-5"
    finally:
        store.close()


@pytest.mark.parametrize("kept", [None, 5])
def test_the_log_written_at_once_equals_the_held_path_s(
    postgres_db_url: str, kept: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same writes on two buffers: with the store's statements, then with the held path's
    (``HELD_ONLY``: every entry held in the header, decision 0148)."""
    direct, held = Address("user", "alice", "direct"), Address("user", "alice", "held")
    pages = {}
    for address in (direct, held):
        if address == held:
            for name, text in HELD_ONLY.items():
                monkeypatch.setitem(PostgresStore.SQL, name, text)
                monkeypatch.delitem(PostgresStore.SQL, f"{name}/with")
                monkeypatch.delitem(PostgresStore.SQL, f"{name}/main")
        store = PostgresStore(postgres_db_url)
        if kept is not None:
            store.repairs.kept = kept
        try:
            _heals(store, address, 0, 30)
            store.repairs.note(address, Repair("MEM-5", (), 2))
            _heals(store, address, 30, 5, late=True)
            pages[address] = [
                (e.seq, e.rule, e.call_ids, e.count, e.positions, e.kind, e.archived)
                for e in store.repairs.page(address, limit=1000).entries
            ]
            assert store.check_integrity() == []
        finally:
            store.close()
    assert _header(postgres_db_url, direct)[0] == ""
    assert pages[direct] == pages[held]
    assert len(pages[direct]) == (41 if kept is None else kept)
    assert _header(postgres_db_url, direct)[2] == _header(postgres_db_url, held)[2]
    store = PostgresStore(postgres_db_url)
    try:  # the owner's usage: her buffers' rows and logs, exactly
        ((size,),) = _query(postgres_db_url, "SELECT SUM(bytes + log_bytes) FROM buffers")
        assert store.usage("alice").bytes == int(size)
    finally:
        store.close()
