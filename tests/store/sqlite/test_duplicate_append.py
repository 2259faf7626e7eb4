"""An SQLite append that stores nothing (every message a duplicate) commits nothing and never fsyncs.

Issue 26 §3 (decision 0071): the rules run in the write transaction as ever; when
they stored nothing the transaction is rolled back, no other connection sees a
change, the write-ahead log does not grow, and no fsync is made, unless another
thread of the process is between its own commit and its fsync (then the duplicate
may have read that commit, and it waits for an fsync as any write does).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from flowmem.core import prepare
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address
from flowmem.store.sqlite import SqliteStore

CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "42"}
CONTEXT = ExecutionContext(user_id="alice", session_id="s1")
KEY = Address("session", "s1", "chat")


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``fdatasync`` flowmem makes (the fsync owner, ``store/sqlite/fsync.py``, calls it).

    The writes take the shared fsync, as beside other writers: a writer alone in its
    process and on the file commits with SQLite's own fsync, which Python cannot
    count (decision 0095, tests/store/sqlite/test_fsync.py).
    """
    monkeypatch.setattr(SqliteStore, "_alone_writer", lambda self: False)
    calls: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    return calls


def _watch(path: Path) -> tuple[sqlite3.Connection, int]:
    """A connection of its own and its ``PRAGMA data_version``: it moves when another commits."""
    conn = sqlite3.connect(path)
    return conn, _version(conn)


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def test_sqlite_duplicate_append_commits_nothing_and_makes_no_fsync(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    path = tmp_path / "d.db"
    store = SqliteStore(f"sqlite:///{path}")
    service = MemoryService(store)
    first = service.append("session", "chat", [CALL, RESULT], CONTEXT)
    assert first.appended == 2 and fsyncs  # a write that stored rows syncs them
    fsyncs.clear()
    watcher, version = _watch(path)
    wal = os.path.getsize(f"{path}-wal")
    again = service.append("session", "chat", [CALL, RESULT], CONTEXT)
    assert (again.appended, again.count) == (0, 2)
    assert store.append(KEY, [row for row in store.load(KEY)]).appended == 0  # the store's own call
    assert fsyncs == []
    assert os.path.getsize(f"{path}-wal") == wal
    assert _version(watcher) == version  # no commit
    watcher.close()
    service.append("session", "chat", {"role": "user", "content": "new"}, CONTEXT)
    assert len(fsyncs) == 1  # the next write that stores a row syncs as before
    store.close()


def test_sqlite_duplicate_append_waits_for_the_fsync_of_a_commit_in_flight(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'f.db'}")
    service = MemoryService(store)
    service.append("session", "chat", [CALL, RESULT], CONTEXT)
    fsyncs.clear()
    committed, release = threading.Event(), threading.Event()

    def writer_between_commit_and_fsync() -> None:
        with store._commits.commit():
            store._commits.changed()  # as a write that committed rows notes it
            committed.set()
            assert release.wait(10)

    other = threading.Thread(target=writer_between_commit_and_fsync)
    other.start()
    assert committed.wait(10)
    again = service.append("session", "chat", [CALL, RESULT], CONTEXT)
    assert again.appended == 0 and len(fsyncs) == 1  # it may have read that commit
    release.set()
    other.join(10)
    store.close()


def test_sqlite_duplicate_append_that_creates_its_session_commits_and_syncs(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    path = tmp_path / "c.db"
    store = SqliteStore(f"sqlite:///{path}")
    service = MemoryService(store)
    other = ExecutionContext(user_id="alice", session_id="s2")
    store.append(Address("session", "s2", "chat"), prepare([CALL, RESULT], 1))  # no session made
    fsyncs.clear()
    watcher, version = _watch(path)
    result = service.append("session", "chat", [CALL, RESULT], other)
    assert result.appended == 0 and store.get_session("s2") is not None  # created, no rows
    assert _version(watcher) != version and len(fsyncs) == 1
    watcher.close()
    store.close()
