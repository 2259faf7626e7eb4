"""A SQLite database's online backup to a new file, never over an existing one."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from pathlib import Path

from flowmem.errors import ConflictError, StoreError


def backup_to(
    lend: Callable[[], AbstractContextManager[sqlite3.Connection]],
    path: str,
    destination: str | os.PathLike[str],
) -> int:
    """Copy the database at ``path``, consistent as of one moment, to a new file; return its size in bytes.

    SQLite's online backup runs inside one read transaction, so writers go on
    (WAL) and the copy holds every transaction committed before it started and
    none after (``lend`` lends the connection it reads). It is written to a
    temporary file beside ``destination`` and linked into place, so a failed
    backup leaves no partial file and an existing file is never overwritten
    (ConflictError).
    """
    target = Path(destination)
    if target.exists():
        raise ConflictError(f"{target} exists; a backup never overwrites a file")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        copy = sqlite3.connect(partial)
        try:
            with lend() as conn:
                conn.backup(copy)
        finally:
            copy.close()
        os.link(partial, target)  # unlike a rename, fails when the target appeared meanwhile
    except FileExistsError as exc:
        raise ConflictError(f"{target} exists; a backup never overwrites a file") from exc
    except OSError as exc:
        raise StoreError(f"cannot write the backup {target}: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"backup of {path} failed: {exc}") from exc
    finally:
        with suppress(OSError):
            partial.unlink()
    return target.stat().st_size


__all__ = ["backup_to"]
