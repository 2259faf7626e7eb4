"""SQLite below the store: its URLs, its errors as flowmem's, its connections and their quota function.

``SqliteStore`` (``store.py``) builds on these; the CLI's database commands and the
benches use ``parse_url``, ``driver_error`` and ``add_quota_function`` through
``flowmem.store.sqlite``.
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from flowmem.errors import (
    ConfigurationError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreReadOnlyError,
)
from flowmem.store.base import (
    Quotas,
)
from flowmem.store.sqlite.fileguard import sealed_file

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def parse_url(url: str) -> tuple[str, str]:
    """Return (file path, synchronous mode) from ``sqlite:///relative.db`` or ``sqlite:////abs.db``."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ConfigurationError(f"not a sqlite URL: {url!r}")
    if parts.netloc:
        raise ConfigurationError(
            f"sqlite URL {url!r} has a host: use sqlite:///relative.db or sqlite:////abs/path.db"
        )
    path = unquote(parts.path)[1:] if parts.path.startswith("/") else unquote(parts.path)
    if not path or path == ":memory:":
        raise ConfigurationError(
            f"sqlite URL {url!r} names no file: use sqlite:///path.db (or memory:// in process)"
        )
    query = parse_qs(parts.query)
    unknown = set(query) - {"synchronous"}
    if unknown:
        raise ConfigurationError(f"unknown sqlite URL parameter(s): {', '.join(sorted(unknown))}")
    synchronous = query.get("synchronous", ["FULL"])[-1].upper()
    if synchronous not in SYNCHRONOUS:
        raise ConfigurationError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS)}, got {synchronous!r}"
        )
    return path, synchronous


def _left(bound: float, started: float) -> float:
    """What is left of ``bound`` seconds since ``started``: all of it within the first 10 ms.

    Rounding the first 10 ms up keeps a pooled connection's busy timeout unchanged
    (``_pragma`` sets only a change) on the common path where nothing waited.
    """
    waited = time.monotonic() - started
    return bound if waited < 0.01 else max(bound - waited, 0.0)


def _locked(path: str, waited: float) -> StoreLockedError:
    """The refusal of a write that waited ``waited`` seconds for a write lock another process held."""
    return StoreLockedError(
        f"{path} is locked by another process: its write lock was held past {waited:.1f}s; "
        "nothing was written"
    )


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def undecodable(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says a stored text is not UTF-8: flowmem writes only UTF-8, so the file is damaged.

    SQLite's own integrity check passes such a file (it does not read the texts);
    Python's driver raises a plain OperationalError on reading the row (issue 38 §5).
    """
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith("Could not decode to UTF-8")


def driver_error(
    exc: sqlite3.Error,
    path: str,
    default: type[StoreError] = StoreError,
    database: str | None = None,
) -> StoreError:
    """Return the typed ``StoreError`` of a SQLite error: full, read-only, damaged, or ``default``.

    An I/O error (or a file SQLite cannot open) on ``database`` while one of its
    files is immutable or append-only is read-only too: SQLite reports the kernel's
    EPERM as SQLITE_IOERR.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL:
        return StoreFullError(f"{path}: the disk or the database is full: {exc}")
    if primary == sqlite3.SQLITE_READONLY:
        return StoreReadOnlyError(f"{path} is read-only: {exc}")
    if undecodable(exc):  # the message quotes the row: named by its column only
        column = str(exc).split("column ", 1)[-1].split(" ", 1)[0]
        return StoreCorruptError(f"{path} is damaged: a stored text in column {column} is not UTF-8")
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreCorruptError(f"{path} is damaged: {exc}")
    if database is not None and primary in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN):
        sealed = sealed_file(database)
        if sealed is not None:
            return StoreReadOnlyError(f"{sealed} is immutable or append-only: {exc}")
    return default(f"sqlite error on {path}: {exc}")


def add_quota_function(conn: sqlite3.Connection, quotas: Callable[[], Quotas]) -> None:
    """Give ``conn`` the function the quota triggers call (migration 9), over ``quotas()``.

    ``flowmem_over_quota(quota, owner, used)`` is 1 when ``used`` passes that quota;
    what it found is kept on a flowmem connection, for the error the trigger's
    abort becomes. Every connection that writes buffers or records needs it.
    ``flowmem_quota_lift(1)`` stops checking the bytes quota on the connection until
    ``flowmem_quota_lift(0)``: the repair log's entries of a write that frees more
    than they take (decision 0121). ``flowmem_quota_set(quota)`` is 1 when that quota
    is set: since migration 23 an owner's bytes are summed over their buffers only then.
    """

    lifted = [False]  # this connection's bytes quota is not checked (``flowmem_quota_lift``)
    # weakly: SQLite holds the function, which holding the connection would keep it
    # (and its file) open forever once dropped without close()
    flowmem_conn = weakref.ref(conn) if isinstance(conn, _Connection) else None

    def over_quota(quota: str, owner: str, used: int | None) -> int:
        limit = int(getattr(quotas(), quota, 0))
        if not limit or used is None or int(used) <= limit:
            return 0
        if quota == "bytes" and lifted[0]:
            return 0
        found = flowmem_conn() if flowmem_conn is not None else None
        if found is not None:
            found.quota_refused = (quota, str(owner), limit)
        return 1

    def quota_lift(flag: int) -> int:
        lifted[0] = bool(flag)
        return 0

    def quota_set(quota: str) -> int:
        return 1 if int(getattr(quotas(), quota, 0)) else 0

    conn.create_function("flowmem_over_quota", 3, over_quota)
    # the repair log's entries of a write that frees more than they take (decision 0121)
    conn.create_function("flowmem_quota_lift", 1, quota_lift)
    # whether a quota is set: a bytes check sums the owner's buffers only then (migration 23)
    conn.create_function("flowmem_quota_set", 1, quota_set)


class _Connection(sqlite3.Connection):
    """A pooled connection that remembers the pragmas set on it (``_pragma`` sets only changes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pragmas: dict[str, int | str] = {}
        self.quota_refused: tuple[str, str, int] | None = None  # what flowmem_over_quota found


def _close(conn: sqlite3.Connection) -> None:
    with suppress(sqlite3.Error):
        conn.close()
