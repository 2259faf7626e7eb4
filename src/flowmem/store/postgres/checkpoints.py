"""``PostgresCheckpoints``: LangGraph's checkpoint writes in libpq's pipeline mode (decision 0126).

``SqlCheckpoints`` decides what a checkpoint write runs (``flowmem.store.checkpoints.batch``);
here its statements go through the append's ``Pipeline``: queued without waiting,
one implicit transaction committed at the Sync (no ``BEGIN`` or ``COMMIT``). The
session claim, the guard and the thread's advisory lock come first (the lock order
of decision 0014: the session's row, then the advisory lock), then every read; the
guard's answer is the first round trip and brings the reads with it; the writes go
with the Sync, the second. On the facts this store remembers from its last write of
the thread (``Remembered``) a checkpoint takes one: a verdict after the lock, every
write run only if it holds, the reading path again when it did not. Pending writes
under a guard take one (``put_writes``). A graph step (its pending writes and its
checkpoint) takes two round trips, as ``PostgresSaver``, where it took 17–18. Any
error before the Sync rolls back everything (``ROLLBACK`` first); a failed guard
raises its own error after.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import psycopg

from flowmem.core import Repair, call_ids, result_id
from flowmem.store.base import SESSION_SCOPE, Address, WriteGuard
from flowmem.store.checkpoints import (
    CheckpointPut,
    Head,
    LineAppend,
    PendingWrites,
    StoredBlob,
    StoredCheckpoint,
    check_thread_text,
)
from flowmem.store.checkpoints.batch import Asked, Batch, Header
from flowmem.store.checkpoints.sql import SqlCheckpoints, cp_params, write_statement
from flowmem.store.editor import CARRIED_ROW, SqlBufferEditor, SqlRunner
from flowmem.store.engine import SqlEngine
from flowmem.store.known import FORESEEABLE, Unasked, Unforeseen
from flowmem.store.postgres.pipeline import GuardFailed, Pipeline, prepared_again, roll_back
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
# A checkpoint on facts remembered from this store's last write of the thread (as an
# append on known facts, decision 0039): after the lock, ``cp_known…`` checks that the
# guard held, that the line's header is as remembered and that the thread's latest
# checkpoint is the parent, and keeps the verdict in ``flowmem.known``; every write's
# ``?`` variant runs only if it is true (``row_insert?`` and ``header_update?`` are the
# append's). One round trip; a false verdict wrote nothing, and the write runs again
# reading the facts (two).
_KNOWN = "current_setting('flowmem.known')::boolean"
# the line's header as remembered, written by this store's last write of it, and no row appended
# past it since (an append may leave the header unwritten, decision 0195: its tail). The tail's
# bound is the remembered last major, a parameter (the header's id and last major again): one
# range of the rows' primary key, empty, whatever the plan. Read from the header's own column
# (decision 0195's form) the server may plan an anti-join that reads every row of the buffer
# on each step (a new database's plans did: 100 rows at 100 messages; decision 0201).
_HEADER = """EXISTS (SELECT 1 FROM buffers WHERE id = %s AND count = %s AND last_major = %s AND bytes = %s)
    AND NOT EXISTS (SELECT 1 FROM buffer_rows WHERE buffer_id = %s AND pos >= ((%s::bigint + 1) << 20))"""
_LATEST = """(SELECT checkpoint_id FROM lg_checkpoints WHERE thread_id = %s AND ns = %s
    ORDER BY checkpoint_id DESC LIMIT 1) IS NOT DISTINCT FROM %s::text"""
_VERDICTS = {
    f"cp_known{'+guard' * guarded}{'+line' * line}{'+head' * head}": "SELECT set_config('flowmem.known', ("
    + " AND ".join(
        [_VERDICT] * guarded + [_HEADER] * line + [_LATEST] * head or ["TRUE"]
    )
    + ")::text, true)"
    for guarded in (0, 1)
    for line in (0, 1)
    for head in (0, 1)
}
_CASTS = {
    "blob_insert": ("text", "text", "text", "text", "text", "bytea"),
    "cp_insert": ("text", "text", "text", "text", "text", "bytea", "text", "bytea", "text", "text"),
}
_FORESEEN = {
    f"{name}?": SQL[name].replace(
        "VALUES (" + ", ".join(["%s"] * len(casts)) + ")",
        "SELECT " + ", ".join(f"%s::{cast}" for cast in casts) + f" WHERE {_KNOWN}",
    )
    for name, casts in _CASTS.items()
}
if any(_KNOWN not in text for text in _FORESEEN.values()):  # pragma: no cover - statements changed
    raise RuntimeError("the checkpoint's statements no longer take VALUES as expected")
# The append's own ``?`` variants read their verdict from the ``known`` CTE their
# statement starts with (decision 0165); a checkpoint's verdict is a statement of its
# own (``cp_known…``), kept in ``flowmem.known``: the buffer writes a checkpoint makes
# read it from there.
_APPENDS_KNOWN = "(SELECT v FROM known)"
_LINE_WRITES = {
    f"{name}?": SQL[f"{name}?"].replace(_APPENDS_KNOWN, _KNOWN)
    for name in FORESEEABLE
    if _APPENDS_KNOWN in SQL.get(f"{name}?", "")
}
STATEMENTS: dict[str, str] = {
    **SQL,
    **_VERDICTS,
    **_FORESEEN,
    **_LINE_WRITES,
    **{f"{name}?": text for name, text in _WRITES.items()},
    **{
        f"cp_guard@{kind}": f"SELECT set_config('flowmem.cp_guard', ({condition})::text, true)"
        for kind, condition in GUARDS.items()
    },
}


def header_params(header: Header) -> list[Any]:
    """The verdict's parameters of a remembered line header (``_HEADER``): its four, then the tail's bound."""
    return [*header, header[0], header[2]]


class _Foreseen(Unasked):
    """The editor's runner on remembered facts: each write's ``?`` variant, no question."""

    def __init__(self, db: Pipeline) -> None:
        self.db = db

    def run(self, name: str, params: Sequence[Any]) -> None:
        """Queue the write, run only if the verdict is true."""
        if name not in FORESEEABLE:
            raise Unforeseen(name)
        self.db.run(f"{name}?", params)


class Remembered:
    """Per thread, what this store's last committed checkpoint write left: line headers, latest id."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._threads: OrderedDict[tuple[str, str], tuple[dict[str, Header], str | None]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread_id: str, ns: str) -> tuple[dict[str, Header], str | None] | None:
        """The thread's remembered headers and latest checkpoint id, or None."""
        with self._lock:
            return self._threads.get((thread_id, ns))

    def remember(
        self, thread_id: str, ns: str, headers: Mapping[str, Header], latest: str | None
    ) -> None:
        """Remember what a committed write left (``latest`` None: not known)."""
        with self._lock:
            known, _ = self._threads.pop((thread_id, ns), ({}, None))
            self._threads[(thread_id, ns)] = ({**known, **headers}, latest)
            while len(self._threads) > self.capacity:
                self._threads.popitem(last=False)

    def forget(self, thread_id: str, ns: str) -> None:
        """Forget a thread (a verdict found it changed)."""
        with self._lock:
            self._threads.pop((thread_id, ns), None)


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
        self.left: tuple[str, str, dict[str, Header], str | None] | None = None
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
            raise GuardFailed

    def record_repairs(self, buffer_id: int, repairs: Sequence[Repair]) -> None:
        """Queue the repair log's entries (``repairs_counted``: into the header, decision 0148)."""
        self.repairs.record(self.db, buffer_id, repairs)

    def wrote(
        self, thread_id: str, ns: str, headers: Mapping[str, Header], latest: str | None
    ) -> None:
        """Keep what the write leaves, for ``PostgresCheckpoints`` to remember once committed."""
        self.left = (thread_id, ns, dict(headers), latest)


class _Known(NamedTuple):
    """The remembered facts a foreseen checkpoint write goes on: its line and header (None: no line)."""

    line: LineAppend | None
    header: Header | None


def _append_line(db: Pipeline, cp: StoredCheckpoint, line: LineAppend, header: Header) -> Header:
    """Queue a line append's rows (run only when the verdict holds); the header it leaves."""
    address = Address(SESSION_SCOPE, cp.thread_id, line.key)
    # a header that lists its open calls (decision 0153), the list left unread: these
    # rows declare and answer no call (``_foreseeable``), so it is neither read nor written;
    # an answer's row would carry its declaration (migration 34, decision 0190), as elsewhere
    editor = SqlBufferEditor(_Foreseen(db), address, (*header, None, CARRIED_ROW))
    for row in line.rows:
        editor.append_row(row)
    editor.flush()
    return (header[0], editor.count(), header[2] + len(line.rows), editor.bytes)


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
        self.remembered = Remembered()

    def put_checkpoint(self, put: CheckpointPut) -> None:
        """Store a checkpoint: in one round trip on remembered facts, else in two (``SqlCheckpoints``)."""
        if not self._foreseen(put):
            super().put_checkpoint(put)

    def _foreseen(self, put: CheckpointPut) -> bool:
        """The write on the facts this store remembers, checked by a verdict: True when it was stored."""
        cp, blobs, lines, guard, head = put
        found = self._foreseeable(cp, lines, head)
        if found is None:
            return False
        check_thread_text(cp.thread_id, "thread_id")
        check_thread_text(cp.ns, "checkpoint_ns")
        with self.store.connection() as conn:
            try:
                return self._foreseen_on(conn, cp, found, blobs, guard, head)
            except psycopg.errors.InvalidSqlStatementName:
                # the server forgot the prepared statements: nothing committed, the
                # facts are forgotten and the unforeseen path prepares them anew
                return False

    def _foreseen_on(
        self,
        conn: psycopg.Connection[Any],
        cp: StoredCheckpoint,
        found: _Known,
        blobs: Sequence[StoredBlob],
        guard: WriteGuard | None,
        head: Head | None,
    ) -> bool:
        """``_foreseen``'s pipeline on one connection: True when it stored the write."""
        left: dict[str, Header] = {}
        try:
            with Pipeline(conn, STATEMENTS) as db:
                verdict = self._send_known(db, cp, found, guard, head)
                if found.line is not None and found.header is not None:
                    left[found.line.key] = _append_line(db, cp, found.line, found.header)
                for blob in blobs:
                    db.run("blob_insert?", (cp.thread_id, cp.ns, blob.channel, blob.version, *blob.value))
                db.run("cp_insert?", cp_params(cp))
                db.finish()
        except Unforeseen:
            return False  # nothing was sent that commits: the pipeline rolled back
        except BaseException:
            self.remembered.forget(cp.thread_id, cp.ns)
            roll_back(conn)
            raise
        if db.result(verdict) != [("true",)]:  # nothing was written
            self.remembered.forget(cp.thread_id, cp.ns)
            return False
        self.remembered.remember(cp.thread_id, cp.ns, left, None if head is None else cp.checkpoint_id)
        return True

    def _foreseeable(
        self, cp: StoredCheckpoint, lines: Sequence[LineAppend], head: Head | None
    ) -> _Known | None:
        """The remembered facts a checkpoint write can go on; None when they do not cover it.

        They cover a write whose thread this store wrote last, with the head it left,
        and at most one line append of rows that declare and answer no tool call, to
        a line at the count it remembers.
        """
        known = self.remembered.get(cp.thread_id, cp.ns)
        if known is None or len(lines) > 1:
            return None
        headers, latest = known
        if head is not None and (latest is None or latest != head.checkpoint_id):
            return None
        if not lines:
            return _Known(None, None)
        line = lines[0]
        header = headers.get(line.key)
        if header is None or header[1] != line.expect:
            return None
        if any(call_ids(row) or result_id(row) is not None for row in line.rows):
            return None
        return _Known(line, header)

    def _send_known(
        self,
        db: Pipeline,
        cp: StoredCheckpoint,
        known: _Known,
        guard: WriteGuard | None,
        head: Head | None,
    ) -> int:
        """Queue the claim, the guard, the thread's lock and the verdict on ``known``; the verdict's ticket."""
        kind, checks = guard_form(guard)
        ensure = ensure_form(guard)
        line = known.line
        name = f"cp_known{'+guard' * bool(kind)}{'+line' * bool(line)}{'+head' * bool(head)}"
        params: list[Any] = [] if known.header is None else header_params(known.header)
        if head is not None:
            params += [cp.thread_id, cp.ns, head.checkpoint_id]
        if ensure is not None:
            db.send(*ensure)
        if kind:
            db.send(f"cp_guard@{kind}", checks)
        db.send("advisory_lock", (self.lock_key(self._thread_lock(cp.thread_id)),))
        return db.send(name, params)

    def _write(
        self, work: Callable[[Batch], None], guard: WriteGuard | None, address: Address | None = None
    ) -> None:
        """Run ``work``'s statements in one pipeline: one implicit transaction, committed at the Sync."""
        lock = None if address is None else self.lock_key(address)
        with self.store.connection() as conn:
            prepared_again(lambda: self._write_on(conn, work, guard, lock))

    def _write_on(
        self,
        conn: psycopg.Connection[Any],
        work: Callable[[Batch], None],
        guard: WriteGuard | None,
        lock: int | None,
    ) -> None:
        """``_write``'s pipeline on one connection."""
        try:
            with Pipeline(conn, STATEMENTS) as db:
                batch = PipelineBatch(db, self.repairs, guard, lock)
                work(batch)
                batch.checked()  # answered already when ``work`` asked for it
                db.finish()
            if batch.left is not None:
                self.remembered.remember(*batch.left)
        except BaseException as exc:
            roll_back(conn)
            if isinstance(exc, GuardFailed):
                raise self.guard_error(conn, guard) from None
            raise

    def put_writes(self, pending: PendingWrites) -> None:
        """Store pending writes in one round trip: under a guard, each insert runs only if it held."""
        kind, checks = guard_form(pending.guard)
        if not kind:
            super().put_writes(pending)
            return
        check_thread_text(pending.thread_id, "thread_id")
        check_thread_text(pending.ns, "checkpoint_ns")
        with self.store.connection() as conn:
            prepared_again(lambda: self._put_writes_on(conn, pending, kind, checks))

    def _put_writes_on(
        self, conn: psycopg.Connection[Any], pending: PendingWrites, kind: str, checks: Sequence[Any]
    ) -> None:
        """``put_writes``'s pipeline under a guard on one connection."""
        thread_id, ns, checkpoint_id, writes, guard = pending
        ensure = ensure_form(guard)
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
            roll_back(conn)
            raise
        if db.result(verdict) != [("true",)]:  # nothing was written
            raise self.guard_error(conn, guard)

    def get_blobs(self, thread_id: str, ns: str, versions: Mapping[str, str]) -> list[StoredBlob]:
        """The blobs of these channel versions that exist, asked together: one round trip."""
        with self.store.connection() as conn:
            return prepared_again(lambda: _blobs_on(conn, thread_id, ns, versions))


def _blobs_on(
    conn: psycopg.Connection[Any], thread_id: str, ns: str, versions: Mapping[str, str]
) -> list[StoredBlob]:
    """``get_blobs``'s pipeline on one connection."""
    with Pipeline(conn, STATEMENTS) as db:
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
