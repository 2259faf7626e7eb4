"""``PostgresCheckpoints``: LangGraph's checkpoint writes in libpq's pipeline mode (decision 0126).

``SqlCheckpoints`` decides what a checkpoint write runs (``flowmem.store.checkpoints.batch``);
here its statements go through the append's ``Pipeline``: queued without waiting,
one implicit transaction committed at the Sync (no ``BEGIN`` or ``COMMIT``). The
session claim, the guard and the thread's advisory lock come first (the lock order
of decision 0014: the session's row, then the advisory lock), then every read; the
guard's answer is the first round trip and brings the reads with it; the writes go
with the Sync, the second. A graph step (its pending writes and its checkpoint)
takes four round trips where it took 17–18. Any error before the Sync rolls back
everything (``ROLLBACK`` first); a failed guard raises its own error after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from flowmem.core import Repair
from flowmem.store.base import Address, WriteGuard
from flowmem.store.checkpoints.batch import Asked, Batch
from flowmem.store.checkpoints.sql import SqlCheckpoints
from flowmem.store.editor import SqlRunner
from flowmem.store.engine import SqlEngine
from flowmem.store.postgres.pipeline import Pipeline, in_transaction
from flowmem.store.postgres.queries import SQL
from flowmem.store.repairs.sql import SqlRepairs
from flowmem.store.rows import ensure_form, guard_form


class _GuardFailed(Exception):
    """The guard did not hold: nothing was written; the store says why after the rollback."""


class _Queued:
    """An ``Asked`` read queued in the pipeline: its rows once answered."""

    def __init__(self, db: Pipeline, ticket: int) -> None:
        self.db = db
        self.ticket = ticket

    def rows(self) -> list[tuple[Any, ...]]:
        """Every row (waits for the server if not answered yet)."""
        return self.db.result(self.ticket)

    def one(self) -> tuple[Any, ...] | None:
        """The first row, or None."""
        found = self.db.result(self.ticket)
        return found[0] if found else None


class PipelineBatch:
    """A ``Batch`` over the append's ``Pipeline``: the claim and guard first, answered by ``checked``."""

    def __init__(
        self, db: Pipeline, repairs: SqlRepairs, guard: WriteGuard | None, lock: int | None
    ) -> None:
        self.db = db
        self.repairs = repairs
        kind, checks = guard_form(guard)
        ensure = ensure_form(guard)
        if ensure is not None:  # a claimed session (decision 0032), before the guard
            db.send(*ensure)
        self._guard = db.send(f"guard@{kind}", checks) if kind else None
        if lock is not None:
            db.send("advisory_lock", (lock,))

    @property
    def runner(self) -> SqlRunner:
        """The pipeline itself: an editor's writes are held and sent together."""
        return self.db

    def ask(self, name: str, params: Sequence[Any]) -> Asked:
        """Queue a read."""
        return _Queued(self.db, self.db.send(name, params))

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Queue a write."""
        self.db.run(name, params)

    def checked(self) -> None:
        """Wait for the guard's answer (and every read queued before it); raise unless it held."""
        if self._guard is not None and not self.db.has_rows(self._guard):
            raise _GuardFailed

    def record_repairs(self, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Queue the repair log's entries (``repairs_log``, one statement each)."""
        self.repairs.record(self.db, buffer_id, repairs)


class PostgresCheckpoints(SqlCheckpoints):
    """``SqlCheckpoints`` whose writes run in one pipeline each (decision 0126)."""

    def __init__(
        self,
        store: SqlEngine[Any],
        repairs: SqlRepairs,
        lock_key: Callable[[Address], int],
        guard_error: Callable[[psycopg.Connection[Any], WriteGuard | None], Exception],
    ) -> None:
        super().__init__(store)
        self.repairs = repairs
        self.lock_key = lock_key
        self.guard_error = guard_error

    def _write(
        self, work: Callable[[Batch], None], guard: WriteGuard | None, address: Address | None = None
    ) -> None:
        """Run ``work``'s statements in one pipeline: one implicit transaction, committed at the Sync."""
        lock = None if address is None else self.lock_key(address)
        with self.store.connection() as conn:
            try:
                with Pipeline(conn, SQL) as db:
                    batch = PipelineBatch(db, self.repairs, guard, lock)
                    work(batch)
                    batch.checked()  # answered already when ``work`` asked for it
                    db.finish()
            except BaseException as exc:
                if in_transaction(conn):
                    conn.execute(SQL["rollback"])
                if isinstance(exc, _GuardFailed):
                    raise self.guard_error(conn, guard) from None
                raise


__all__ = ["PipelineBatch", "PostgresCheckpoints"]
