"""``Batch``: the statements of one checkpoint transaction, sent as the back-end can.

``SqlCheckpoints`` writes a checkpoint as: claim the thread's session and check the
write guard, ask every read it needs, then write. A ``Batch`` is what it writes
through, so that each back-end sends those statements its own way:

- ``StatementBatch`` (SQLite, and any DB-API connection): each statement runs when
  it is asked, inside the store's write transaction; the guard is checked first.
- PostgreSQL's batch (``flowmem.store.postgres.checkpoints``) queues them in libpq's
  pipeline mode, one implicit transaction: the reads are answered together with the
  guard (one round trip), the writes go with the commit (decision 0126).

An ``Asked`` read gives its rows when they are read (``rows``/``one``): on a
pipeline, that is when the client first waits for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from flowmem.core import Repair
from flowmem.store.base import WriteGuard
from flowmem.store.editor import SqlRunner
from flowmem.store.engine import SqlEngine

Header = tuple[int, int, int, int]
"""A line's buffer header as a write leaves it: (buffer id, count, last major, bytes)."""


class Asked(Protocol):
    """A read asked of a batch: its rows, once the server answered."""

    def rows(self) -> list[tuple[Any, ...]]:
        """Every row of the read."""
        ...

    def one(self) -> tuple[Any, ...] | None:
        """The read's first row, or None."""
        ...


class Batch(Protocol):
    """One checkpoint transaction's statements, by name (the backend's ``SQL``)."""

    @property
    def runner(self) -> SqlRunner:
        """The ``SqlRunner`` a buffer editor writes a line through, in this transaction."""
        ...

    def ask(self, name: str, params: Sequence[Any]) -> Asked:
        """Ask a read (on a pipeline: queued, not waited for)."""
        ...

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Run a write (on a pipeline: queued; its error raises by the commit)."""
        ...

    def checked(self) -> None:
        """Raise the write guard's error unless it held (waits for its answer: call after the reads)."""
        ...

    def record_repairs(self, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Log a line's repairs in its buffer's repair log, in this transaction."""
        ...

    def wrote(
        self, thread_id: str, ns: str, headers: Mapping[str, Header], latest: str | None
    ) -> None:
        """What the write leaves, once committed: each line's header, the thread's latest checkpoint.

        A header is (buffer id, count, last major, bytes); ``latest`` None: not known.
        """
        ...


class Rows:
    """An ``Asked`` whose rows are already read."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def rows(self) -> list[tuple[Any, ...]]:
        """Every row of the read."""
        return self._rows

    def one(self) -> tuple[Any, ...] | None:
        """The read's first row, or None."""
        return self._rows[0] if self._rows else None


class StatementBatch:
    """A ``Batch`` running each statement at once on a DB-API connection (SQLite)."""

    def __init__(self, store: SqlEngine[Any], conn: Any, guard: WriteGuard | None) -> None:
        self.store = store
        self.conn = conn
        self.sql = store.statements
        self._runner = store.runner(conn)
        if guard is not None:  # checked first: every later statement runs behind it
            store.check_guard(conn, guard)

    @property
    def runner(self) -> SqlRunner:
        """The editor's runner on this connection."""
        return self._runner

    def ask(self, name: str, params: Sequence[Any]) -> Asked:
        """Run a read now."""
        return Rows(self.conn.execute(self.sql[name], params).fetchall())

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Run a write now."""
        self.conn.execute(self.sql[name], params)

    def checked(self) -> None:
        """Nothing to wait for: the guard was checked when the batch began."""

    def record_repairs(self, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Log the repairs through the store (``SqlEngine.record_repairs``)."""
        self.store.record_repairs(self.conn, buffer_id, repairs)

    def wrote(
        self, thread_id: str, ns: str, headers: Mapping[str, Header], latest: str | None
    ) -> None:
        """Nothing to remember: a statement costs no round trip here."""


__all__ = ["Asked", "Batch", "Header", "Rows", "StatementBatch"]
