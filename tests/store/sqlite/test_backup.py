"""``SqliteStore.backup``: a consistent copy of a live database, never over an existing file."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from flowmem.errors import ConflictError, StoreError
from flowmem.store import Address, open_store
from flowmem.store.sqlite import SqliteStore

KEY = Address("global", "", "chat")


def test_backup_is_a_working_database_with_everything_committed(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'live.db'}")
    store.append(KEY, [{"role": "user", "content": "one"}])
    store.put_record(KEY, {"v": 1}, None)
    size = store.backup(tmp_path / "copy.db")
    store.append(KEY, [{"role": "user", "content": "after"}])  # not in the copy
    copy = open_store(f"sqlite:///{tmp_path / 'copy.db'}")
    assert size == (tmp_path / "copy.db").stat().st_size > 0
    assert [r["content"] for r in copy.load(KEY)] == ["one"]
    assert copy.get_record(KEY, 0.0) == (True, {"v": 1})
    copy.close()
    store.close()


def test_backup_while_another_thread_appends_is_consistent(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'live.db'}")
    stop = threading.Event()

    def writer() -> None:
        index = 0
        while not stop.is_set():
            store.append(KEY, [{"role": "user", "content": f"m{index}"}])
            index += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for attempt in range(3):
            store.backup(tmp_path / f"copy{attempt}.db")
    finally:
        stop.set()
        thread.join()
    for attempt in range(3):
        copy = open_store(f"sqlite:///{tmp_path / f'copy{attempt}.db'}")
        rows = copy.load(KEY)
        assert copy.count(KEY) == len(rows)  # the header agrees with the rows: one moment
        assert [r["content"] for r in rows] == [f"m{i}" for i in range(len(rows))]
        copy.close()
    store.close()


def test_backup_never_overwrites_and_leaves_no_partial_file(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'live.db'}")
    existing = tmp_path / "taken.db"
    existing.write_bytes(b"keep me")
    with pytest.raises(ConflictError, match="never overwrites"):
        store.backup(existing)
    assert existing.read_bytes() == b"keep me"
    with pytest.raises(StoreError):
        store.backup(tmp_path / "missing-dir" / "copy.db")
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []
    store.close()
