"""Room in the write-ahead log ahead of its writes, so a commit's fsync does not grow the file (decision 0154).

SQLite appends each commit's frames at the end of ``<database>-wal``. Until the log
is first checkpointed and restarted from its beginning (at about ``AUTO_CHECKPOINT``
pages), and again after every close (SQLite deletes the log when the last connection
closes), each commit makes the file longer, and ``fdatasync`` must then also commit
the file's new size and blocks to the file system's journal, which every process
writing to the disk shares. A log rewritten in place syncs its data only (PostgreSQL
zero-fills its WAL segments before use for the same reason).

``WalRoom.make`` is called inside a write transaction, with the log's write lock
held, so no connection of any process writes frames meanwhile, just before the commit
of one that changed rows (a transaction that commits nothing writes nothing, decision
0071): once the log holds
its header (``BUSY``) and SQLite has written up to the end of the room made before,
it writes zeros after the file's end, at most up to the size the checkpoint keeps the
log at: ``FIRST`` bytes the first time, twice the last room each time after, up to
``CHUNK`` (decision 0169: a store that writes a few rows pays 64 KiB once; one that
keeps writing changes its log's size about once a room on the way to the limit
instead of at every commit until it passed 512 KiB, decision 0154's threshold).
The next room is made once SQLite's frames reach the middle of the last one: a frame
header (its page number, never 0) read there, on the log kept open since the room
was made, says so (``_reached``); the file's size alone would say it only after a
commit had grown the file past the room.
The commit's own fsync makes them durable with it. Zeros are never a frame: a frame
must carry the header's salt and checksum, so SQLite's recovery stops at the first
zero frame, as it does at the stale frames of a restarted log. Only past the file's
end is written, never a byte SQLite wrote. Off (``enabled=False``, the plain
version tests compare with) where commits do not fsync (``synchronous`` below
``FULL``): there is nothing to save.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref

log = logging.getLogger("flowmem")

WAL_HEADER = 32  # bytes before the first frame
FRAME_HEADER = 24  # bytes before each frame's page
BUSY = WAL_HEADER  # a log this long gets room made ahead: one SQLite has written (decision 0169)
FIRST = 64 * 1024  # bytes of room made the first time (and again after the log was truncated)
CHUNK = 1 << 20  # bytes of room made at a time at most: each room twice the last, up to this
_BLOCK = 256 * 1024  # zeros written by one call at most (made when room is made, not at import)


def _close_quietly(fd: int) -> None:
    """Close a descriptor of the log (``WalRoom.close``, or a room dropped without it)."""
    with contextlib.suppress(OSError):
        os.close(fd)


class WalRoom:
    """The room made ahead in one database's write-ahead log (per store)."""

    def __init__(self, database: str, enabled: bool, frames: int, page_size: int = 4096) -> None:
        """``frames``: the log's length, in pages, at which a commit checkpoints (room is made up to it)."""
        self.wal = f"{database}-wal"
        self.enabled = enabled
        self.limit = 0
        self._frame = page_size + FRAME_HEADER
        self.set_page_size(page_size, frames)
        self._mark = 0  # the file's size after the room last made (0: none made)
        self._probe = 0  # where a frame in the last room says it is half used (0: nowhere)
        self._fd = -1  # the log, open since room was last made (read at ``_probe``)
        # closes ``_fd`` when the room is collected without ``close`` (a store never closed)
        self._closing: weakref.finalize[[int], WalRoom] | None = None
        self._step = FIRST  # the next room's size (doubled after each, up to ``CHUNK``)
        self.made = 0  # how many times room was made (a count the tests and benches read)

    def set_page_size(self, page_size: int, frames: int) -> None:
        """Size the room for the database's page size (read once the schema exists)."""
        self._frame = page_size + FRAME_HEADER
        self.limit = WAL_HEADER + (frames + 32) * self._frame

    def make(self) -> int:
        """Inside a write transaction: make room past the log's end when it is used up; the bytes added.

        A failed write (the disk full, say) only stops making room: SQLite grows
        the log itself, as without it, and reports its own error when it cannot.
        """
        if not self.enabled:
            return 0
        try:
            size = os.stat(self.wal).st_size
        except OSError:  # no log yet: SQLite creates it at the first commit
            return 0
        if size < self._mark:  # the log was truncated or deleted since: start again
            self._mark, self._step = 0, FIRST
            self.close()
        if size < BUSY or size >= self.limit:
            return 0
        if self._mark and size <= self._mark and not self._reached():
            return 0
        step = min(self._step, CHUNK)
        self._step = min(step * 2, CHUNK)
        return self._extend(size, min(self.limit, size + step))

    def _reached(self) -> bool:
        """Whether SQLite's frames reached the middle of the last room (a frame header there is not zeros)."""
        if self._fd < 0 or not self._probe:
            return False
        try:
            return os.pread(self._fd, 4, self._probe) not in (b"", bytes(4))
        except OSError:
            return False

    def _extend(self, size: int, end: int) -> int:
        """Write zeros from ``size`` (the file's end) to ``end``; the bytes written."""
        written = 0
        self.close()
        try:
            fd = os.open(self.wal, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))  # 0: not POSIX
        except OSError as exc:
            log.debug("no room made in %s: %s", self.wal, exc)
            return 0
        try:
            zeros = bytes(min(_BLOCK, end - size))
            while size + written < end:
                written += os.pwrite(fd, zeros[: end - size - written], size + written)
        except OSError as exc:
            log.debug("room made in %s stopped at %d bytes: %s", self.wal, written, exc)
        # kept to read ``_probe``: closed at the next room, a truncation, the store's close
        # (or when the room is collected: a store dropped without ``close``)
        self._fd = fd
        self._closing = weakref.finalize(self, _close_quietly, fd)
        self._mark = size + written
        # the first frame's slot at or past the room's middle (frames follow the log's header)
        middle = size + written // 2 - WAL_HEADER
        slot = WAL_HEADER + -(-middle // self._frame) * self._frame
        self._probe = slot if slot + self._frame <= self._mark else 0
        self.made += 1
        return written

    def close(self) -> None:
        """Close the log's descriptor kept since room was made (the log holds no POSIX lock of SQLite's)."""
        if self._closing is not None:
            closing, self._closing, self._fd = self._closing, None, -1
            closing()


__all__ = ["BUSY", "CHUNK", "FIRST", "WalRoom"]
