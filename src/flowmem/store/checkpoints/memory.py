"""``MemoryCheckpoints``: the ``Checkpoints`` protocol in a ``MemoryStore``'s dicts.

The reference the SQL tables are tested against (tests/store/test_checkpoints.py runs
one suite over every backend). Everything happens under the store's lock; line rows
go into the store's own buffers, so the session's buffer routes see them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from flowmem.core import Message, result_id
from flowmem.store.base import SESSION_SCOPE, Address, SessionRecord, WriteGuard
from flowmem.store.checkpoints import (
    LINE_PREFIX,
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
from flowmem.store.checkpoints.repairs import answered_ids, line_repairs
from flowmem.store.checkpoints.sql import line_of
from flowmem.store.engine import MemoryEngine, MemoryTables
from flowmem.store.rows import dump_json, utf8_size

_Key = tuple[str, str, str]  # (thread_id, ns, checkpoint_id)


class MemoryCheckpoints:
    """Checkpoints in dicts of one ``MemoryStore``, messages in its session buffers."""

    def __init__(self, store: MemoryEngine) -> None:
        self.store = store
        self._checkpoints: dict[_Key, StoredCheckpoint] = {}
        self._blobs: dict[tuple[str, str, str, str], tuple[str, bytes]] = {}
        self._writes: dict[_Key, dict[tuple[str, int], StoredWrite]] = {}

    def _latest(self, thread_id: str, ns: str) -> StoredCheckpoint | None:
        found = [c for k, c in self._checkpoints.items() if k[:2] == (thread_id, ns)]
        return max(found, key=lambda c: c.checkpoint_id, default=None)

    def _claim(self, tables: MemoryTables, guard: WriteGuard | None) -> None:
        self.store.store_session(tables, self.store.check_guard(tables, guard))

    def _check_quotas(
        self,
        tables: MemoryTables,
        thread_id: str,
        lines: Sequence[LineAppend],
        guard: WriteGuard | None,
    ) -> None:
        """QuotaExceededError, before anything is written, when the lines would pass a quota."""
        size, new = 0, 0
        session = tables.sessions.get(thread_id)
        owner = None if session is None else session.owner
        if session is None and guard is not None and guard.claim is not None:
            owner = guard.claim.owner
        for line in lines:
            address = Address(SESSION_SCOPE, thread_id, line.key)
            size += sum(utf8_size(dump_json(row, "message")) for row in line.rows)
            new += int(address not in tables.buffers)
        self.store.charge(tables, owner, size, new, 0, count=False)

    def _append_rows(
        self, tables: MemoryTables, thread_id: str, key: str, rows: Sequence[Message]
    ) -> None:
        address = Address(SESSION_SCOPE, thread_id, key)
        buffer = tables.buffers.get(address, [])
        size = sum(utf8_size(dump_json(row, "message")) for row in rows)
        grown = buffer + copy.deepcopy(list(rows))  # a new list: a paged read's snapshot stays
        self.store.set_buffer(tables, address, grown, tables.sizes.get(address, 0) + size)

    def _stage_repairs(
        self, tables: MemoryTables, thread_id: str, line: LineAppend, claimed: SessionRecord | None
    ) -> Callable[[], None]:
        """What ``line``'s rows repair, checked against the quota: the step that logs it."""
        wanted = answered_ids(line.rows)
        held: dict[str, list[tuple[str, Message]]] = {cid: [] for cid in wanted}
        if wanted:
            for address in self._lines(tables, thread_id):
                for row in tables.buffers[address]:
                    cid = result_id(row)
                    if cid in held:
                        held[cid].append((address.key, row))
        repairs = line_repairs(line.key, line.rows, held) if held else ()
        growth = sum(utf8_size(dump_json(row, "message")) for row in line.rows)
        address = Address(SESSION_SCOPE, thread_id, line.key)
        return self.store.stage_repairs(tables, address, repairs, growth, claimed)

    # --- writes --------------------------------------------------------------------------
    def put_checkpoint(self, put: CheckpointPut) -> None:
        """Store a checkpoint, its new blobs and line rows at once (see ``Checkpoints``)."""
        cp, blobs, lines, guard, head = put
        check_thread_text(cp.thread_id, "thread_id")
        check_thread_text(cp.ns, "checkpoint_ns")
        with self.store.locked() as tables:
            # the claim first, as the SQL stores: another owner's thread is refused
            # (AccessDeniedError) before its head is compared, never told its latest id
            claimed = self.store.check_guard(tables, guard)
            if head is not None:
                latest = self._latest(cp.thread_id, cp.ns)
                latest_id = None if latest is None else latest.checkpoint_id
                if latest_id != head.checkpoint_id:
                    raise forked(cp.thread_id, latest_id, head.checkpoint_id)
            for line in lines:
                held = self.line_count(cp.thread_id, line.key)
                if held != line.expect:
                    raise line_moved(line.key, held, line.expect)
            self._check_quotas(tables, cp.thread_id, lines, guard)
            logs = [self._stage_repairs(tables, cp.thread_id, line, claimed) for line in lines]
            self.store.store_session(tables, claimed)
            for line in lines:
                self._append_rows(tables, cp.thread_id, line.key, line.rows)
            for log in logs:  # the lines' repair logs (issue 37 §2), with their rows
                log()
            for blob in blobs:
                self._blobs.setdefault((cp.thread_id, cp.ns, blob.channel, blob.version), blob.value)
            self._checkpoints[(cp.thread_id, cp.ns, cp.checkpoint_id)] = cp

    def put_writes(self, pending: PendingWrites) -> None:
        """Store pending writes; an index >= 0 already stored is kept, a negative one replaced."""
        thread_id, ns, checkpoint_id, writes, guard = pending
        check_thread_text(thread_id, "thread_id")
        check_thread_text(ns, "checkpoint_ns")
        with self.store.locked() as tables:
            self._claim(tables, guard)
            stored = self._writes.setdefault((thread_id, ns, checkpoint_id), {})
            for write in writes:
                key = (write.task_id, write.idx)
                if write.idx < 0 or key not in stored:
                    stored[key] = write

    def delete_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        """Delete the pending writes stored under one checkpoint id."""
        with self.store.locked():
            self._writes.pop((thread_id, ns, checkpoint_id), None)

    # --- reads ----------------------------------------------------------------------------
    def get_checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        """The checkpoint with that id, or the thread's latest in ``ns`` when None."""
        with self.store.locked():
            if checkpoint_id is None:
                return self._latest(thread_id, ns)
            return self._checkpoints.get((thread_id, ns, checkpoint_id))

    def list_checkpoints(self, asked: CheckpointFilter) -> Iterator[StoredCheckpoint]:
        """Checkpoints newest first (a snapshot taken at the call)."""
        thread_id, ns, checkpoint_id, before = asked
        with self.store.locked():
            found = [
                c
                for (t, n, i), c in self._checkpoints.items()
                if (thread_id is None or t == thread_id)
                and (ns is None or n == ns)
                and (checkpoint_id is None or i == checkpoint_id)
                and (before is None or i < before)
            ]
        found.sort(key=lambda c: (c.checkpoint_id, c.thread_id, c.ns), reverse=True)
        return iter(found)

    def get_blobs(
        self, thread_id: str, ns: str, versions: Mapping[str, str]
    ) -> list[StoredBlob]:
        """The blobs of these channel versions that exist."""
        with self.store.locked():
            return [
                StoredBlob(channel, version, self._blobs[(thread_id, ns, channel, version)])
                for channel, version in versions.items()
                if (thread_id, ns, channel, version) in self._blobs
            ]

    def get_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> list[StoredWrite]:
        """The pending writes of one checkpoint, in (task_id, idx) order."""
        with self.store.locked():
            stored = self._writes.get((thread_id, ns, checkpoint_id), {})
            return [stored[k] for k in sorted(stored)]

    def line_rows(self, thread_id: str, key: str, count: int) -> list[Message]:
        """The first ``count`` rows of a line."""
        with self.store.locked() as tables:
            rows = tables.buffers.get(Address(SESSION_SCOPE, thread_id, key), [])
            return copy.deepcopy(rows[:count])

    def line_count(self, thread_id: str, key: str) -> int:
        """How many rows a line's buffer holds now (0 when there is none)."""
        with self.store.locked() as tables:
            return len(tables.buffers.get(Address(SESSION_SCOPE, thread_id, key), []))

    # --- threads --------------------------------------------------------------------------
    @staticmethod
    def _lines(tables: MemoryTables, thread_id: str) -> list[Address]:
        return [
            a
            for a in tables.buffers
            if a.scope == SESSION_SCOPE and a.scope_id == thread_id and a.key.startswith(LINE_PREFIX)
        ]

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs, writes and lines."""
        with self.store.locked():
            self.drop_thread(thread_id)

    def drop_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoint data and lines (in the caller's locked step, if any)."""
        with self.store.locked() as tables:
            for key in [k for k in self._checkpoints if k[0] == thread_id]:
                del self._checkpoints[key]
            for key in [k for k in self._writes if k[0] == thread_id]:
                del self._writes[key]
            for blob in [k for k in self._blobs if k[0] == thread_id]:
                del self._blobs[blob]
            for address in self._lines(tables, thread_id):
                self.store.drop_buffer(tables, address)

    def copy_thread(self, source: str, target: str, guard: WriteGuard | None = None) -> None:
        """Copy every checkpoint, blob, write and line of ``source`` to ``target``."""
        check_thread_text(target, "thread_id")
        with self.store.locked() as tables:
            self._claim(tables, guard)
            for (_, ns, cid), cp in list(self._checkpoints.items()):
                if cp.thread_id == source:
                    copied = StoredCheckpoint(
                        target, ns, cid, cp.parent_id, cp.checkpoint, cp.metadata, cp.run_id,
                        cp.versions,
                    )
                    self._checkpoints.setdefault((target, ns, cid), copied)
            for (t, ns, channel, version), value in list(self._blobs.items()):
                if t == source:
                    self._blobs.setdefault((target, ns, channel, version), value)
            for (t, ns, cid), writes in list(self._writes.items()):
                if t == source:
                    self._writes.setdefault((target, ns, cid), dict(writes))
            for address in self._lines(tables, source):
                if not self.line_count(target, address.key):
                    self._append_rows(tables, target, address.key, tables.buffers[address])

    def prune(self, thread_ids: Sequence[str], keep_latest: bool) -> None:
        """Keep only each namespace's latest checkpoint (``keep_latest``), or delete everything."""
        with self.store.locked() as tables:
            for thread_id in thread_ids:
                if not keep_latest:
                    self.drop_thread(thread_id)
                    continue
                latest: dict[str, str] = {}
                mine = [k for k in self._checkpoints if k[0] == thread_id]
                for _, ns, cid in mine:
                    latest[ns] = max(latest.get(ns, cid), cid)
                for key in mine:
                    if latest[key[1]] != key[2]:
                        self._drop_checkpoint(key)
                self._collect(tables, thread_id)

    def run_threads(self, run_ids: Sequence[str]) -> list[str]:
        """The threads holding a checkpoint these runs made, sorted."""
        runs = set(run_ids)
        with self.store.locked():
            return sorted({k[0] for k, c in self._checkpoints.items() if c.run_id in runs})

    def delete_for_runs(self, run_ids: Sequence[str], threads: Collection[str] | None = None) -> None:
        """Delete the checkpoints these runs made (on ``threads`` only, when given), their writes,
        and what only they referenced."""
        runs = set(run_ids)
        with self.store.locked() as tables:
            made = [
                k
                for k, c in self._checkpoints.items()
                if c.run_id in runs and (threads is None or k[0] in threads)
            ]
            for key in made:
                self._drop_checkpoint(key)
            for thread_id in sorted({k[0] for k in made}):
                self._collect(tables, thread_id)

    def _drop_checkpoint(self, key: _Key) -> None:
        self._checkpoints.pop(key, None)
        self._writes.pop(key, None)

    def _collect(self, tables: MemoryTables, thread_id: str) -> None:
        """Delete the writes, blobs and lines of a thread that no remaining checkpoint references."""
        for key in [k for k in self._writes if k[0] == thread_id and k not in self._checkpoints]:
            del self._writes[key]
        kept = {
            (ns, channel, str(version))
            for (t, ns, _), cp in self._checkpoints.items()
            if t == thread_id
            for channel, version in cp.versions.items()
        }
        lines = set()
        for blob_key in [k for k in self._blobs if k[0] == thread_id]:
            if blob_key[1:] not in kept:
                del self._blobs[blob_key]
                continue
            line = line_of(*self._blobs[blob_key])
            if line is not None:
                lines.add(line)
        for address in self._lines(tables, thread_id):
            if address.key not in lines:
                self.store.drop_buffer(tables, address)



__all__ = ["MemoryCheckpoints"]
