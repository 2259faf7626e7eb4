"""Noticing that a SQLite file can no longer be written in place, before SQLite writes it.

SQLite maps the ``-shm`` file (the WAL index) into memory and writes it through that
mapping. When the file is made immutable (``chattr +i``) or append-only
(``chattr +a``) while mapped, the kernel answers the next write to a mapped page
with SIGBUS (setting the flag write-protects the pages, and ext4 refuses the page
fault of an immutable inode): the process dies, no request is answered. A write to
memory cannot return an error, so nothing after the fact can help.
``FileGuard.sealed`` asks the kernel for the ``-shm`` file's attributes (``statx``,
by path) before a connection is lent; ``SqliteStore`` then takes only reads
(docs/decisions/0046). ``sealed_file`` asks the same of the database and its
``-wal`` after an I/O error, to name a write refused by a sealed file.

No descriptor of the database or of ``-shm`` is ever closed here: closing *any*
descriptor of a file drops every POSIX lock the process holds on it, SQLite's
included (a connection's SHARED lock, its WAL-index locks), and another process
could then reset the WAL index under this one's readers.

Closing a process's last connection makes SQLite checkpoint, which writes the
mapped ``-shm`` too. ``hold_readers`` first takes a read lock on the database's
SHARED lock bytes through an open file description lock, which conflicts with
SQLite's own (POSIX) locks even within this process: the closing connection cannot
take the EXCLUSIVE lock that checkpoint needs, skips it, and unmaps the file. The
lock's descriptor is kept for the life of the process (one per database that was
ever sealed) and the lock is let go with ``F_UNLCK``, never by closing.

Linux only (``statx`` through libc, ``F_OFD_SETLK``); elsewhere, or on a file system
that keeps no such attributes, nothing is ever sealed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
import threading
import time
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None  # type: ignore[assignment]

STATX_ATTR_IMMUTABLE = 0x10
STATX_ATTR_APPEND = 0x20
SEALING = STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
STATX_BUFFER = 256  # struct statx is 256 bytes
ATTRIBUTES = 8  # offset of __u64 stx_attributes
ATTRIBUTES_MASK = 56  # offset of __u64 stx_attributes_mask: the attributes the file system keeps
SHARED_FIRST = 0x40000002  # SQLite's PENDING_BYTE + 2: the SHARED lock bytes
SHARED_SIZE = 510
SUFFIXES = ("", "-wal", "-shm")
LOCK_TRIES = 100  # 10 ms apart


def _statx() -> Any:
    """libc's ``statx`` (glibc 2.28+), or None."""
    if not sys.platform.startswith("linux") or fcntl is None or not hasattr(fcntl, "F_OFD_SETLK"):
        return None
    try:
        call = ctypes.CDLL(ctypes.util.find_library("c") or None).statx
    except (OSError, AttributeError):
        return None
    # no argtypes: ints, bytes and the buffer pass as they are, in half the time
    call.restype = ctypes.c_int
    return call


_STATX = _statx()
SUPPORTED = _STATX is not None


class _Statx:
    """A ``struct statx`` to fill, with views of the two fields read (no copy per call)."""

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(STATX_BUFFER)
        self.attributes = ctypes.c_uint64.from_buffer(self.buffer, ATTRIBUTES)
        self.kept = ctypes.c_uint64.from_buffer(self.buffer, ATTRIBUTES_MASK)

    def sealing(self, path: bytes) -> int:
        """The sealing attributes (immutable, append-only) of ``path``; 0: none, absent or unknown."""
        if _STATX is None or _STATX(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, 0, self.buffer):
            return 0
        return int(self.attributes.value & self.kept.value & SEALING)


def sealed_file(database: str) -> str | None:
    """The first of a database's files (itself, ``-wal``, ``-shm``) that is immutable or append-only."""
    if not SUPPORTED:
        return None
    found = _Statx()
    for suffix in SUFFIXES:
        if found.sealing(os.fsencode(database + suffix)):
            return database + suffix
    return None


# database -> (the descriptor of its readers' lock, never closed: see above; how many
# guards hold the lock: one lock per open file description, so the last one unlocks)
_readers: dict[str, tuple[int, int]] = {}
_readers_guard = threading.Lock()


def _shared_bytes(kind: int) -> bytes:
    return struct.pack("hhqqi", kind, os.SEEK_SET, SHARED_FIRST, SHARED_SIZE, 0)


def _lock_readers(database: str) -> bool:
    """Take (or join) the process's readers' lock on ``database``; False when it cannot."""
    with _readers_guard:
        fd, holders = _readers.get(database, (-1, 0))
        if fd < 0:
            try:
                fd = os.open(database, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return False
        if not holders:
            for _ in range(LOCK_TRIES):  # an EXCLUSIVE lock (a checkpoint at a close) is short
                try:
                    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _shared_bytes(fcntl.F_RDLCK))
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                _readers[database] = (fd, 0)
                return False
        _readers[database] = (fd, holders + 1)
        return True


def _unlock_readers(database: str) -> None:
    """Leave the process's readers' lock on ``database``; the last holder unlocks it."""
    with _readers_guard:
        fd, holders = _readers.get(database, (-1, 0))
        if holders <= 0:
            return
        if holders == 1:
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _shared_bytes(fcntl.F_UNLCK))
            except OSError:
                return
        _readers[database] = (fd, holders - 1)


class FileGuard:
    """The ``-shm`` attributes of one database, and the readers' lock that keeps closes from checkpointing."""

    def __init__(self, database: str) -> None:
        self.database = os.path.realpath(database)
        self._shm = os.fsencode(f"{self.database}-shm")
        self._local = threading.local()  # a struct statx per thread
        self._held = False

    def sealed(self) -> str | None:
        """The ``-shm`` file's path when it is immutable or append-only (SIGBUS if written), else None."""
        if _STATX is None:
            return None
        found = getattr(self._local, "statx", None)
        if found is None:
            found = self._local.statx = _Statx()
        if found.sealing(self._shm):
            return f"{self.database}-shm"
        return None

    def hold_readers(self) -> bool:
        """Hold a read lock on the SHARED bytes, so no connection of this process checkpoints.

        An open file description lock: it conflicts with SQLite's POSIX locks, this
        process's included, so SQLite's EXCLUSIVE lock fails while it is held.
        """
        if not self._held and SUPPORTED:
            self._held = _lock_readers(self.database)
        return self._held

    def release_readers(self) -> None:
        """Let the lock of ``hold_readers`` go (an unlock: the descriptor stays open)."""
        if self._held:
            self._held = False
            _unlock_readers(self.database)


__all__ = ["FileGuard", "sealed_file"]
