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
from typing import Any, ClassVar, NamedTuple

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
from flowmem.store.postgres.pipeline import (
    WRITES,
    GuardFailed,
    Pipeline,
    prepared_again,
    roll_back,
)
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
# bound is the remembered last major, a parameter (the header's id and last major again), and
# the check reads the buffer's last row: its position is below the bound, or there is none.
# Read from the header's own column (decision 0195's form) the server may plan an anti-join that
# reads every row of the buffer on each step (a new database's plans did: 100 rows at 100
# messages; decision 0201). As ``NOT EXISTS (… pos >= bound)`` a generic plan on ANALYZEd tables
# (autovacuum takes the statistics within a minute of a thread's growth) was a sequential scan
# of every buffer's rows at each step: 57 buffers a step at 1,000 messages, 7 before the
# ANALYZE (decision 0213). ``ORDER BY pos DESC LIMIT 1`` is the primary key walked backwards
# from the buffer's end in every plan: one leaf page, whatever the statistics.
_HEADER = """EXISTS (SELECT 1 FROM buffers WHERE id = %s AND count = %s AND last_major = %s AND bytes = %s)
    AND COALESCE((SELECT pos FROM buffer_rows WHERE buffer_id = %s ORDER BY pos DESC LIMIT 1)
        < ((%s::bigint + 1) << 20), TRUE)"""
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
# A step's statements at once (decision 0201, ``PostgresCheckpoints.at_once``): the same writes
# in fewer statements. ``cp_guard@{kind}+lock``: the guard's verdict kept, then the thread's
# lock, in one statement (the guard's subquery first: ``g`` is read before the lock is taken,
# decision 0014's order); ``blobs_insert?#N``: a checkpoint's N blobs in one insert of rows
# (``blob_insert?``'s, each channel once); ``writes_at_once@{kind}#N``: a task's N pending
# writes that keep the first stored (index >= 0) in one insert under the guard's verdict,
# which it returns (``write_insert?``'s rows; a special channel's replacing write is sent as
# before). Rows as ``VALUES``, each value a parameter of its own (psycopg dumps arrays in
# Python, ~20 calls each); up to ``AT_ONCE_ROWS`` rows a statement.
AT_ONCE_ROWS = 16


def _rows(casts: tuple[str, ...], count: int) -> str:
    one = "(" + ", ".join(f"%s::{cast}" for cast in casts) + ")"
    return ", ".join([one] * count)


def _blobs_text(count: int) -> str:
    return f"""INSERT INTO lg_blobs (thread_id, ns, channel, version, type, blob)
    SELECT %s::text, %s::text, v.channel, v.version, v.type, v.blob
    FROM (VALUES {_rows(("text", "text", "text", "bytea"), count)}) AS v(channel, version, type, blob)
    WHERE {_KNOWN} ON CONFLICT DO NOTHING"""


def _writes_text(condition: str, count: int) -> str:
    values = _rows(("text", "integer", "text", "text", "bytea", "text"), count)
    return f"""WITH g AS MATERIALIZED (SELECT ({condition}) AS ok),
    w AS (INSERT INTO lg_writes (thread_id, ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
        SELECT %s::text, %s::text, %s::text, v.task_id, v.idx, v.channel, v.type, v.blob, v.task_path
        FROM (VALUES {values}) AS v(task_id, idx, channel, type, blob, task_path)
        WHERE (SELECT ok FROM g) ON CONFLICT DO NOTHING)
    SELECT ok FROM g"""


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
    **{
        f"cp_guard@{kind}+lock": "WITH g AS MATERIALIZED (SELECT set_config('flowmem.cp_guard',"
        f" ({condition})::text, true) AS v) SELECT pg_advisory_xact_lock(%s) FROM g"
        for kind, condition in GUARDS.items()
    },
    **{f"blobs_insert?#{n}": _blobs_text(n) for n in range(1, AT_ONCE_ROWS + 1)},
    "cp_row?": _FORESEEN["cp_insert?"],
    **{
        f"writes_at_once@{kind}#{n}": _writes_text(condition, n)
        for kind, condition in GUARDS.items()
        for n in range(1, AT_ONCE_ROWS + 1)
    },
}


class StepPipeline(Pipeline):
    """The append's ``Pipeline`` holding a checkpoint's blobs and row too (decision 0201).

    ``Pipeline.run`` holds the writes its ``writes`` names and sends them as one ``WITH``
    statement; each of these writes a table of its own, so a foreseen step's line row,
    header, blobs and checkpoint row are one statement.
    """

    writes: ClassVar[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
        **WRITES,
        **{f"blobs_insert?#{n}": (frozenset(), frozenset({"lg_blobs"})) for n in range(1, AT_ONCE_ROWS + 1)},
        "cp_row?": (frozenset(), frozenset({"lg_checkpoints"})),
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


def blobs_params(cp: StoredCheckpoint, blobs: Sequence[StoredBlob]) -> list[Any]:
    """``blobs_insert?#N``'s parameters: the thread, the namespace, then each blob's row."""
    params: list[Any] = [cp.thread_id, cp.ns]
    for blob in blobs:
        params += (blob.channel, blob.version, *blob.value)
    return params


def writes_params(pending: PendingWrites) -> list[Any]:
    """``writes_at_once@kind#N``'s parameters after the guard's: the checkpoint, then each write's row."""
    params: list[Any] = [pending.thread_id, pending.ns, pending.checkpoint_id]
    for write in pending.writes:
        params += (write.task_id, write.idx, write.channel, *write.value, write.task_path)
    return params


class Claimed:
    """The sessions whose guarded checkpoint writes this store committed (the newest ``capacity``)."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._sessions

    def add(self, session_id: str) -> None:
        """Remember a session a committed write claimed."""
        with self._lock:
            self._sessions[session_id] = None
            self._sessions.move_to_end(session_id)
            while len(self._sessions) > self.capacity:
                self._sessions.popitem(last=False)

    def discard(self, session_id: str) -> None:
        """Forget a session (its guard failed)."""
        with self._lock:
            self._sessions.pop(session_id, None)


class PostgresCheckpoints(SqlCheckpoints):
    """``SqlCheckpoints`` whose writes run in one pipeline each (decision 0126)."""

    at_once = True
    """Decision 0201: a step's writes in fewer statements, the same writes (the plain path: False).

    A write on remembered facts sends no session claim (its facts were left by a committed
    write of the thread: the session was there; the guard's verdict says if it still is) and
    its guard and lock as one statement, and its line row, header, blobs (one insert) and
    checkpoint row as one; a task's pending writes that keep the first stored go
    in one insert under the guard, whose verdict it returns, with no claim on a
    session this store's writes claimed before (``claimed``): a failed verdict without the
    claim runs the write again with it, as the plain path would have from the start.
    tests/store/postgres/test_checkpoints_at_once.py holds both paths to the same rows and errors.
    """

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
        self.claimed = Claimed()

    def put_checkpoint(self, put: CheckpointPut) -> None:
        """Store a checkpoint: in one round trip on remembered facts, else in two (``SqlCheckpoints``)."""
        if not self._foreseen(put):
            super().put_checkpoint(put)
        if put.guard is not None and put.guard.session_id is not None:
            self.claimed.add(put.guard.session_id)  # its guard held: the session is there

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
            with StepPipeline(conn, STATEMENTS) as db:
                verdict = self._send_known(db, cp, found, guard, head)
                if found.line is not None and found.header is not None:
                    left[found.line.key] = _append_line(db, cp, found.line, found.header)
                if not self.at_once:
                    for blob in blobs:
                        db.run("blob_insert?", (cp.thread_id, cp.ns, blob.channel, blob.version, *blob.value))
                    db.run("cp_insert?", cp_params(cp))
                else:  # with the line's row and header: one statement (``WRITES``)
                    for at in range(0, len(blobs), AT_ONCE_ROWS):
                        some = blobs[at : at + AT_ONCE_ROWS]
                        db.run(f"blobs_insert?#{len(some)}", blobs_params(cp, some))
                    db.run("cp_row?", cp_params(cp))
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
        lock = self.lock_key(self._thread_lock(cp.thread_id))
        if self.at_once:
            # the facts were left by a write of this thread that this store committed, its
            # session claimed: the claim is not sent again (when the session has gone since,
            # the guard fails, the verdict with it, and the reading path claims it)
            if kind:
                db.send(f"cp_guard@{kind}+lock", (*checks, lock))
            else:
                db.send("advisory_lock", (lock,))
            return db.send(name, params)
        if ensure is not None:
            db.send(*ensure)
        if kind:
            db.send(f"cp_guard@{kind}", checks)
        db.send("advisory_lock", (lock,))
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
        session = None if guard is None else guard.session_id
        # decision 0201 (``at_once``): no claim of a session this store's writes claimed, and
        # the writes that keep the first stored in one statement under the guard
        claim = ensure is not None and not (self.at_once and session in self.claimed)
        together = (
            self.at_once
            and 0 < len(writes) <= AT_ONCE_ROWS
            and all(write.idx >= 0 for write in writes)
        )
        try:
            with Pipeline(conn, STATEMENTS) as db:
                if claim and ensure is not None:  # a claimed session (decision 0032), before the guard
                    db.send(*ensure)
                if together:
                    name = f"writes_at_once@{kind}#{len(writes)}"
                    verdict = db.send(name, (*checks, *writes_params(pending)))
                else:
                    verdict = db.send(f"cp_guard@{kind}", checks)
                    for write in writes:
                        name, params = write_statement(thread_id, ns, checkpoint_id, write)
                        db.send(f"{name}?", params)
                db.finish()
        except BaseException:
            roll_back(conn)
            raise
        if db.result(verdict) not in ([("true",)], [(True,)]):  # nothing was written
            if session is not None and ensure is not None and not claim:
                # the claim was left out and the guard failed: as the plain path, with it
                self.claimed.discard(session)
                self._put_writes_on(conn, pending, kind, checks)
                return
            raise self.guard_error(conn, guard)
        if session is not None:
            self.claimed.add(session)

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
