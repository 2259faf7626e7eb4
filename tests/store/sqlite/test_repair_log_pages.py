"""What a repair log entry writes on SQLite (decision 0148): the header's page, which the append writes anyway.

Counted from the WAL, not timed: before each counted append a side connection empties
the WAL (``wal_checkpoint(TRUNCATE)``); after it the WAL holds exactly the frames its
commit wrote, each naming its page, which ``dbstat`` maps to its table or index.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path
from typing import Any

from flowmem.core import prepare
from flowmem.store import Address
from flowmem.store.sqlite import SqliteStore

CHAT = Address("user", "alice", "chat")


def _pages_of_next_append(store: SqliteStore, rows: list[dict[str, Any]]) -> list[str]:
    """The tables and indexes whose pages the commit of appending ``rows`` wrote, as many times as it wrote them."""
    with sqlite3.connect(store.path) as side:
        side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.append(CHAT, prepare(rows, 2))
        size = int(side.execute("PRAGMA page_size").fetchone()[0])
        names = dict(side.execute("SELECT pageno, name FROM dbstat").fetchall())
    with open(f"{store.path}-wal", "rb") as wal:
        wal.seek(32)
        pages = []
        while frame := wal.read(24):
            pages.append(struct.unpack(">I", frame[:4])[0])
            wal.seek(size, os.SEEK_CUR)
    return [str(names.get(page, page)) for page in pages]


def test_mem_3_a_heal_under_the_bound_writes_no_page_of_the_log_s_table(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store.append(CHAT, prepare([{"role": "user", "content": f"row {i}"} for i in range(100)], 1))
        for n in range(3):
            store.append(CHAT, prepare([{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}"}]}], 2))
            heal = _pages_of_next_append(store, [{"role": "user", "content": f"next {n}"}])  # MEM-3: one entry
            assert "buffer_repairs" not in heal and heal.count("buffers") == 1, heal
        plain = _pages_of_next_append(store, [{"role": "user", "content": "plain"}])  # nothing logged
        assert len(heal) == len(plain) + 1 and "buffer_answers" in heal  # the placeholder's answer, not the log
        assert [e.call_ids for e in store.repairs.page(CHAT).entries] == [["c2"], ["c1"], ["c0"]]  # type: ignore[attr-defined]
    finally:
        store.close()
