"""``PrivateSqliteStore``: ``SqliteStore`` on a database of its own in RAM, gone when it closes.

What ``memory://`` opens (decision 0138): the SQLite engine in WAL mode
on a private file in tmpfs (``/dev/shm``; where there is none, the system's temporary
directory), ``synchronous=OFF``, copied from a database migrated once per process
(a copy opens in ~1.5 ms, a migration takes ~80 ms). Not SQLite's own in-memory
database: without a write-ahead log a reader makes a writer wait, which the
conformance suite refuses. Closing the store removes its directory (the process's
exit does, for a store never closed: a ``SqliteStore``'s pooled connections keep it
from being collected); one left by a process killed before that names the process,
and the first private store a later process opens removes it (``sweep``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

from flowmem.store.sqlite.store import SqliteStore
from flowmem.store.sqlite.writers import release_writer_queue

TMPFS = "/dev/shm"
PREFIX = "flowmem-private-"  # then the process id, a dash, a random part
_templates: dict[int, str] = {}  # process id -> its migrated template
_making = threading.Lock()


def private_root() -> str:
    """Where private databases live: tmpfs when the machine has a writable one, else the temp dir."""
    if os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK | os.X_OK):
        return TMPFS
    return tempfile.gettempdir()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(root: str) -> list[str]:
    """Remove the private directories in ``root`` whose process is gone; return them."""
    removed = []
    for entry in Path(root).glob(f"{PREFIX}*-*"):
        pid = entry.name[len(PREFIX) :].split("-", 1)[0]
        if entry.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
    return removed


def _remove_own(directory: str, pid: int) -> None:
    """At exit: remove ``directory`` if this is the process that made it (a forked child leaves it)."""
    if os.getpid() == pid:
        shutil.rmtree(directory, ignore_errors=True)


def _drop(directory: str, pid: int, database: str) -> None:
    """A private store's end: its writer queue released (a store never closed holds one) and ``directory`` removed."""
    if os.getpid() == pid:
        release_writer_queue(database)
    _remove_own(directory, pid)


def template() -> str:
    """This process's database of the current schema, migrated on first use, removed at exit.

    The first call of a process also sweeps what killed processes left behind.
    """
    pid = os.getpid()
    with _making:
        path = _templates.get(pid)
        if path is None:
            root = private_root()
            sweep(root)
            directory = tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-", dir=root)
            atexit.register(_remove_own, directory, pid)
            path = f"{directory}/template.db"
            SqliteStore(f"sqlite:///{path}?synchronous=OFF").close()
            _templates[pid] = path
        return path


class PrivateSqliteStore(SqliteStore):
    """``SqliteStore`` in WAL mode on a new, empty private database in RAM, removed on close."""

    def __init__(self, url: str = "memory://") -> None:
        """Open a new private database (a copy of this process's ``template``); ``url`` names it."""
        source = template()
        self.directory = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=private_root())
        try:
            shutil.copyfile(source, f"{self.directory}/memory.db")
            super().__init__(f"sqlite:///{self.directory}/memory.db?synchronous=OFF")
            self.url = url  # what it was opened as: memory:// (its file is private)
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        # a store never closed is removed when it is collected, or at exit
        self._gone = weakref.finalize(
            self, _drop, self.directory, os.getpid(), f"{self.directory}/memory.db"
        )

    def close(self) -> None:
        """Close the store and remove its database."""
        super().close()
        self._gone()


__all__ = ["PrivateSqliteStore", "private_root", "sweep", "template"]
