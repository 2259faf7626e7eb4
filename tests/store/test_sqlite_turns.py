"""SQLite without the index of non-tool rows (migration 15, decision 0094).

A result run's end is found on the primary key, once per declaring turn, as on
PostgreSQL (decision 0068): healing a turn's open calls reads that turn's run once,
whatever the number of open calls. Where the healed results go, on every backend:
tests/store/test_result_runs.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flowmem.core import prepare
from flowmem.store import Address
from flowmem.store.sqlite import MIGRATIONS, SqliteStore
from tests.store.runs import half_answered
from tests.store.undo_kept import undo_kept
from tests.store.undo_listed import undo_listed_calls


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'buffer_rows'"
        ).fetchall()
    return {str(row[0]) for row in found}


def _healing_steps(tmp_path: Path, calls: int) -> int:
    """SQLite virtual-machine steps of the append that heals a turn of ``calls`` half-open calls."""
    store = SqliteStore(f"sqlite:///{tmp_path}/steps{calls}.db")
    address = Address("user", "u", "steps")
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    try:
        half_answered(store, address, calls)
        with store._connection() as conn:  # the pool lends this connection to the append next
            conn.set_progress_handler(count, 1)
        store.append(address, prepare({"role": "user", "content": "next"}, 1))
        with store._connection() as conn:
            conn.set_progress_handler(None, 1)
    finally:
        store.close()
    return steps


def test_healing_reads_a_turns_run_once_not_once_per_open_call(tmp_path: Path) -> None:
    """Four times the calls: about four times the steps (once per open call would be ~16x)."""
    small = _healing_steps(tmp_path, 200)
    large = _healing_steps(tmp_path, 800)
    assert small > 0
    assert large <= small * 8, (small, large)


def test_a_database_from_before_loses_the_index_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "upgraded.db"
    store = SqliteStore(f"sqlite:///{path}")
    address = Address("user", "u", "upgraded")
    store.append(address, prepare([{"role": "user", "content": "q"}], 1))
    store.close()
    with sqlite3.connect(path) as conn:  # as version 14 left it
        conn.execute(
            "CREATE INDEX buffer_rows_turns ON buffer_rows (buffer_id, pos) WHERE role <> 'tool'"
        )
        undo_listed_calls(conn)  # SQLite's migration 23 (an append's pages) undone
        undo_kept(conn, sqlite=True)  # the adapters' kept JSON (decisions 0131, 0133) undone
        conn.execute("DROP TABLE buffer_repairs")  # migration 17 (the repair log) undone
        conn.execute("DROP INDEX adk_sessions_key")  # and migration 16 (ADK keys) undone
        conn.execute("ALTER TABLE adk_sessions DROP COLUMN adk_id")
        conn.execute("DELETE FROM flowmem_schema WHERE version >= 15")
    assert "buffer_rows_turns" in _indexes(path)
    again = SqliteStore(f"sqlite:///{path}")
    try:
        assert again.schema_version() == len(MIGRATIONS)
        again.append(address, prepare([{"role": "assistant", "content": "a"}], 1))
        assert [row["content"] for row in again.load(address)] == ["q", "a"]
    finally:
        again.close()
    assert "buffer_rows_turns" not in _indexes(path)
