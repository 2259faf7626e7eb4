"""``PrivateSqliteStore`` (decision 0138): a database of its own in RAM, in WAL mode, gone when closed."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import pytest

from flowmem.core import prepare
from flowmem.store import Address
from flowmem.store.sqlite import private
from flowmem.store.sqlite.private import PrivateSqliteStore
from flowmem.store.sqlite.schema import MIGRATIONS

A = Address("session", "s1", "chat")


def user(text: str) -> list[dict[str, object]]:
    """One user message, prepared as the store takes it."""
    return prepare([{"role": "user", "content": text}], 1)


def test_each_store_starts_empty_at_the_current_schema_and_keeps_its_own_rows() -> None:
    first, second = PrivateSqliteStore(), PrivateSqliteStore()
    try:
        first.append(A, user("hi"))

        assert first.schema_version() == second.schema_version() == len(MIGRATIONS)
        assert [m["content"] for m in first.load(A)] == ["hi"]
        assert second.load(A) == [] and first.directory != second.directory
    finally:
        first.close()
        second.close()


def test_closing_removes_the_database() -> None:
    store = PrivateSqliteStore()
    store.append(A, user("hi"))
    directory = Path(store.directory)
    assert (directory / "memory.db").is_file()

    store.close()

    assert not directory.exists()


@pytest.mark.skipif(not os.path.isdir(private.TMPFS), reason="no tmpfs at /dev/shm")
def test_the_database_is_in_ram_in_wal_mode_without_fsync() -> None:
    store = PrivateSqliteStore()
    try:
        assert store.path.startswith(private.TMPFS + "/")
        with store._connection() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 0  # OFF
    finally:
        store.close()


def test_a_read_is_one_snapshot_while_a_writer_commits_without_waiting() -> None:
    """What SQLite's own in-memory database cannot do (decision 0138): no WAL, the writer waits."""
    store = PrivateSqliteStore()
    try:
        store.append(A, user("m0") + user("m1") + user("m2"))
        rows = store.iter_rows(A, batch=1)
        first = next(rows)
        done = threading.Event()
        writer = threading.Thread(target=lambda: (store.append(A, user("late")), done.set()))
        writer.start()

        assert done.wait(2.0), "the append waited for the open read"
        assert [first["content"], *(r["content"] for r in rows)] == ["m0", "m1", "m2"]
        writer.join()
        assert store.count(A) == 4
    finally:
        store.close()


def test_sweep_removes_what_a_gone_process_left_and_keeps_a_running_ones(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    left = tmp_path / f"{private.PREFIX}{gone.stdout.strip()}-abc"
    mine = tmp_path / f"{private.PREFIX}{os.getpid()}-def"
    other = tmp_path / "flowmem-something-else"
    for directory in (left, mine, other):
        directory.mkdir()
        (directory / "memory.db").write_bytes(b"x")

    removed = private.sweep(str(tmp_path))

    assert removed == [str(left)]
    assert not left.exists() and mine.exists() and other.exists()


def test_a_store_never_closed_is_removed_when_its_process_exits(tmp_path: Path) -> None:
    code = "from flowmem.store.sqlite.private import PrivateSqliteStore as P; s = P(); print(s.directory)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert not Path(done.stdout.strip()).exists()


def test_a_store_never_closed_is_collected_with_its_connections_files_and_writer_queue() -> None:
    """Dropped without close(): collected, its directory removed and no file of it left open.

    Before, its connections' quota function held the store (and itself the connection),
    so every such store kept its connections, its writer queue's file and its RAM
    until the process ended: tests open thousands of ``memory://`` stores.
    """
    store = PrivateSqliteStore()
    store.append(A, user("hi"))
    directory = store.directory
    gone = weakref.ref(store)
    del store
    gc.collect()
    assert gone() is None
    assert not Path(directory).exists()
    opened = [os.readlink(f"/proc/self/fd/{fd}") for fd in _fds()]
    assert not [path for path in opened if path.startswith(directory)]


def _fds() -> list[str]:
    """This process's open file descriptors (the ones still open when read)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        found.append(fd)
    return found


@pytest.mark.parametrize("kind", ["listing", "heads", "vectors"])
def test_a_store_a_kind_of_data_was_made_for_is_still_collected(kind: str) -> None:
    """A kind's object, made once per store, is kept on the store: it does not keep the store alive.

    Before, a dict keyed weakly by the store held each object, which holds its store:
    the entry kept the store (and its private database) alive until the process ended.
    """
    from flowmem.store.heads import session_buffers_of
    from flowmem.store.listing import listing_of
    from flowmem.store.vectorstores import vectors_of

    make = {"listing": listing_of, "heads": session_buffers_of, "vectors": vectors_of}[kind]
    store = PrivateSqliteStore()
    made = make(store)
    assert make(store) is made  # made once per store
    directory, gone = store.directory, weakref.ref(store)
    del store, made
    gc.collect()
    assert gone() is None
    assert not Path(directory).exists()
