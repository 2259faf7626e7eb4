"""SQLite without the index of non-tool rows (migration 15, decision 0094).

A result run's end is found on the primary key, once per declaring turn, as on
PostgreSQL (decision 0068): healing a turn's open calls reads that turn's run once,
whatever the number of open calls.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flowmem.core import prepare, result_id
from flowmem.store import Address
from flowmem.store.sqlite import MIGRATIONS, SqliteStore


def _half_answered(store: SqliteStore, address: Address, calls: int) -> None:
    """A turn declaring ``calls`` calls, the first half of them answered."""
    declared = [{"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for n in range(calls)]  # fmt: skip
    turn = {"role": "assistant", "content": "", "tool_calls": declared}
    results = [{"role": "tool", "content": "r", "tool_call_id": f"c{n}"} for n in range(calls // 2)]
    store.append(address, prepare([{"role": "user", "content": "q"}, turn, *results], 1))


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'buffer_rows'"
        ).fetchall()
    return {str(row[0]) for row in found}


def test_a_user_turn_heals_every_open_call_after_the_run(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/heal.db")
    address = Address("user", "u", "heal-after-run")
    try:
        _half_answered(store, address, 6)
        store.append(address, prepare({"role": "user", "content": "next"}, 1))
        rows = store.load(address)
    finally:
        store.close()
    roles = [(row["role"], result_id(row)) for row in rows]
    assert roles == [
        ("user", None),
        ("assistant", None),
        *[("tool", f"c{n}") for n in range(6)],  # c3..c5 healed right after c0..c2's run
        ("user", None),
    ]


def test_the_run_end_stops_at_the_first_row_after_the_run(tmp_path: Path) -> None:
    """A run followed by more turns: the end is the run's last result, not the buffer's end."""
    store = SqliteStore(f"sqlite:///{tmp_path}/end.db")
    address = Address("user", "u", "end")
    try:
        _half_answered(store, address, 4)
        store.append(address, prepare({"role": "assistant", "content": "thinking"}, 1))
        store.append(address, prepare({"role": "user", "content": "next"}, 1))
        rows = store.load(address)
    finally:
        store.close()
    roles = [(row["role"], result_id(row)) for row in rows]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "c0"),
        ("tool", "c1"),
        ("tool", "c2"),  # healed where the run ends, before the assistant's next row
        ("tool", "c3"),
        ("assistant", None),
        ("user", None),
    ]


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
        _half_answered(store, address, calls)
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
        conn.execute("DELETE FROM flowmem_schema WHERE version = ?", (len(MIGRATIONS),))
    assert "buffer_rows_turns" in _indexes(path)
    again = SqliteStore(f"sqlite:///{path}")
    try:
        assert again.schema_version() == len(MIGRATIONS)
        again.append(address, prepare([{"role": "assistant", "content": "a"}], 1))
        assert [row["content"] for row in again.load(address)] == ["q", "a"]
    finally:
        again.close()
    assert "buffer_rows_turns" not in _indexes(path)
