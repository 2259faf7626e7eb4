"""``SqlCheckpoints``: the ``Checkpoints`` protocol on a SQL store (SQLite or PostgreSQL).

It runs the backend's named statements (``checkpoints.sqlite`` / ``checkpoints.postgres``,
merged into the store's ``SQL``) through the store's own transactions: a checkpoint and
the line rows it adds commit together, serialized per thread with the thread's buffer
appends (``write_at`` on the thread's ``langgraph`` address: SQLite's write
transaction, PostgreSQL's advisory lock). Line rows are written verbatim through
``SqlBufferEditor.append_row``, so the buffer's call index stays exact and later
flowmem appends to the same buffer apply the rules on top of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from flowmem.core import Message, Repair
from flowmem.store.base import SESSION_SCOPE, Address, WriteGuard
from flowmem.store.checkpoints import (
    LINE_PREFIX,
    ROWS_TYPE,
    CheckpointFilter,
    CheckpointPut,
    LineAppend,
    PendingWrites,
    StoredBlob,
    StoredCheckpoint,
    StoredWrite,
    check_thread_text,
    forked,
    line_moved,
)
from flowmem.store.checkpoints.batch import Asked, Batch, StatementBatch
from flowmem.store.checkpoints.repairs import answered_ids, line_repairs
from flowmem.store.editor import SqlBufferEditor, load_row, load_rows
from flowmem.store.engine import SqlKind
from flowmem.store.rows import stored_json

PAGE = 100  # checkpoints one ``list_checkpoints`` query fetches
_TOP = "\U0010ffff"  # above every stored id: the first page's keyset bound


def _bytes(value: Any) -> bytes:
    return bytes(value) if value is not None else b""


def _checkpoint(row: Sequence[Any]) -> StoredCheckpoint:
    return StoredCheckpoint(
        thread_id=row[0],
        ns=row[1],
        checkpoint_id=row[2],
        parent_id=row[3],
        checkpoint=(row[4], _bytes(row[5])),
        metadata=(row[6], _bytes(row[7])),
        run_id=row[8],
        versions=stored_json(row[9]),
    )


def versions_text(versions: Mapping[str, Any]) -> str:
    """The JSON text a checkpoint row keeps of its channel versions (what it references)."""
    return json.dumps(dict(versions), sort_keys=True, separators=(",", ":"))


def cp_params(cp: StoredCheckpoint) -> tuple[Any, ...]:
    """The parameters of ``cp_insert`` for a checkpoint."""
    return (
        cp.thread_id,
        cp.ns,
        cp.checkpoint_id,
        cp.parent_id,
        *cp.checkpoint,
        *cp.metadata,
        cp.run_id,
        versions_text(cp.versions),
    )


def write_statement(
    thread_id: str, ns: str, checkpoint_id: str, write: StoredWrite
) -> tuple[str, tuple[Any, ...]]:
    """The statement storing one pending write and its parameters (a negative index replaces)."""
    name = "write_upsert" if write.idx < 0 else "write_insert"
    params = (
        thread_id,
        ns,
        checkpoint_id,
        write.task_id,
        write.idx,
        write.channel,
        *write.value,
        write.task_path,
    )
    return name, params


def line_of(blob_type: str, blob: bytes) -> str | None:
    """The line key a blob references, or None for a blob that holds its value."""
    if blob_type != ROWS_TYPE:
        return None
    key: str = stored_json(blob)["key"]
    return key


def line_range() -> tuple[str, str]:
    """The key range every line's buffer key is in."""
    return LINE_PREFIX, LINE_PREFIX + _TOP


class SqlCheckpoints(SqlKind):
    """Checkpoints in a SQL store's ``lg_*`` tables, messages in its session buffers."""

    def _thread_lock(self, thread_id: str) -> Address:
        return Address(SESSION_SCOPE, thread_id, LINE_PREFIX)

    # --- writes --------------------------------------------------------------------------
    def put_checkpoint(self, put: CheckpointPut) -> None:
        """Store a checkpoint, its new blobs and line rows in one transaction (see ``Checkpoints``)."""
        cp, blobs, lines, guard, head = put
        check_thread_text(cp.thread_id, "thread_id")
        check_thread_text(cp.ns, "checkpoint_ns")

        def work(batch: Batch) -> None:
            # every read first, then the guard's answer: on PostgreSQL one round trip for all
            latest = None if head is None else batch.ask("cp_latest_id", (cp.thread_id, cp.ns))
            addresses = [Address(SESSION_SCOPE, cp.thread_id, line.key) for line in lines]
            headers = [batch.ask("header_get", tuple(address)) for address in addresses]
            answers = [self._answers(batch, cp.thread_id, line) for line in lines]
            batch.checked()
            if latest is not None and head is not None:
                found = latest.one()
                latest_id = None if found is None else found[0]
                if latest_id != head.checkpoint_id:
                    raise forked(cp.thread_id, latest_id, head.checkpoint_id)
            written: dict[str, tuple[int, int, int, int]] = {}
            for line, address, header, held in zip(lines, addresses, headers, answers, strict=True):
                found = header.one()
                editor = SqlBufferEditor(batch.runner, address, found)
                if editor.count() != line.expect:
                    raise line_moved(line.key, editor.count(), line.expect)
                repairs = self._repairs(line, held)
                for row in line.rows:
                    editor.append_row(row)
                editor.flush()
                batch.record_repairs(editor.buffer_id, repairs)  # issue 37 §2
                last = (0 if found is None else int(found[2])) + len(line.rows)
                written[line.key] = (editor.buffer_id, editor.count(), last, editor.bytes)
            batch.wrote(cp.thread_id, cp.ns, written, None if head is None else cp.checkpoint_id)
            for blob in blobs:
                batch.run("blob_insert", (cp.thread_id, cp.ns, blob.channel, blob.version, *blob.value))
            batch.run("cp_insert", cp_params(cp))

        self._write(work, guard, self._thread_lock(cp.thread_id))

    def _write(
        self, work: Callable[[Batch], None], guard: WriteGuard | None, address: Address | None = None
    ) -> None:
        """Run ``work`` in one write transaction, serialized with ``address``'s appends if given.

        The guard is checked (its session claimed) before ``work``'s statements run.
        Here each statement runs at once in the store's write transaction (SQLite);
        PostgreSQL's ``PostgresCheckpoints`` sends them in a pipeline (decision 0126).
        """

        def run(conn: Any) -> None:
            work(StatementBatch(self.store, conn, guard))

        if address is None:
            self.store.write(run)
        else:
            self.store.write_at(address, run)

    def _answers(self, batch: Batch, thread_id: str, line: LineAppend) -> dict[str, Asked]:
        """The reads of the rows answering each call id ``line``'s rows answer, in the thread's lines."""
        return {
            cid: batch.ask("line_answers", (thread_id, *line_range(), cid))
            for cid in answered_ids(line.rows)
        }

    def _repairs(self, line: LineAppend, answers: Mapping[str, Asked]) -> tuple[Repair, ...]:
        """What ``line``'s rows repair, from what the thread's lines held (``_answers``)."""
        held = {
            cid: [(str(key), load_row(body)) for key, body in asked.rows()]
            for cid, asked in answers.items()
        }
        return line_repairs(line.key, line.rows, held) if held else ()

    def put_writes(self, pending: PendingWrites) -> None:
        """Store pending writes; an index >= 0 already stored is kept, a negative one replaced."""
        thread_id, ns, checkpoint_id, writes, guard = pending
        check_thread_text(thread_id, "thread_id")
        check_thread_text(ns, "checkpoint_ns")

        def work(batch: Batch) -> None:
            for write in writes:
                batch.run(*write_statement(thread_id, ns, checkpoint_id, write))
            batch.checked()

        self._write(work, guard)

    def delete_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        """Delete the pending writes stored under one checkpoint id."""
        self.store.write(
            lambda conn: self._run(conn, "writes_delete_one", (thread_id, ns, checkpoint_id))
        )

    # --- reads ----------------------------------------------------------------------------
    def get_checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        """The checkpoint with that id, or the thread's latest in ``ns`` when None."""
        with self.store.connection() as conn:
            if checkpoint_id is None:
                row = self._run(conn, "cp_get_latest", (thread_id, ns)).fetchone()
            else:
                row = self._run(conn, "cp_get", (thread_id, ns, checkpoint_id)).fetchone()
        return None if row is None else _checkpoint(row)

    def list_checkpoints(self, asked: CheckpointFilter) -> Iterator[StoredCheckpoint]:
        """Checkpoints newest first, ``PAGE`` per query (keyset paging: each page is indexed)."""
        thread_id, ns, checkpoint_id, before = asked
        bound = (_TOP, _TOP, _TOP)
        while True:
            params = (thread_id, thread_id, ns, ns, checkpoint_id, checkpoint_id, before, before)
            with self.store.connection() as conn:
                rows = self._run(conn, "cp_page", (*params, *bound, PAGE)).fetchall()
            for row in rows:
                yield _checkpoint(row)
            if len(rows) < PAGE:
                return
            last = rows[-1]
            bound = (last[2], last[0], last[1])

    def get_blobs(
        self, thread_id: str, ns: str, versions: Mapping[str, str]
    ) -> list[StoredBlob]:
        """The blobs of these channel versions that exist."""
        found = []
        with self.store.connection() as conn:
            for channel, version in versions.items():
                row = self._run(conn, "blob_get", (thread_id, ns, channel, version)).fetchone()
                if row is not None:
                    found.append(StoredBlob(channel, version, (row[0], _bytes(row[1]))))
        return found

    def get_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> list[StoredWrite]:
        """The pending writes of one checkpoint, in (task_id, idx) order."""
        with self.store.connection() as conn:
            rows = self._run(conn, "writes_get", (thread_id, ns, checkpoint_id)).fetchall()
        return [StoredWrite(r[0], int(r[1]), r[2], (r[3], _bytes(r[4])), r[5]) for r in rows]

    def line_rows(self, thread_id: str, key: str, count: int) -> list[Message]:
        """The first ``count`` rows of a line."""
        with self.store.connection() as conn:
            found = self._run(conn, "line_rows", (thread_id, key, count)).fetchall()
        return load_rows(found)

    def line_count(self, thread_id: str, key: str) -> int:
        """How many rows a line's buffer holds now (0 when there is none)."""
        with self.store.connection() as conn:
            row = self._run(conn, "line_head", (thread_id, key)).fetchone()
        return 0 if row is None else int(row[1])

    # --- threads --------------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs, writes and lines in one transaction."""
        self.store.write_at(
            self._thread_lock(thread_id), lambda conn: self.drop_thread(conn, thread_id)
        )

    def drop_thread(self, conn: Any, thread_id: str) -> None:
        """Delete a thread's checkpoint rows and lines inside the caller's transaction."""
        for name in ("cp_drop_thread", "blob_drop_thread", "writes_drop_thread"):
            self._run(conn, name, (thread_id,))
        for buffer_id, _key in self._run(conn, "line_buffers", (thread_id, *line_range())):
            self.store.drop_buffer(conn, int(buffer_id))

    def copy_thread(self, source: str, target: str, guard: WriteGuard | None = None) -> None:
        """Copy every checkpoint, blob, write and line of ``source`` to ``target``."""
        check_thread_text(target, "thread_id")

        def work(conn: Any) -> None:
            if guard is not None:
                self.store.check_guard(conn, guard)
            for name in ("cp_copy", "blob_copy", "writes_copy"):
                self._run(conn, name, (target, source))
            runner = self.store.runner(conn)
            buffers = self._run(conn, "line_buffers", (source, *line_range())).fetchall()
            for buffer_id, key in buffers:
                editor = SqlBufferEditor(runner, Address(SESSION_SCOPE, target, key))
                if editor.count():
                    continue  # the target has this line already
                for row in load_rows(self._run(conn, "line_all", (buffer_id,)).fetchall()):
                    editor.append_row(row)
                editor.flush()

        self.store.write_at(self._thread_lock(target), work)

    def prune(self, thread_ids: Sequence[str], keep_latest: bool) -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or delete everything."""
        for thread_id in thread_ids:

            def work(conn: Any, thread_id: str = thread_id) -> None:
                if not keep_latest:
                    self.drop_thread(conn, thread_id)
                    return
                latest: dict[str, str] = {}
                rows = self._run(conn, "cp_thread_rows", (thread_id,)).fetchall()
                for ns, checkpoint_id, _ in rows:
                    latest[ns] = max(latest.get(ns, checkpoint_id), checkpoint_id)
                for ns, checkpoint_id, _ in rows:
                    if latest[ns] != checkpoint_id:
                        self._drop_checkpoint(conn, thread_id, ns, checkpoint_id)
                self._collect(conn, thread_id)

            self.store.write_at(self._thread_lock(thread_id), work)

    def run_threads(self, run_ids: Sequence[str]) -> list[str]:
        """The threads holding a checkpoint these runs made, sorted."""
        threads: set[str] = set()
        with self.store.connection() as conn:
            for run_id in run_ids:
                threads.update(str(row[0]) for row in self._run(conn, "cp_of_run", (run_id,)).fetchall())
        return sorted(threads)

    def delete_for_runs(self, run_ids: Sequence[str], threads: Collection[str] | None = None) -> None:
        """Delete the checkpoints these runs made (on ``threads`` only, when given), their writes,
        and what only they referenced."""
        for run_id in run_ids:
            with self.store.connection() as conn:
                made = self._run(conn, "cp_of_run", (run_id,)).fetchall()
            for thread_id in sorted({row[0] for row in made if threads is None or row[0] in threads}):

                def work(conn: Any, thread_id: str = thread_id, run_id: str = run_id) -> None:
                    for row in self._run(conn, "cp_of_run", (run_id,)).fetchall():
                        if row[0] == thread_id:
                            self._drop_checkpoint(conn, thread_id, row[1], row[2])
                    self._collect(conn, thread_id)

                self.store.write_at(self._thread_lock(thread_id), work)

    def _drop_checkpoint(self, conn: Any, thread_id: str, ns: str, checkpoint_id: str) -> None:
        self._run(conn, "cp_delete_one", (thread_id, ns, checkpoint_id))
        self._run(conn, "writes_delete_one", (thread_id, ns, checkpoint_id))

    def _collect(self, conn: Any, thread_id: str) -> None:
        """Delete the writes, blobs and lines of a thread that no remaining checkpoint references."""
        self._run(conn, "writes_orphans_delete", (thread_id,))
        kept: set[tuple[str, str, str]] = set()
        for ns, _checkpoint_id, versions in self._run(conn, "cp_thread_rows", (thread_id,)):
            kept.update((ns, channel, str(v)) for channel, v in stored_json(versions).items())
        lines: set[str] = set()
        for ns, channel, version, blob_type, blob in self._run(
            conn, "blob_keys", (thread_id,)
        ).fetchall():
            if (ns, channel, version) not in kept:
                self._run(conn, "blob_delete", (thread_id, ns, channel, version))
                continue
            key = line_of(blob_type, _bytes(blob))
            if key is not None:
                lines.add(key)
        for buffer_id, key in self._run(conn, "line_buffers", (thread_id, *line_range())).fetchall():
            if key not in lines:
                self.store.drop_buffer(conn, int(buffer_id))


__all__ = ["PAGE", "SqlCheckpoints", "cp_params", "line_of", "line_range", "versions_text", "write_statement"]
