"""The no-wait mode: a store call that would wait for a lock raises WouldBlock, changing nothing.

The HTTP app runs short store calls on its event loop in this mode (inside the
``LocalCalls`` capability's ``deferred()``, which also defers SQLite's fsync to the
group commit) and runs a call that raised ``WouldBlock`` again in a worker thread
(``flowmem.api.pool``), so MEM-12's serialization and bounded wait still hold
for it there.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.core import prepare
from flowmem.errors import StoreError
from flowmem.store import Address, Store, open_store
from flowmem.store.base import LocalCalls
from flowmem.store.locks import AddressLocks, WouldBlock, no_wait, waiting_allowed
from flowmem.store.sqlite import SqliteStore
from flowmem.store.sqlite.fsync import AUTO_CHECKPOINT, CHECKPOINT_EVERY
from tests.store.conftest import open_backend

KEY = Address("session", "s1", "chat")
RECORD = Address("user", "u1", "prefs")


def test_no_wait_is_per_thread_and_restored() -> None:
    seen: list[bool] = []
    with no_wait():
        assert not waiting_allowed()
        worker = threading.Thread(target=lambda: seen.append(waiting_allowed()))
        worker.start()
        worker.join()
        with no_wait():
            assert not waiting_allowed()
        assert not waiting_allowed()
    assert waiting_allowed()
    assert seen == [True]


def test_mem_12_address_lock_held_elsewhere_raises_would_block_in_no_wait() -> None:
    locks = AddressLocks()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with locks.hold(KEY, 5):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(5)
        started = time.monotonic()
        with no_wait(), pytest.raises(WouldBlock), locks.hold(KEY, 5):
            pass
        assert time.monotonic() - started < 1  # refused at once, not after the bound
        with no_wait(), locks.hold(Address("session", "s2", "chat"), 5) as taken:
            assert taken  # another address is free
    finally:
        release.set()
        thread.join()
    with no_wait(), locks.hold(KEY, 5) as taken:
        assert taken


def test_only_local_backends_have_local_calls(store: Store) -> None:
    assert isinstance(store, LocalCalls) is (not store.url.startswith("postgresql"))


def test_no_wait_calls_work_as_usual_when_nothing_is_locked(store: Store) -> None:
    with no_wait():
        outcome = store.append(KEY, prepare({"role": "user", "content": "hi"}, 1))
        store.put_record(RECORD, {"theme": "dark"}, None)
        assert (outcome.appended, outcome.count) == (1, 1)
        assert store.load(KEY) == [
            {"role": "user", "content": "hi", "metadata": {}, "timestamp": 1}
        ]
        assert store.get_record(RECORD, 0.0) == (True, {"theme": "dark"})


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[tuple[SqliteStore, str]]:
    path = str(tmp_path / "store.db")
    opened = SqliteStore(f"sqlite:///{path}")
    try:
        yield opened, path
    finally:
        opened.close()


def test_mem_12_sqlite_file_locked_by_another_writer_raises_would_block_and_writes_nothing(
    sqlite_store: tuple[SqliteStore, str],
) -> None:
    store, path = sqlite_store
    store.append(KEY, prepare({"role": "user", "content": "first"}, 1))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another connection (another process, say) is writing
    try:
        started = time.monotonic()
        with no_wait():
            with pytest.raises(WouldBlock):
                store.append(KEY, prepare({"role": "user", "content": "second"}, 2))
            with pytest.raises(WouldBlock):
                store.put_record(RECORD, 1, None)
            with pytest.raises(WouldBlock):
                store.delete_record(RECORD)
            # readers never wait in WAL mode: a read goes on while the writer holds the lock
            assert [m["content"] for m in store.load(KEY)] == ["first"]
        assert time.monotonic() - started < 1  # refused at once, not after the busy timeout
    finally:
        other.execute("COMMIT")
        other.close()
    assert [m["content"] for m in store.load(KEY)] == ["first"]
    assert store.get_record(RECORD, 0.0) == (False, None)
    with no_wait():  # the lock is free again: the same calls go through
        outcome = store.append(KEY, prepare({"role": "user", "content": "second"}, 2))
    assert (outcome.appended, outcome.count) == (1, 2)


def test_mem_12_sqlite_waits_as_usual_outside_no_wait(sqlite_store: tuple[SqliteStore, str]) -> None:
    store, path = sqlite_store
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    releaser = threading.Timer(0.2, lambda: (other.execute("COMMIT"), other.close()))
    releaser.start()
    started = time.monotonic()
    outcome = store.append(KEY, prepare({"role": "user", "content": "waited"}, 1))
    releaser.join()
    assert time.monotonic() - started >= 0.15  # it waited for the other writer
    assert (outcome.appended, outcome.count) == (1, 1)


# --- group commit: no-wait writes are counted until one fsync covers them --------------------


def test_sqlite_no_wait_writes_wait_for_sync_and_one_sync_covers_them_all(
    sqlite_store: tuple[SqliteStore, str],
) -> None:
    store, _ = sqlite_store
    assert store.sync_barrier() is None
    store.append(KEY, prepare({"role": "user", "content": "waited"}, 1))
    assert store.sync_barrier() is None  # a write outside no-wait fsyncs itself (FULL)
    with store.deferred():
        store.append(KEY, prepare({"role": "user", "content": "a"}, 2))
        store.put_record(RECORD, 1, None)
        assert store.get_record(RECORD, 0.0) == (True, 1)  # a read adds nothing to sync
    barrier = store.sync_barrier()
    assert barrier == 2
    assert store.sync() == 2
    assert store.sync_barrier() is None
    with store.deferred():
        store.delete_record(RECORD)
    assert store.sync_barrier() == 3


def test_sqlite_no_wait_write_runs_at_normal_and_the_connection_goes_back_to_full(
    sqlite_store: tuple[SqliteStore, str],
) -> None:
    store, _ = sqlite_store
    modes: list[int] = []
    with store.deferred():
        store.append(KEY, prepare({"role": "user", "content": "a"}, 1))
    with store._connection() as conn:  # type: ignore[attr-defined]
        modes.append(conn.execute("PRAGMA synchronous").fetchone()[0])
        with store.deferred(), store._connection() as inner:  # type: ignore[attr-defined]
            modes.append(inner.execute("PRAGMA synchronous").fetchone()[0])
    assert modes == [2, 1]  # FULL outside no-wait, NORMAL inside


def test_sqlite_no_wait_writes_never_checkpoint_and_threaded_ones_still_do(
    sqlite_store: tuple[SqliteStore, str],
) -> None:
    store, _ = sqlite_store
    pages: list[int] = []
    with store.deferred(), store._connection() as conn:  # type: ignore[attr-defined]
        pages.append(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
    with store._connection() as conn:  # type: ignore[attr-defined]
        pages.append(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
    assert pages == [0, AUTO_CHECKPOINT]


def test_sqlite_sync_checkpoints_once_every_checkpoint_every_deferred_writes(
    sqlite_store: tuple[SqliteStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = sqlite_store
    made: list[tuple[int, int, int]] = []
    real = store.checkpoint  # type: ignore[attr-defined]

    def counted() -> tuple[int, int, int]:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(store, "checkpoint", counted)
    for n in range(1, CHECKPOINT_EVERY):
        with store.deferred():
            store.append(KEY, prepare({"role": "user", "content": f"m{n}"}, n))
        if n % 50 == 0:
            store.sync()
    store.sync()
    assert made == []  # fewer deferred writes than CHECKPOINT_EVERY: no checkpoint yet
    with store.deferred():
        store.append(KEY, prepare({"role": "user", "content": "the last"}, CHECKPOINT_EVERY))
    assert store.sync() == CHECKPOINT_EVERY
    assert len(made) == 1 and made[0][0] == 0  # one checkpoint, not blocked
    assert made[0][1] > 0 and made[0][1] == made[0][2]  # every frame copied to the file
    assert len(store.load(KEY)) == CHECKPOINT_EVERY


def test_sqlite_a_failed_checkpoint_does_not_fail_the_sync_it_follows(
    sqlite_store: tuple[SqliteStore, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, _ = sqlite_store

    def broken() -> tuple[int, int, int]:
        raise StoreError("disk I/O error")

    monkeypatch.setattr(store, "checkpoint", broken)
    for n in range(CHECKPOINT_EVERY):
        with store.deferred():
            store.append(KEY, prepare({"role": "user", "content": f"m{n}"}, n))
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        assert store.sync() == CHECKPOINT_EVERY  # durable: the fsync itself succeeded
    assert store.sync_barrier() is None
    assert "checkpoint" in caplog.text and "disk I/O error" in caplog.text


@pytest.mark.parametrize("mode", ["normal", "off"])
def test_sqlite_that_does_not_sync_commits_has_no_barrier(tmp_path: Path, mode: str) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}?synchronous={mode}")
    with store.deferred():
        store.append(KEY, prepare({"role": "user", "content": "a"}, 1))
    assert store.sync_barrier() is None
    store.close()


def test_sync_after_a_checkpoint_removed_the_wal_is_a_no_op(
    sqlite_store: tuple[SqliteStore, str],
) -> None:
    store, path = sqlite_store
    with store.deferred():
        store.append(KEY, prepare({"role": "user", "content": "a"}, 1))
    with store._connection() as conn:  # type: ignore[attr-defined]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    Path(f"{path}-wal").unlink(missing_ok=True)
    assert store.sync() == 1 and store.sync_barrier() is None


def test_the_memory_backend_has_local_calls_and_never_a_barrier(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = open_backend("memory", request, tmp_path)
    assert isinstance(store, LocalCalls)
    try:
        with store.deferred():
            store.append(KEY, prepare({"role": "user", "content": "a"}, 1))
        assert store.sync_barrier() is None
        assert store.sync() == 0
    finally:
        store.close()


@pytest.mark.postgres
def test_a_backend_whose_commit_is_durable_over_the_network_has_no_local_calls(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = open_backend("postgres", request, tmp_path)
    try:
        assert not isinstance(store, LocalCalls)  # the store pool runs its calls in threads
    finally:
        store.close()
