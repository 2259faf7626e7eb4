"""The SQLite engine as ``memory://`` would run it: a private database that lives in memory.

Issue 39 §3 asks whether ``memory://`` should become ``SqliteStore`` on a private
in-memory database (deleting the Python engine and its twins). Two ways to give the
store's pool of connections one private database held in RAM, both measured by
``bench/memory_engine.py`` and checked by ``tests/bench/test_private_sqlite.py``:

- ``MemdbSqliteStore``: SQLite's ``memdb`` VFS (``file:/name?vfs=memdb``), one
  database shared by the pool's connections of this process, gone when the last
  closes. It has no write-ahead log (``journal_mode`` stays ``memory``): a reader
  holds its lock until its statement ends, so a writer waits behind it.
- ``TmpfsSqliteStore``: the store's own file in WAL mode, in a private directory on
  ``/dev/shm`` (tmpfs: RAM, no disk), ``synchronous=OFF``, removed on close.

Neither changes ``SqliteStore``: the memdb one opens its connections itself
(``_connect``, the pool's one hook) and keeps the store's file guard and writer queue
on a private directory that holds no database. Both start from a copy of one database
migrated once per process (``template``): migrating a new database costs ~80 ms, a
copy ~1 ms (``bench/memory_engine.py``'s "open+close").
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
import threading
import uuid
from contextlib import closing

from flowmem.store.base import DEFAULT_LOCK_TIMEOUT
from flowmem.store.sqlite import SqliteStore
from flowmem.store.sqlite.driver import _Connection, add_quota_function

TMPFS = "/dev/shm"
_made: dict[bool, str] = {}  # the templates' paths, once made: WAL or not
_making = threading.Lock()


def template(wal: bool = True) -> str:
    """A database of the current schema, migrated once per process (removed at exit).

    ``wal=False``: the same in a rollback journal (a ``memdb`` database has no WAL,
    and a copy of a WAL file's first page would say it has).
    """
    with _making:
        if not _made:
            directory = tempfile.mkdtemp(prefix="flowmem-template-", dir=TMPFS)
            atexit.register(shutil.rmtree, directory, True)
            _made[True], _made[False] = f"{directory}/wal.db", f"{directory}/rollback.db"
            SqliteStore(f"sqlite:///{_made[True]}?synchronous=OFF").close()
            shutil.copyfile(_made[True], _made[False])
            with closing(sqlite3.connect(_made[False])) as rollback:
                rollback.execute("PRAGMA journal_mode = DELETE")
        return _made[wal]


class TmpfsSqliteStore(SqliteStore):
    """``SqliteStore`` in WAL mode on a private file in tmpfs, ``synchronous=OFF``, removed on close."""

    def __init__(self, url: str = "memory://") -> None:
        """Open a new, empty private database (``url`` is ignored: each store is its own)."""
        source = template()
        self.directory = tempfile.mkdtemp(prefix="flowmem-tmpfs-", dir=TMPFS)
        try:
            shutil.copyfile(source, f"{self.directory}/memory.db")
            super().__init__(f"sqlite:///{self.directory}/memory.db?synchronous=OFF")
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def close(self) -> None:
        """Close the store and remove its files."""
        super().close()
        shutil.rmtree(self.directory, ignore_errors=True)


class MemdbSqliteStore(SqliteStore):
    """``SqliteStore`` on a ``memdb`` database of its own: the pool's connections share it in RAM."""

    def __init__(self, url: str = "memory://") -> None:
        """Open a new, empty private database (``url`` is ignored: each store is its own)."""
        self.uri = f"file:/flowmem-{uuid.uuid4().hex}?vfs=memdb"
        # keeps the database alive while the pool has no connection open
        self.anchor = sqlite3.connect(self.uri, uri=True, check_same_thread=False)
        with closing(sqlite3.connect(template(wal=False))) as source:
            source.backup(self.anchor)
        self.directory = tempfile.mkdtemp(prefix="flowmem-memdb-", dir=TMPFS)
        try:
            super().__init__(f"sqlite:///{self.directory}/guard.db?synchronous=OFF")
        except BaseException:
            self.anchor.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def _connect(self) -> sqlite3.Connection:
        """A connection to the private database, with the pool's busy timeout and quota function."""
        conn = sqlite3.connect(
            self.uri,
            uri=True,
            timeout=DEFAULT_LOCK_TIMEOUT,
            isolation_level=None,
            check_same_thread=False,
            factory=_Connection,
        )
        self._busy_timeout(conn, DEFAULT_LOCK_TIMEOUT)
        add_quota_function(conn, lambda: self._quotas)
        return conn

    def close(self) -> None:
        """Close the store; the database goes with its last connection."""
        super().close()
        self.anchor.close()
        shutil.rmtree(self.directory, ignore_errors=True)


ENGINES = {"tmpfs": TmpfsSqliteStore, "memdb": MemdbSqliteStore}


def pytest_configure(config: object) -> None:
    """As a pytest plugin (``-p private_sqlite``): ``memory://`` opens ``FLOWMEM_MEMORY_AS``'s engine."""
    import os

    import flowmem.store

    kind = os.environ.get("FLOWMEM_MEMORY_AS")
    if kind:
        flowmem.store.MemoryStore = ENGINES[kind]  # type: ignore[misc,assignment]
