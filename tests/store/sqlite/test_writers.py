"""Writers of one SQLite file take turns in arrival order (docs/decisions/0026).

In a process they queue on a ``FairLock``; across processes on a ticket queue of
byte-range locks on the sidecar file ``<database>-writers``. Nothing here measures
time: the order is forced by letting each writer park before the next one comes.
The latency targets live in ``bench/writers.py``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.store import Address, open_store
from flowmem.store.locks import FairLock, WouldBlock, no_wait
from flowmem.store.sqlite import SqliteStore
from flowmem.store.sqlite.writers import writer_queue

KEY = Address("session", "s1", "chat")
FORK = multiprocessing.get_context("fork")


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


def _parked(lock: FairLock) -> int:
    return len(lock._waiters)


def _say(text: str) -> list[Any]:
    return prepare({"role": "user", "content": text}, 1)


def test_fair_lock_hands_over_to_the_oldest_waiter_not_to_a_returning_holder() -> None:
    lock = FairLock()
    assert lock.acquire(5)
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append("waiter") if lock.acquire(5) else None)
    waiter.start()
    _until(lambda: _parked(lock) == 1, "the waiter parked")
    lock.release()
    # a plain lock would let the releasing thread take it straight back (barging)
    assert not lock.acquire(0, blocking=False)
    waiter.join(10)
    assert got == ["waiter"]
    lock.release()
    assert lock.acquire(0, blocking=False)
    lock.release()


def test_fair_lock_timeout_leaves_the_queue_and_the_next_waiter_still_gets_it() -> None:
    lock = FairLock()
    assert lock.acquire(5)
    assert not lock.acquire(0.01)  # timed out: gone from the queue
    assert _parked(lock) == 0
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(lock.acquire(10)))
    waiter.start()
    _until(lambda: _parked(lock) == 1, "the waiter parked")
    lock.release()
    waiter.join(10)
    assert got == [True]
    lock.release()


def test_in_process_writers_of_one_file_are_served_in_arrival_order(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(store, SqliteStore)
    served: list[Address] = []
    apply = store._apply_append

    def recording(conn: Any, address: Address, *args: Any) -> Any:
        served.append(address)
        return apply(conn, address, *args)

    store._apply_append = recording  # type: ignore[method-assign]
    arrivals = [Address("session", f"s{n}", "chat") for n in range(8)]
    threads = [
        threading.Thread(target=store.append, args=(address, _say(address.scope_id)))
        for address in arrivals
    ]
    with store._queue.hold(5) as taken:  # another writer of the file is busy
        assert taken
        for n, thread in enumerate(threads):
            thread.start()
            _until(lambda n=n: _parked(store._queue._lock) == n + 1, f"writer {n} parked")
    for thread in threads:
        thread.join(20)
    assert served == arrivals  # distinct buffers, one file: first come, first served
    store.close()


def test_in_process_appends_to_one_buffer_are_served_in_arrival_order(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(store, SqliteStore)
    threads = [threading.Thread(target=store.append, args=(KEY, _say(f"m{n}"))) for n in range(6)]
    with store._locks.hold(KEY, 5):
        for n, thread in enumerate(threads):
            thread.start()
            lock = store._locks._locks[KEY].lock
            _until(lambda n=n, lock=lock: _parked(lock) == n + 1, f"writer {n} parked")
    for thread in threads:
        thread.join(20)
    assert [row["content"] for row in store.load(KEY)] == [f"m{n}" for n in range(6)]
    store.close()


def test_stores_of_one_file_in_a_process_share_its_queue(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    first, second = open_store(f"sqlite:///{path}"), open_store(f"sqlite:///{path}")
    assert isinstance(first, SqliteStore) and isinstance(second, SqliteStore)
    assert first._queue is second._queue is writer_queue(path)
    assert Path(f"{path}-writers").exists()
    first.close()
    first.close()  # closing twice releases the queue once
    second.append(KEY, _say("still queued"))  # the queue is open while a store uses it
    second.close()


def test_mem_12_a_writer_holding_the_file_past_the_bound_lets_an_append_go_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(store, SqliteStore)
    caplog.set_level(logging.WARNING, logger="flowmem")
    with store._queue.hold(5):
        done: list[int] = []
        other = threading.Thread(
            target=lambda: done.append(store.append(KEY, _say("hi"), lock_timeout=0.2).count)
        )
        other.start()
        other.join(20)
        assert done == [1]  # it did not wait for the holder beyond its bound
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unserialized" in warnings[0].getMessage()
    caplog.clear()
    store.append(KEY, _say("again"), lock_timeout=0.05)  # released: its turn comes at once
    assert [r for r in caplog.records if r.levelno == logging.WARNING] == []
    store.close()


def test_no_wait_raises_would_block_when_a_writer_of_the_process_is_ahead(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    assert isinstance(store, SqliteStore)
    refused: list[BaseException] = []

    def on_the_loop() -> None:
        with no_wait():
            try:
                store.append(Address("session", "other", "chat"), _say("no"))
            except WouldBlock as exc:
                refused.append(exc)

    with store._queue.hold(5):
        loop = threading.Thread(target=on_the_loop)
        loop.start()
        loop.join(20)
    assert len(refused) == 1
    assert store.count(Address("session", "other", "chat")) == 0
    with no_wait():
        assert store.append(KEY, _say("free")).count == 1
    store.close()


# --- across processes ---------------------------------------------------------------------


def _tickets_taken(path: str) -> int:
    with open(f"{path}-writers", "rb") as sidecar:
        return int.from_bytes(sidecar.read(8), "little")


def _append_one(path: str, text: str) -> None:
    store = open_store(f"sqlite:///{path}")
    try:
        store.append(KEY, _say(text))
    finally:
        store.close()


def _hold_turn(path: str, ready: Any, release: Any) -> None:
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    with store._queue.hold(30) as taken:
        assert taken
        ready.set()
        release.wait(30)
    store.close()


def _stay_open(path: str, ready: Any, release: Any) -> None:
    store = open_store(f"sqlite:///{path}")
    ready.set()
    release.wait(60)
    store.close()


@pytest.fixture
def another_process(tmp_path: Path) -> Iterator[str]:
    """A database that another process has open (so this one's writes take tickets)."""
    path = str(tmp_path / "s.db")
    ready, release = FORK.Event(), FORK.Event()
    other = FORK.Process(target=_stay_open, args=(path, ready, release))
    other.start()
    assert ready.wait(30)
    yield path
    release.set()
    other.join(30)


def test_a_process_alone_on_the_file_takes_no_ticket_and_one_with_company_does(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "s.db")
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore) and store._queue.tickets is not None
    store.append(KEY, _say("alone"))
    assert store._queue.tickets.alone() and _tickets_taken(path) == 0
    ready, release = FORK.Event(), FORK.Event()
    other = FORK.Process(target=_stay_open, args=(path, ready, release))
    other.start()
    assert ready.wait(30)
    assert not store._queue.tickets.alone()
    store.append(KEY, _say("with company"))
    assert _tickets_taken(path) == 1
    release.set()
    other.join(30)
    assert store._queue.tickets.alone()  # the kernel dropped the other's lock with it
    store.append(KEY, _say("alone again"))
    assert _tickets_taken(path) == 1
    store.close()


def test_processes_writing_one_file_are_served_in_arrival_order(another_process: str) -> None:
    path = another_process
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteStore)
    children = []
    with store._queue.hold(5) as taken:  # this process writes: the others queue behind it
        assert taken
        for n in range(4):
            before = _tickets_taken(path)
            child = FORK.Process(target=_append_one, args=(path, f"process {n}"))
            child.start()
            children.append(child)
            _until(lambda b=before: _tickets_taken(path) == b + 1, f"process {n} queued")
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    assert [row["content"] for row in store.load(KEY)] == [f"process {n}" for n in range(4)]
    store.close()


def test_a_killed_process_never_blocks_the_queue(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    store = open_store(f"sqlite:///{path}")
    ready, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold_turn, args=(path, ready, release))
    holder.start()
    assert ready.wait(30)
    before = _tickets_taken(path)
    done: list[int] = []
    waiter = threading.Thread(target=lambda: done.append(store.append(KEY, _say("after")).count))
    waiter.start()
    _until(lambda: _tickets_taken(path) == before + 1, "the append queued")
    assert done == []  # waiting for the holder's turn to end
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)  # the kernel drops its locks: the queue moves on
    holder.join(30)
    waiter.join(20)
    assert done == [1]
    store.close()


def test_no_wait_raises_would_block_when_another_process_is_ahead(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    store = open_store(f"sqlite:///{path}")
    ready, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold_turn, args=(path, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        before = _tickets_taken(path)
        with no_wait(), pytest.raises(WouldBlock):
            store.append(KEY, _say("no"))
        assert _tickets_taken(path) == before  # it took no ticket: nobody waits behind it
    finally:
        release.set()
        holder.join(30)
    assert store.count(KEY) == 0
    with no_wait():
        assert store.append(KEY, _say("yes")).count == 1
    store.close()


def _append_many(path: str, worker: int, count: int) -> None:
    store = open_store(f"sqlite:///{path}")
    try:
        for n in range(count):
            store.append(Address("session", f"s{n % 7}", "chat"), _say(f"w{worker}-{n}"))
    finally:
        store.close()


@pytest.mark.slow
def test_queued_processes_and_threads_lose_no_append(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    store = open_store(f"sqlite:///{path}")
    children = [FORK.Process(target=_append_many, args=(path, w, 60)) for w in range(3)]
    for child in children:
        child.start()
    threads = [threading.Thread(target=_append_many, args=(path, w, 60)) for w in (3, 4)]
    for thread in threads:
        thread.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    for thread in threads:
        thread.join(120)
    seen = [
        row["content"] for n in range(7) for row in store.load(Address("session", f"s{n}", "chat"))
    ]
    assert sorted(seen) == sorted(f"w{w}-{n}" for w in range(5) for n in range(60))
    # every buffer's count matches its rows: no two transactions interleaved on a header
    assert all(
        store.count(Address("session", f"s{n}", "chat"))
        == len(store.load(Address("session", f"s{n}", "chat")))
        for n in range(7)
    )
    store.close()
