"""``MemoryEngineParts``: the ``memory://`` back-end's ``MemoryEngine``, a mixin of ``MemoryStore``.

``MemoryStore`` (``store/memory.py``) holds the state; this mixin holds what every
change of a buffer goes through with the store's lock held — the write guard and the
session a claim creates, whose quota a buffer counts against, the quota check and
count, a buffer stored or dropped — and the public ``MemoryEngine`` methods the kinds
of data (``store/<kind>/memory.py``) use instead of the store's private members.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, TypeVar

from flowmem.core import CallIndex, Message, Repair
from flowmem.limits import quota_exceeded
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    SESSION_SCOPE,
    Address,
    Quotas,
    SessionClaim,
    SessionRecord,
    TokenRecord,
    TranscriptMessage,
    Usage,
    WriteGuard,
    quota_owner,
)
from flowmem.store.engine import MemoryTables
from flowmem.store.locks import AddressLocks
from flowmem.store.rows import guard_failed

T = TypeVar("T")


class _Archive(Protocol):
    """What a dropped buffer tells the store's archive."""

    def drop(self, address: Address) -> None:
        """Forget what the buffer at ``address`` archived."""
        ...


class _RepairLog(Protocol):
    """What a dropped buffer tells the store's repair log."""

    def drop(self, address: Address) -> int:
        """Forget the log of the buffer at ``address``; return its bytes."""
        ...

    def staged(
        self,
        tables: MemoryTables,
        address: Address,
        owner: str | None,
        repairs: Sequence[Repair],
        growth: int,
    ) -> Callable[[], None]:
        """Check the entries of ``repairs`` against the quota; the step that logs them."""
        ...


class MemoryEngineParts:
    """``MemoryStore``'s engine: its tables under its lock, and every change's bookkeeping."""

    _lock: threading.RLock
    _locks: AddressLocks
    _tables: MemoryTables
    _records: dict[Address, tuple[str, float | None]]
    _buffers: dict[Address, list[Message]]
    _indexes: dict[Address, CallIndex]
    _sizes: dict[Address, int]
    _counts: dict[Address, list[int]]
    _evicted: dict[Address, tuple[str, ...]]
    _versions: dict[Address, int]
    _changes: itertools.count[int]
    _sessions: dict[str, SessionRecord]
    _transcripts: dict[str, list[TranscriptMessage]]
    _tokens: dict[str, TokenRecord]
    _deleted: dict[str, float]
    _buffer_owners: dict[Address, str | None]
    _record_owners: dict[Address, str | None]
    _usage: dict[str, Usage]
    _quotas: Quotas
    archive: _Archive
    repairs: _RepairLog

    # --- the engine (flowmem.store.engine.MemoryEngine) ----------------------------------
    @contextmanager
    def locked(self) -> Iterator[MemoryTables]:
        """Hold the store's lock: what runs inside is one atomic step (reads and writes)."""
        with self._lock:
            yield self._tables

    @contextmanager
    def locked_at(self, address: Address) -> Iterator[MemoryTables]:
        """``locked``, after the lock that serializes the appends to ``address``."""
        with self._locks.hold(address, DEFAULT_LOCK_TIMEOUT), self._lock:
            yield self._tables

    @contextmanager
    def reading(self) -> Iterator[MemoryTables]:
        """Lend the tables for several reads that agree (the store's lock held)."""
        with self._lock:
            yield self._tables

    def write(self, work: Callable[[MemoryTables], T]) -> T:
        """Run ``work`` on the tables with the store's lock held."""
        with self.locked() as tables:
            return work(tables)

    def write_at(
        self, address: Address, work: Callable[[MemoryTables], T], hold: bool = True
    ) -> T:
        """Run ``work`` serialized with the appends to ``address`` (``hold`` changes nothing here)."""
        with self.locked_at(address) as tables:
            return work(tables)

    def check_guard(self, tx: MemoryTables, guard: WriteGuard | None) -> SessionRecord | None:
        """Raise the guard's error unless it holds; the session its claim creates, or None."""
        return self._check_guard(guard)

    def store_session(self, tables: MemoryTables, created: SessionRecord | None) -> None:
        """Store the session a guard's claim created, once the write has succeeded."""
        self._store_session(created)

    def set_buffer(
        self, tables: MemoryTables, address: Address, rows: list[Message], size: int
    ) -> None:
        """Store a buffer's rows and size, counted against its owner's quotas."""
        self._set_buffer(address, rows, size)

    def drop_buffer(self, tables: MemoryTables, address: Address) -> None:
        """Delete a buffer, counted off its owner's usage."""
        self._drop_buffer(address)

    def stage_repairs(
        self,
        tables: MemoryTables,
        address: Address,
        repairs: Sequence[Repair],
        growth: int = 0,
        created: SessionRecord | None = None,
    ) -> Callable[[], None]:
        """Check ``repairs``' log entries against the quota; the step that logs them (the lock held).

        A buffer this write creates counts against its session's owner (``created``: a
        session the write makes), as ``set_buffer`` will.
        """
        return self.repairs.staged(tables, address, self._owner(address, created), repairs, growth)

    def charge(
        self,
        tables: MemoryTables,
        owner: str | None,
        size: int,
        buffers: int,
        records: int,
        count: bool = True,
        check: bool = True,
    ) -> None:
        """Count a change for ``owner`` (``MemoryEngine.charge``); QuotaExceededError, nothing counted, for growth past a quota.

        ``count=False`` only checks; ``check=False`` only counts (a change checked before).
        """
        if owner is None:
            return
        used = self._usage.get(owner, Usage())
        after = Usage(used.bytes + size, used.buffers + buffers, used.records + records)
        quotas = self._quotas
        for name, delta, value, limit in (
            ("bytes", size, after.bytes, quotas.bytes),
            ("buffers", buffers, after.buffers, quotas.buffers),
            ("records", records, after.records, quotas.records),
        ):
            if check and delta > 0 and limit and value > limit:
                raise quota_exceeded(name, owner, limit)
        if not count:
            return
        if after == Usage():
            self._usage.pop(owner, None)
        else:
            self._usage[owner] = after


    # --- the write guard (the lock held) -------------------------------------------------
    def _check_guard(self, guard: WriteGuard | None) -> SessionRecord | None:
        """Raise the guard's error unless it holds (the store lock held, like the write after it).

        Returns the session its claim creates (``SessionClaim``), for the caller to
        store once its write has succeeded, or None.
        """
        if guard is None:
            return None
        if guard.token_id is not None:
            token = self._tokens.get(guard.token_id)
            if token is None or token.revoked:
                raise guard_failed(False)
        sid, claim = guard.session_id, guard.claim
        if sid is None:
            return None
        session = self._sessions.get(sid)
        if claim is None:
            if session is None:
                raise guard_failed(True)
            return None
        return self._check_claim(guard, sid, claim, session)

    def _check_claim(
        self, guard: WriteGuard, sid: str, claim: SessionClaim, session: SessionRecord | None
    ) -> SessionRecord | None:
        """``_check_guard`` for a guard with a claim: the session it creates, or None."""
        if session is None and sid in self._deleted:
            raise guard_failed(True, guard, None, deleted=True)
        if session is None:
            owner = None if claim.any_owner else claim.owner
            owned = 0 if owner is None else sum(s.owner == owner for s in self._sessions.values())
            if not claim.create or (claim.limit and owner is not None and owned >= claim.limit):
                raise guard_failed(True, guard, None, owned)
            return SessionRecord(
                sid, "", owner, created_at=claim.created_at, updated_at=claim.created_at
            )
        if not claim.any_owner and (
            session.owner != claim.owner
            or (not claim.create and claim.created_at and session.created_at != claim.created_at)
        ):
            raise guard_failed(True, guard, (session.owner,))
        return None

    def _store_session(self, created: SessionRecord | None) -> None:
        """Store the session a claim created (the store lock held), after its write succeeded."""
        if created is not None:
            self._sessions[created.id] = created
            self._transcripts.setdefault(created.id, [])

    # --- what every change of a buffer goes through (the lock held) ---------------------
    def _owner(
        self, address: Address, created: SessionRecord | None = None, record: bool = False
    ) -> str | None:
        """Whose quota a buffer (``record``: a record) at ``address`` counts against.

        ``created``: a session this write makes.
        """
        owners, stored = (
            (self._record_owners, self._records) if record else (self._buffer_owners, self._buffers)
        )
        if address in stored:
            return owners.get(address)
        session = None
        if address.scope == SESSION_SCOPE:
            session = self._sessions.get(address.scope_id)
            if session is None and created is not None and created.id == address.scope_id:
                session = created
        return quota_owner(address.scope, address.scope_id, None if session is None else session.owner)

    def _set_buffer(
        self, address: Address, rows: list[Message], size: int, created: SessionRecord | None = None
    ) -> None:
        """Store a buffer's rows and size, counted against its owner's quotas (the last step)."""
        new = address not in self._buffers
        owner = self._owner(address, created)
        self.charge(self._tables, owner, size - self._sizes.get(address, 0), int(new), 0)
        self._buffers[address] = rows
        self._counts.pop(address, None)  # the caller that knows them sets them again
        self._indexes.pop(address, None)  # likewise the rows' call index (only the append)
        self._sizes[address] = size
        self._buffer_owners[address] = owner
        self._versions[address] = next(self._changes)

    def _drop_buffer(self, address: Address) -> None:
        """Delete a buffer, its archive and its repair log (counted off its owner's usage)."""
        if address not in self._buffers:
            return
        size = self._sizes.get(address, 0) + self.repairs.drop(address)  # and its repair log
        self.charge(self._tables, self._buffer_owners.pop(address, None), -size, -1, 0)
        del self._buffers[address]
        self._counts.pop(address, None)
        self._indexes.pop(address, None)
        self._sizes.pop(address, None)
        self._versions.pop(address, None)
        self._evicted.pop(address, None)
        self.archive.drop(address)


__all__ = ["MemoryEngineParts"]
