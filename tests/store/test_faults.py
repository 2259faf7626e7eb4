"""Storage faults reach callers as typed errors: full, read-only, damaged; nothing half-written.

SQLite's conditions are produced for real where that works without privileges: a
``max_page_count`` cap (SQLITE_FULL), ``PRAGMA query_only`` set on every connection
the store opens (SQLITE_READONLY, the driver-level stand-in for a read-only
mount: chmod does not stop root), and table pages overwritten on disk
(SQLITE_CORRUPT). Files made immutable under an open store are made so for real
(``chattr +i``, root on a file system with inode attributes; skipped elsewhere), in
a forked child: before docs/decisions/0046 that killed the process with SIGBUS.
PostgreSQL's come from the server: a read-only default
transaction (25006), and a trigger raising disk_full (53100) and data_corrupted
(XX001) with those SQLSTATEs.
"""

from __future__ import annotations

import errno
import multiprocessing
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import prepare
from flowmem.errors import (
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from flowmem.store import Address, open_store
from flowmem.store.sqlite import SqliteStore, driver_error
from flowmem.store.sqlite.fsync import os_error

FORK = multiprocessing.get_context("fork")
KEY = Address("global", "", "k")
BUFFER = Address("user", "alice", "chat")


def big_message(size: int = 200_000) -> list[dict[str, Any]]:
    """One user message of ``size`` characters, as stored rows."""
    return prepare({"role": "user", "content": "x" * size}, 1)


def page_count(path: Path) -> int:
    """The pages of a closed SQLite file."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])
    finally:
        conn.close()


def capped_store(path: Path, pages: int) -> SqliteStore:
    """A store whose connections may not grow the file beyond ``pages`` (SQLITE_FULL)."""

    class Capped(SqliteStore):
        def _connect(self) -> sqlite3.Connection:
            conn = super()._connect()
            conn.execute(f"PRAGMA max_page_count = {pages}")
            return conn

    return Capped(f"sqlite:///{path}")


def read_only_store(path: Path) -> SqliteStore:
    """A store whose every connection refuses writes (SQLITE_READONLY), as on a read-only mount."""

    class ReadOnly(SqliteStore):
        def _connect(self) -> sqlite3.Connection:
            conn = super()._connect()
            conn.execute("PRAGMA query_only = 1")
            return conn

    return ReadOnly(f"sqlite:///{path}")


def corrupt(path: Path, tables: tuple[str, ...] | None = None) -> None:
    """Overwrite the root pages of ``tables`` (default: every table but the schema version)."""
    conn = sqlite3.connect(path)
    try:
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        roots = conn.execute(
            "SELECT name, tbl_name, rootpage FROM sqlite_master WHERE rootpage > 0"
        ).fetchall()
    finally:
        conn.close()
    with path.open("r+b") as db:
        for _, table, root in roots:
            if table == "flowmem_schema" or (tables is not None and table not in tables):
                continue
            db.seek((root - 1) * size)
            db.write(b"\xa5" * size)


@pytest.fixture
def tmp_path(disk_tmp_path: Path) -> Path:
    """On a disk: ``chattr +i`` needs inode attributes, the tests' RAM tmpfs has none (conftest)."""
    return disk_tmp_path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite file with the schema, one record and one buffer row, closed (WAL checkpointed)."""
    path = tmp_path / "faults.db"
    store = open_store(f"sqlite:///{path}")
    store.put_record(KEY, "v", None)
    store.append(BUFFER, prepare({"role": "user", "content": "hi"}, 1))
    store.close()
    return path


def test_a_full_sqlite_file_is_store_full_and_nothing_is_written(db: Path) -> None:
    store = capped_store(db, page_count(db))
    try:
        with pytest.raises(StoreFullError) as raised:
            store.append(BUFFER, big_message())
        assert raised.value.code == "store_full" and "full" in raised.value.message
        with pytest.raises(StoreFullError):
            store.put_record(Address("global", "", "big"), "y" * 200_000, None)
        assert store.count(BUFFER) == 1  # the refused append changed nothing
        assert store.get_record(Address("global", "", "big"), 0) == (False, None)
    finally:
        store.close()


def test_a_read_only_sqlite_file_is_store_read_only(db: Path) -> None:
    store = read_only_store(db)
    try:
        assert store.get_record(KEY, 0) == (True, "v")  # reads still work
        with pytest.raises(StoreReadOnlyError) as raised:
            store.put_record(KEY, "w", None)
        assert raised.value.code == "store_read_only"
        with pytest.raises(StoreReadOnlyError):
            store.append(BUFFER, prepare({"role": "user", "content": "more"}, 2))
        assert store.get_record(KEY, 0) == (True, "v") and store.count(BUFFER) == 1
    finally:
        store.close()


def test_a_corrupted_sqlite_file_is_store_corrupt(db: Path) -> None:
    corrupt(db)
    store = open_store(f"sqlite:///{db}")
    try:
        with pytest.raises(StoreCorruptError) as raised:
            store.put_record(KEY, "w", None)
        assert raised.value.code == "store_corrupt"
        with pytest.raises(StoreCorruptError):
            store.load(BUFFER)
    finally:
        store.close()


def test_a_file_that_is_not_a_database_is_store_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"\x13" * 8192)
    with pytest.raises(StoreCorruptError):
        open_store(f"sqlite:///{path}")


# --- files made immutable under the store (issue 24 §4, docs/decisions/0046) -------------------


def chattr(flag: str, paths: list[Path]) -> bool:
    """``chattr FLAG`` on the paths that exist; True when it worked."""
    found = [str(p) for p in paths if p.exists()]
    if not found or shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, *found], capture_output=True).returncode == 0


@pytest.fixture
def can_seal(tmp_path: Path) -> None:
    """Skip unless ``chattr +i`` works here (root, a file system with inode attributes)."""
    probe = tmp_path / "probe"
    probe.write_text("x")
    if not chattr("+i", [probe]):
        pytest.skip("chattr +i is not available here (needs root and inode attributes)")
    chattr("-i", [probe])


@contextmanager
def sealed(paths: list[Path]) -> Iterator[None]:
    """The files immutable for the block, writable again however it ends."""
    assert chattr("+i", paths)
    try:
        yield
    finally:
        chattr("-i", paths)


def _in_child(target: Any, *args: Any) -> int | None:
    """Run ``target`` in a forked child; its exit code (a SIGBUS would be -7, not a dead pytest)."""
    child = FORK.Process(target=target, args=args)
    child.start()
    child.join(120)
    return child.exitcode


def _files(db: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return [Path(f"{db}{suffix}") for suffix in suffixes]


def _store_under_sealing(db: str, suffixes: tuple[str, ...]) -> None:
    """In a child: the store's files made immutable while it is open, then writable again."""
    files = _files(Path(db), suffixes)
    store = open_store(f"sqlite:///{db}")
    store.append(BUFFER, prepare({"role": "user", "content": "more"}, 2))
    with sealed(files):
        with pytest.raises(StoreReadOnlyError):
            store.append(BUFFER, prepare({"role": "user", "content": "refused"}, 3))
        with pytest.raises(StoreReadOnlyError):
            store.put_record(KEY, "w", None)
        assert [r["content"] for r in store.load(BUFFER)] == ["hi", "more"]
        assert store.get_record(KEY, 0) == (True, "v")
        assert store.count(BUFFER) == 2
    store.append(BUFFER, prepare({"role": "user", "content": "again"}, 4))  # writable again
    assert store.count(BUFFER) == 3
    with sealed(files):
        with pytest.raises(StoreReadOnlyError):
            store.append(BUFFER, prepare({"role": "user", "content": "refused"}, 5))
        store.close()  # the last connection closes without a checkpoint into the mapped -shm
    again = open_store(f"sqlite:///{db}")
    assert [r["content"] for r in again.load(BUFFER)] == ["hi", "more", "again"]
    again.close()


@pytest.mark.parametrize(
    "suffixes",
    [("-shm",), ("", "-wal"), ("", "-wal", "-shm", "-writers")],
    ids=["shm-only", "database-and-wal", "every-file"],
)
def test_files_made_immutable_under_a_sqlite_store_turn_it_read_only_and_never_crash_it(
    db: Path, can_seal: None, suffixes: tuple[str, ...]
) -> None:
    try:
        assert _in_child(_store_under_sealing, str(db), suffixes) == 0
    finally:
        chattr("-i", _files(db, ("", "-wal", "-shm", "-writers")))


def _store_opened_sealed(db: str) -> None:
    """In a child: a store opened on files that are immutable already."""
    files = _files(Path(db), ("", "-wal", "-shm", "-writers"))
    with sealed(files):
        store = open_store(f"sqlite:///{db}")
        assert store.get_record(KEY, 0) == (True, "v")
        with pytest.raises(StoreReadOnlyError):
            store.append(BUFFER, prepare({"role": "user", "content": "refused"}, 3))
        store.close()


def test_a_sqlite_store_opened_on_immutable_files_serves_reads_and_refuses_writes(
    db: Path, can_seal: None
) -> None:
    store = open_store(f"sqlite:///{db}")  # the files as a running server leaves them
    try:
        assert _in_child(_store_opened_sealed, str(db)) == 0
    finally:
        store.close()
        chattr("-i", _files(db, ("", "-wal", "-shm", "-writers")))


def _loan_across_sealing(db: str) -> None:
    """In a child: a read that starts while a connection of the writable files is on loan."""
    store = open_store(f"sqlite:///{db}")
    assert isinstance(store, SqliteStore)
    files = _files(Path(db), ("-shm",))
    lent, give_back = threading.Event(), threading.Event()

    def hold() -> None:
        with store._connection():
            lent.set()
            give_back.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert lent.wait(10)
    with sealed(files):
        threading.Timer(0.3, give_back.set).start()
        started = time.monotonic()
        # no connection opens while one mapped read-write is still on loan
        assert store.count(BUFFER) == 1
        assert time.monotonic() - started >= 0.25
        holder.join(10)
        with pytest.raises(StoreReadOnlyError):
            store.put_record(KEY, "w", None)
        store.close()


def test_a_loan_of_the_writable_files_is_waited_for_before_read_only_connections_open(
    db: Path, can_seal: None
) -> None:
    try:
        assert _in_child(_loan_across_sealing, str(db)) == 0
    finally:
        chattr("-i", _files(db, ("", "-wal", "-shm", "-writers")))


def test_an_io_error_on_an_immutable_file_is_store_read_only(db: Path, can_seal: None) -> None:
    """The race left after the check: SQLite reports the kernel's EPERM as SQLITE_IOERR."""
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE  # type: ignore[attr-defined]
    assert type(driver_error(error, str(db), database=str(db))) is StoreError
    with sealed([db]):
        typed = driver_error(error, str(db), database=str(db))
    assert isinstance(typed, StoreReadOnlyError) and f"{db} is immutable" in typed.message


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (errno.ENOSPC, StoreFullError),
        (errno.EDQUOT, StoreFullError),
        (errno.EROFS, StoreReadOnlyError),
        (errno.EIO, StoreUnavailableError),
    ],
)
def test_a_failed_fsync_is_typed_by_its_errno(code: int, kind: type[StoreError]) -> None:
    assert type(os_error(OSError(code, "x"), "sync")) is kind


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture
def pg_url(postgres_db_url: str) -> Iterator[str]:
    """A fresh schema with flowmem's tables in it."""
    open_store(postgres_db_url).close()
    yield postgres_db_url


def _fail_writes(url: str, sqlstate: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION fail_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'injected' USING ERRCODE = TG_ARGV[0]; END $$"
        )
        for table in ("records", "buffers"):
            conn.execute(
                f"CREATE TRIGGER fail BEFORE INSERT OR UPDATE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION fail_write('{sqlstate}')"
            )


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sqlstate", "kind"),
    [("53100", StoreFullError), ("25006", StoreReadOnlyError), ("XX001", StoreCorruptError)],
)
def test_postgres_errors_are_typed_by_sqlstate(
    pg_url: str, sqlstate: str, kind: type[StoreError]
) -> None:
    _fail_writes(pg_url, sqlstate)
    store = open_store(pg_url)
    try:
        with pytest.raises(kind):
            store.put_record(KEY, "v", None)
        with pytest.raises(kind):
            store.append(BUFFER, prepare({"role": "user", "content": "hi"}, 1))
        assert store.count(BUFFER) == 0 and store.get_record(KEY, 0) == (False, None)
    finally:
        store.close()


@pytest.mark.postgres
def test_a_read_only_postgres_server_is_store_read_only(pg_url: str) -> None:
    # opening runs the migration check, a write: a read-only server refuses it, typed
    with pytest.raises(StoreReadOnlyError):
        open_store(pg_url + "%20-cdefault_transaction_read_only%3Don")
