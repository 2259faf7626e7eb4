"""``SqliteStore``: the embedded default backend (``sqlite:///path.db``).

One file, WAL, ``synchronous=FULL`` by default (a committed append survives power
loss), created on first use, safe to call from many threads (a small pool of
connections) and many processes. Write transactions take turns in arrival order
(``writers.WriterQueue``, with the sidecar file ``<path>-writers``) instead of
polling SQLite's lock, so no writer waits for seconds (docs/decisions/0026). Appends run ``flowmem.core.apply_append`` through
``SqlBufferEditor`` inside one ``BEGIN IMMEDIATE`` transaction (MEM-12).

Group commit (``fsync.DeferredSync``, docs/decisions/0027): a write made
inside ``SqliteStore.deferred()`` (the ``LocalCalls`` capability, which the HTTP
app's store pool enters by name on its event loop) commits without its own fsync
when the file is ``FULL`` or ``EXTRA`` and is durable only once ``sync`` has
reached the ``sync_barrier`` seen after it. Every other write is durable when it
returns.

A write made by a thread that may wait does the same in process
(``fsync.SharedSync``, docs/decisions/0029): it commits at ``NORMAL``, gives
the file's turn to the next writer, and returns after an fsync of the WAL that
began after its commit, one fsync shared by every thread that committed meanwhile.

Driver errors become typed ``StoreError``s: SQLITE_FULL → ``StoreFullError``,
SQLITE_READONLY (and an I/O error on a file made immutable) → ``StoreReadOnlyError``,
SQLITE_CORRUPT/NOTADB → ``StoreCorruptError``; a write lock held past the bound by
another process → ``StoreLockedError``.

A database whose files are made immutable or append-only while it is open
(``fileguard``, docs/decisions/0046) is noticed before a connection is
lent: the store then takes only reads (writes: ``StoreReadOnlyError``) instead of
dying of SIGBUS in SQLite's mapped ``-shm``, until the files are writable again.

The modules, each importing only those listed after it (an import-linter contract):
``store`` (``SqliteStore``, its connections and driver errors), ``fsync`` (the WAL
fsync in both modes), ``writers`` (the writer queue), ``fileguard`` (sealed files),
``walroom`` (room made ahead in the WAL, so a commit's fsync does not grow it:
docs/decisions/0154), ``queries`` (``SQL``), ``schema`` (``MIGRATIONS``).
"""

from __future__ import annotations

from flowmem.store.sqlite.driver import (
    _Connection as _Connection,  # bench/writers.py times its COMMITs
)
from flowmem.store.sqlite.driver import (
    add_quota_function,
    driver_error,
    parse_url,
)
from flowmem.store.sqlite.queries import GUARDS, SQL
from flowmem.store.sqlite.schema import MIGRATIONS
from flowmem.store.sqlite.store import SqliteStore

__all__ = [
    "GUARDS",
    "MIGRATIONS",
    "SQL",
    "SqliteStore",
    "add_quota_function",
    "driver_error",
    "parse_url",
]
