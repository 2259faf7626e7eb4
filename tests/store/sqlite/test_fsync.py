"""Threads writing one SQLite file share an fsync of the WAL (docs/decisions/0029).

A write commits without its own fsync, gives the file's turn to the next writer,
and returns only after an fsync that began after its commit. Also: the table of
per-address locks forgets the addresses nobody holds (issue 14 §3).
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from flowmem.core import prepare
from flowmem.errors import StoreUnavailableError
from flowmem.store import Address, open_store
from flowmem.store.locks import AddressLocks, no_wait
from flowmem.store.sqlite import SqliteStore
from flowmem.store.sqlite.fsync import SharedSync

KEY = Address("session", "s1", "chat")
FORK = multiprocessing.get_context("fork")


def _say(text: str) -> list[object]:
    return prepare({"role": "user", "content": text}, 1)


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.002)


# --- SharedSync: leader and followers -----------------------------------------------------


def test_shared_sync_waiters_that_arrive_during_an_fsync_share_the_next_one() -> None:
    began: list[int] = []
    release = [threading.Event() for _ in range(3)]

    def sync() -> None:
        began.append(len(began))
        assert release[len(began) - 1].wait(10)

    group = SharedSync(sync)
    returned: list[str] = []

    def waiter(name: str) -> None:
        group.wait()
        returned.append(name)

    leader = threading.Thread(target=waiter, args=("leader",))
    leader.start()
    _until(lambda: began == [0], "the leader's fsync began")
    followers = [threading.Thread(target=waiter, args=(n,)) for n in ("b", "c")]
    for thread in followers:
        thread.start()
    time.sleep(0.05)  # both parked behind the fsync in flight
    release[0].set()
    leader.join(10)
    # the fsync in flight may have begun before b's and c's commits: it does not cover them
    assert returned == ["leader"]
    _until(lambda: began == [0, 1], "one more fsync began")
    time.sleep(0.05)
    assert returned == ["leader"]
    release[1].set()
    for thread in followers:
        thread.join(10)
    assert sorted(returned) == ["b", "c", "leader"]
    assert began == [0, 1]  # b and c shared one fsync


def test_shared_sync_failed_fsync_is_logged_and_the_writers_return(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def sync() -> None:
        raise StoreUnavailableError("cannot sync: Input/output error")

    group = SharedSync(sync)
    with caplog.at_level(logging.ERROR, logger="flowmem"):
        group.wait()  # committed and visible: answered as done (docs/decisions/0019)
    assert "fsync of committed writes failed" in caplog.text


def test_shared_sync_in_a_forked_child_does_not_wait_for_the_parents_leader() -> None:
    parent = os.getpid()
    release = threading.Event()
    group = SharedSync(lambda: release.wait(10) if os.getpid() == parent else None)
    leader = threading.Thread(target=group.wait)
    leader.start()
    _until(lambda: group._leading, "the parent's leader is in its fsync")
    child = FORK.Process(target=group.wait)  # the leader thread does not exist in the child
    child.start()
    child.join(10)
    if child.is_alive():
        child.kill()
    release.set()
    leader.join(10)
    assert child.exitcode == 0


def test_shared_sync_nested_blocks_wait_once_and_a_raising_block_does_not_wait() -> None:
    syncs: list[int] = []
    group = SharedSync(lambda: syncs.append(1))
    with group.commit():
        assert group.joined()
        with group.commit():
            group.changed()  # as a write that committed rows notes it
        assert syncs == []
    assert syncs == [1] and not group.joined()
    with pytest.raises(RuntimeError), group.commit():
        group.changed()
        raise RuntimeError("rolled back")
    assert syncs == [1]
    with group.commit():
        pass  # a block that changed nothing (a duplicate append), alone: no fsync (issue 26 §3)
    assert syncs == [1]


# --- SqliteStore: threads' appends ----------------------------------------------------------


def test_sqlite_threaded_appends_share_fsyncs_and_each_returns_after_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(store, SqliteStore)
    # every append shares: one that found itself alone would commit with SQLite's own
    # fsync, which is not counted here (tests below, decision 0095)
    monkeypatch.setattr(store, "_alone_writer", lambda: False)
    real = os.fdatasync
    fsyncs: list[tuple[float, float]] = []

    def slow_fdatasync(fd: int) -> None:
        began = time.monotonic()
        time.sleep(0.02)  # a slow disk: writers pile up behind the fsync
        real(fd)
        fsyncs.append((began, time.monotonic()))

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    spans: list[tuple[float, float]] = []

    def writer(n: int) -> None:
        for i in range(5):
            began = time.monotonic()
            store.append(Address("session", f"s{n}", "chat"), _say(f"w{n} m{i}"))
            spans.append((began, time.monotonic()))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(spans) == 30
    # durable on return: an fsync of the WAL began after the append began and ended before it returned
    for began, returned in spans:
        assert any(began <= f0 and f1 <= returned for f0, f1 in fsyncs), (began, returned)
    assert len(fsyncs) < len(spans)  # shared, not one per append
    assert sum(store.count(Address("session", f"s{n}", "chat")) for n in range(6)) == 30
    with store._connection() as conn:  # a loan outside a write runs at the file's own level
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()


def test_sqlite_no_wait_and_normal_writes_do_not_join_the_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fsyncs(monkeypatch)
    normal = open_store(f"sqlite:///{tmp_path / 'n.db'}?synchronous=NORMAL")
    normal.append(KEY, _say("no fsync promised"))
    normal.close()
    assert calls == []
    full = open_store(f"sqlite:///{tmp_path / 'f.db'}")
    with full.deferred(), no_wait():  # as the HTTP app's pool calls it
        full.append(KEY, _say("deferred to the HTTP app's sync"))
    assert calls == [] and full.sync_barrier() == 1
    full.close()


def test_sqlite_failed_group_fsync_answers_the_append_and_the_next_one_syncs_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(store, SqliteStore)
    monkeypatch.setattr(store, "_alone_writer", lambda: False)  # as beside another writer
    failures: list[int] = []

    def failing_fdatasync(fd: int) -> None:
        failures.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    with caplog.at_level(logging.ERROR, logger="flowmem"):
        outcome = store.append(KEY, _say("committed, then the fsync failed"))
    assert outcome.appended == 1 and len(failures) == 1
    assert "fsync of committed writes failed" in caplog.text
    assert store.group_commit.failed
    store.append(KEY, _say("synced by SQLite's own commit"))  # FULL: no fdatasync of ours
    assert len(failures) == 1 and not store.group_commit.failed
    assert store.count(KEY) == 2
    store.close()


# --- a writer with no one to share an fsync with (decision 0095) ---------------------------


def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``fdatasync`` flowmem makes from now on (SQLite's own are not seen)."""
    calls: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    return calls


def _writer_in_a_block(store: SqliteStore) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """A thread (not started) that commits a change and waits for its fsync until released.

    Returns the thread, the event it sets once inside its block, and the one that lets it go.
    """
    inside, release = threading.Event(), threading.Event()

    def writer_between_commit_and_fsync() -> None:
        with store._commits.commit():
            store._commits.changed()  # as a write that committed rows notes it
            inside.set()
            assert release.wait(10)

    return threading.Thread(target=writer_between_commit_and_fsync), inside, release


def _levels(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ``synchronous`` level of every connection loan that sets one from now on."""
    seen: list[object] = []
    real = SqliteStore._pragma

    def pragma(conn: object, name: str, value: object) -> None:
        if name == "synchronous":
            seen.append(value)
        real(conn, name, value)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteStore, "_pragma", staticmethod(pragma))
    return seen


def test_sqlite_lone_writer_commits_with_sqlites_own_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone in its process and on the file: FULL at commit, no shared fsync of flowmem's."""
    store = open_store(f"sqlite:///{tmp_path / 'lone.db'}")
    assert isinstance(store, SqliteStore)
    calls = _fsyncs(monkeypatch)
    levels = _levels(store, monkeypatch)
    store.append(KEY, _say("alone"))
    assert calls == [] and levels == ["FULL"]
    assert store.count(KEY) == 1
    store.close()


def test_sqlite_writer_beside_a_thread_waiting_for_its_fsync_shares_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'beside.db'}")
    assert isinstance(store, SqliteStore)
    calls = _fsyncs(monkeypatch)
    levels = _levels(store, monkeypatch)
    other, committed, release = _writer_in_a_block(store)
    other.start()
    assert committed.wait(10)
    store.append(KEY, _say("beside another writer"))
    assert levels == ["NORMAL"] and len(calls) == 1  # committed without, then one shared fsync
    release.set()
    other.join(10)
    store.close()


def test_sqlite_lone_writer_waits_for_no_shared_fsync_when_a_thread_arrives_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone at its loan, its own commit fsyncs: a thread that enters later does not make it wait."""
    store = open_store(f"sqlite:///{tmp_path / 'arrives.db'}")
    assert isinstance(store, SqliteStore)
    calls = _fsyncs(monkeypatch)
    other, entered, release = _writer_in_a_block(store)
    check = SqliteStore._check_guard

    def check_then_let_another_in(self: SqliteStore, conn: object, guard: object) -> None:
        check(self, conn, guard)  # type: ignore[arg-type]
        if not other.is_alive() and not entered.is_set():
            other.start()
            assert entered.wait(10)

    monkeypatch.setattr(SqliteStore, "_check_guard", check_then_let_another_in)
    store.append(KEY, _say("alone at the loan"))
    assert calls == []  # returned on SQLite's own fsync, not after a shared one
    release.set()
    other.join(10)
    assert len(calls) == 1  # the later writer's block waited for its shared fsync
    store.close()


def _hold_open(path: str, ready: object, done: object) -> None:
    store = open_store(f"sqlite:///{path}")
    store.append(Address("session", "other", "chat"), _say("another process"))
    ready.set()  # type: ignore[attr-defined]
    done.wait(20)  # type: ignore[attr-defined]
    store.close()


def test_sqlite_writer_beside_another_process_shares_its_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process has the file open: the fsync stays out of the file's write lock."""
    path = str(tmp_path / "procs.db")
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    ready, done = FORK.Event(), FORK.Event()
    child = FORK.Process(target=_hold_open, args=(path, ready, done))
    child.start()
    try:
        assert ready.wait(20)
        calls = _fsyncs(monkeypatch)
        levels = _levels(store, monkeypatch)
        store.append(KEY, _say("beside another process"))
        assert levels == ["NORMAL"] and len(calls) == 1
    finally:
        done.set()
        child.join(20)
    store.close()


# --- AddressLocks forgets idle addresses ---------------------------------------------------


def test_address_locks_table_does_not_grow_over_10000_distinct_addresses() -> None:
    locks = AddressLocks()
    for n in range(10_000):
        with locks.hold(Address("session", f"s{n}", "chat"), 5) as taken:
            assert taken and len(locks._locks) == 1
    assert len(locks._locks) == 0


def test_memory_store_appends_to_10000_buffers_leave_no_lock_behind() -> None:
    store = open_store("memory://")
    for n in range(10_000):
        store.append(Address("session", f"s{n}", "chat"), _say("hi"))
    assert len(store._locks._locks) == 0  # type: ignore[attr-defined]
    store.close()


def test_address_lock_entry_lives_while_a_thread_holds_or_waits_and_serializes() -> None:
    locks = AddressLocks()
    order: list[str] = []

    def waiter() -> None:
        with locks.hold(KEY, 5):
            order.append("waiter")

    with locks.hold(KEY, 5):
        thread = threading.Thread(target=waiter)
        thread.start()
        _until(lambda: len(locks._locks[KEY].lock._waiters) == 1, "the waiter parked")
        assert locks._locks[KEY].users == 2
        order.append("holder")
    thread.join(10)
    assert order == ["holder", "waiter"] and len(locks._locks) == 0
