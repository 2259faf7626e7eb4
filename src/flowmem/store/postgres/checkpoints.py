"""``PostgresCheckpoints``: LangGraph's checkpoint writes in libpq's pipeline mode (decision 0126).

``SqlCheckpoints`` decides what a checkpoint write runs (``flowmem.store.checkpoints.batch``);
here its statements go through the append's ``Pipeline``: queued without waiting,
one implicit transaction committed at the Sync (no ``BEGIN`` or ``COMMIT``). The
session claim, the guard and the thread's advisory lock come first (the lock order
of decision 0014: the session's row, then the advisory lock), then every read; the
guard's answer is the first round trip and brings the reads with it; the writes go
with the Sync, the second. Pending writes under a guard take one (``put_writes``). A
graph step (its pending writes and its checkpoint) takes three round trips where it
took 17–18. Any error before the Sync rolls back everything (``ROLLBACK`` first); a
failed guard raises its own error after.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg

from flowmem.core import Repair
from flowmem.store.base import Address, WriteGuard
from flowmem.store.checkpoints import StoredBlob, StoredWrite, check_thread_text
from flowmem.store.checkpoints.batch import Asked, Batch
from flowmem.store.checkpoints.sql import SqlCheckpoints, write_statement
from flowmem.store.editor import SqlRunner
from flowmem.store.engine import SqlEngine
from flowmem.store.postgres.pipeline import Pipeline, in_transaction
from flowmem.store.postgres.queries import GUARDS, SQL
from flowmem.store.repairs.sql import SqlRepairs
from flowmem.store.rows import ensure_form, guard_form

# Pending writes under a guard in one round trip: the guard's verdict is kept for the
# transaction (``flowmem.cp_guard``, as ``append_known`` keeps ``flowmem.known``) and
# each insert runs only when it is true; after the Sync a false verdict raises the
# guard's error, nothing written. The guard's row locks are taken as ``guard@kind``
# takes them (decision 0014).
_VERDICT = "current_setting('flowmem.cp_guard')::boolean"
_WRITES = {
    name: SQL[name].replace(
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        "SELECT %s::text, %s::text, %s::text, %s::text, %s::integer, %s::text, %s::text,"
        f" %s::bytea, %s::text WHERE {_VERDICT}",
    )
    for name in ("write_insert", "write_upsert")
}
if any(_VERDICT not in text for text in _WRITES.values()):  # pragma: no cover - statements changed
    raise RuntimeError("the pending writes' statements no longer take VALUES as expected")
STATEMENTS: dict[str, str] = {
    **SQL,
    **{f"{name}?": text for name, text in _WRITES.items()},
    **{
        f"cp_guard@{kind}": f"SELECT set_config('flowmem.cp_guard', ({condition})::text, true)"
        for kind, condition in GUARDS.items()
    },
}


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
                with Pipeline(conn, STATEMENTS) as db:
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

    def put_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[StoredWrite],
        guard: WriteGuard | None = None,
    ) -> None:
        """Store pending writes in one round trip: under a guard, each insert runs only if it held."""
        kind, checks = guard_form(guard)
        if not kind:
            super().put_writes(thread_id, ns, checkpoint_id, writes, guard)
            return
        check_thread_text(thread_id, "thread_id")
        check_thread_text(ns, "checkpoint_ns")
        ensure = ensure_form(guard)
        with self.store.connection() as conn:
            try:
                with Pipeline(conn, STATEMENTS) as db:
                    if ensure is not None:  # a claimed session (decision 0032), before the guard
                        db.send(*ensure)
                    verdict = db.send(f"cp_guard@{kind}", checks)
                    for write in writes:
                        name, params = write_statement(thread_id, ns, checkpoint_id, write)
                        db.send(f"{name}?", params)
                    db.finish()
            except BaseException:
                if in_transaction(conn):
                    conn.execute(SQL["rollback"])
                raise
            if db.result(verdict) != [("true",)]:  # nothing was written
                raise self.guard_error(conn, guard)

    def get_blobs(self, thread_id: str, ns: str, versions: Mapping[str, str]) -> list[StoredBlob]:
        """The blobs of these channel versions that exist, asked together: one round trip."""
        with self.store.connection() as conn, Pipeline(conn, STATEMENTS) as db:
            asked = [
                (channel, version, db.send("blob_get", (thread_id, ns, channel, version)))
                for channel, version in versions.items()
            ]
            db.finish()
        found = []
        for channel, version, ticket in asked:
            rows = db.result(ticket)
            if rows:
                kind, blob = rows[0]
                found.append(StoredBlob(channel, version, (kind, bytes(blob))))
        return found


__all__ = ["PipelineBatch", "PostgresCheckpoints"]
