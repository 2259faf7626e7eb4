"""Damaged SQLite files for the tests of issue 38 §5: flipped bytes in a page, a cell header, the WAL; a truncated file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from flowmem.store import Address, open_store

KEY = Address("user", "alice", "notes")
ROWS = 300  # one page of a read (512 rows at most)
PAGE = 4096


def rows(n: int = ROWS, start: int = 0) -> list[dict[str, str]]:
    """``n`` rows, each with a marker the damage can find (``MARK0042``)."""
    return [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"MARK{k:04d} " + "x" * 40}
        for k in range(start, start + n)
    ]


def filled(path: Path, n: int = ROWS) -> None:
    """A flowmem SQLite file at ``path`` whose buffer ``KEY`` holds ``n`` rows, all in the main file."""
    store = open_store(f"sqlite:///{path}")
    store.append(KEY, rows(n))
    store.close()
    checkpoint(path)


def checkpoint(path: Path) -> None:
    """Move the WAL's pages into the main file and empty the WAL."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def flip_text(path: Path, marker: bytes = b"MARK0150") -> None:
    """Make two bytes inside one row's text invalid UTF-8 (SQLite's integrity check passes it)."""
    data = bytearray(path.read_bytes())
    at = data.index(marker)
    data[at + 2 : at + 4] = b"\xff\xfe"
    path.write_bytes(bytes(data))


def flip_cells(path: Path, marker: bytes = b"MARK0150") -> None:
    """Scramble the cell pointers of the page holding ``marker``: its rows no longer parse."""
    data = bytearray(path.read_bytes())
    start = data.index(marker) // PAGE * PAGE
    for at in range(start + 12, start + 40):
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    """Cut the file in the middle of a page."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2 + 100])
