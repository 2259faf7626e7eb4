"""The SQLite engine as ``memory://`` would run it: a private database that lives in memory.

Issue 39 §3 asks whether ``memory://`` should become ``SqliteStore`` on a private
in-memory database (deleting the Python engine and its twins). Two ways to give the
store's pool of connections one private database held in RAM, both measured by
``bench/memory_engine.py`` and checked by ``tests/bench/lib/test_private_sqlite.py``:

- ``MemdbSqliteStore``: SQLite's ``memdb`` VFS (``file:/name?vfs=memdb``), one
  database shared by the pool's connections of this process, gone when the last
  closes. It has no write-ahead log (``journal_mode`` stays ``memory``): a reader
  holds its lock until its statement ends, so a writer waits behind it.
- ``TmpfsSqliteStore``: ``flowmem.store.sqlite.private.PrivateSqliteStore``, the
  store's own file in WAL mode, in a private directory on ``/dev/shm`` (tmpfs: RAM,
  no disk), ``synchronous=OFF``, removed on close.

Neither changes ``SqliteStore``: the memdb one opens its connections itself
(``_connect``, the pool's one hook) and keeps the store's file guard and writer queue
on a private directory that holds no database. Both start from a copy of one database
migrated once per process (``private.template``): migrating a new database costs
~80 ms, a copy ~1 ms (``bench/memory_engine.py``'s "open+close").
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
from flowmem.store.sqlite import SqliteStore, private
from flowmem.store.sqlite.driver import _Connection, add_quota_function

_rollback: list[str] = []  # the template copied into a rollback journal, once made
_making = threading.Lock()


def rollback_template() -> str:
    """``flowmem.store.sqlite.private.template()`` in a rollback journal (made once, removed at exit).

    A ``memdb`` database has no WAL, and a copy of a WAL file's first page says it has.
    """
    with _making:
        if not _rollback:
            directory = tempfile.mkdtemp(prefix="flowmem-template-", dir=private.private_root())
            atexit.register(shutil.rmtree, directory, True)
            path = f"{directory}/rollback.db"
            shutil.copyfile(private.template(), path)
            with closing(sqlite3.connect(path)) as rollback:
                rollback.execute("PRAGMA journal_mode = DELETE")
            _rollback.append(path)
        return _rollback[0]


class TmpfsSqliteStore(private.PrivateSqliteStore):
    """``PrivateSqliteStore`` (decision 0138), opened as ``open_store`` opens ``memory://``."""

    def __init__(self, url: str = "memory://") -> None:
        """Open a new, empty private database (``url`` is ignored: each store is its own)."""
        super().__init__()


class MemdbSqliteStore(SqliteStore):
    """``SqliteStore`` on a ``memdb`` database of its own: the pool's connections share it in RAM."""

    def __init__(self, url: str = "memory://") -> None:
        """Open a new, empty private database (``url`` is ignored: each store is its own)."""
        self.uri = f"file:/flowmem-{uuid.uuid4().hex}?vfs=memdb"
        # keeps the database alive while the pool has no connection open
        self.anchor = sqlite3.connect(self.uri, uri=True, check_same_thread=False)
        with closing(sqlite3.connect(rollback_template())) as source:
            source.backup(self.anchor)
        self.directory = tempfile.mkdtemp(prefix="flowmem-memdb-", dir=private.private_root())
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
