"""``MemoryService``: the one place that joins scope → store → core rules.

Every consumer — the FlowDrop nodes, the HTTP API, the runtime, the CLI and the
framework adapters — calls this object and none re-implements it. For each call it

1. validates the arguments with typed errors before anything touches storage
   (``key``, ``ttl``, ``max_messages``, ``last``, the messages via
   ``flowmem.core.prepare``, a record value's JSON form); text that cannot be
   stored (a lone surrogate) in any of them raises ``InvalidTextError``
   (``flowmem.core.check_storable``);
2. resolves the scope once through ``flowmem.scope.resolve_scope`` — the one place
   refusal is decided (MEM-6, MEM-13);
3. on a refusal returns the neutral result, logs exactly one WARNING on the
   ``flowmem`` logger naming the node, pipeline and workflow, and calls no store
   method at all (MEM-7, MEM-14);
4. otherwise calls the store at ``Address(scope, scope_id, key)``.

The ``*_raw`` methods are for trusted callers that already hold a scope id (the
FlowDrop "raw" nodes): they skip resolution, so they never refuse.

Size limits (``flowmem.limits.Limits``: bytes per message, per buffer, per record
value) are enforced here for every consumer, raw or not, before anything is
written; a refusal raises its typed error and changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowmem import metrics
from flowmem.core import AppendOutcome, Message, Repair, is_empty
from flowmem.errors import (
    AccessDeniedError,
    BufferFullError,
    ConfigurationError,
)
from flowmem.limits import Limits, check_non_negative
from flowmem.memory import Memory
from flowmem.refusals import log_refusal
from flowmem.results import (  # re-exported: they were defined here
    BufferPage as BufferPage,
)
from flowmem.results import (
    BufferResult as BufferResult,
)
from flowmem.results import (
    BufferRows as BufferRows,
)
from flowmem.results import (
    BufferText as BufferText,
)
from flowmem.results import (
    PopResult as PopResult,
)
from flowmem.results import (
    ReadResult as ReadResult,
)
from flowmem.results import (
    TokenWindow as TokenWindow,
)
from flowmem.results import (
    WriteResult as WriteResult,
)
from flowmem.scope import (
    ExecutionContext,
    Refusal,
    check_scope,
    resolve_scope,
    usable_identity,
)
from flowmem.service.buffer_reads import BufferReads
from flowmem.service.buffer_reads import (  # re-exported: it was defined here
    PagedText as PagedText,
)
from flowmem.service.checks import (  # re-exported: callers import them from here
    MAX_KEY_LENGTH as MAX_KEY_LENGTH,
)
from flowmem.service.checks import (
    check_count as check_count,
)
from flowmem.service.checks import (
    check_key as check_key,
)
from flowmem.service.checks import (
    check_message_sizes as check_message_sizes,
)
from flowmem.service.checks import (
    check_record as check_record,
)
from flowmem.service.checks import (
    check_scope_id as check_scope_id,
)
from flowmem.service.checks import (
    check_size as check_size,
)
from flowmem.service.checks import (
    check_ttl as check_ttl,
)
from flowmem.service.checks import checked_address, prepared
from flowmem.service.checks import (
    window_args as window_args,
)
from flowmem.service.compaction_calls import CompactionCalls
from flowmem.service.paged_reads import (  # re-exported: a paged load's read and its parts
    PagedRead as PagedRead,
)
from flowmem.service.paged_reads import (
    Segment as Segment,
)
from flowmem.service.repair_reads import RepairReads, note_repair
from flowmem.store.base import (
    DEFAULT_LOCK_TIMEOUT,
    SESSION_SCOPE,
    Address,
    Idempotency,
    SessionClaim,
    Store,
    SupportsPopLast,
    WriteGuard,
)


def _keyed(idempotency: Idempotency | None, convert: Callable[[Any], Any]) -> dict[str, Idempotency]:
    """A store write's ``idempotency`` keyword, the key's answer made from ``convert(outcome)``.

    Without a key, none: the store is called as before keys existed (a store a caller
    wrapped may not take the keyword).
    """
    return {} if idempotency is None else {"idempotency": idempotency.mapped(convert)}


class MemoryService(BufferReads, CompactionCalls, RepairReads):
    """Memory records and conversation buffers under resolved scopes, over one ``Store``.

    ``lock_timeout`` bounds how long an append waits for its turn (MEM-12);
    ``clock`` returns epoch seconds and stamps rows and TTLs (inject one in tests);
    ``limits`` bounds what one write may store (default: ``Limits.from_env()``, the
    defaults and each ``FLOWMEM_MAX_*`` variable that is set, as the server reads them);
    its per-user quotas (``Limits.quotas``) are given to ``store``, which counts them in
    each write (``Store.set_quotas``): the last service built over a store object sets
    them (decision 0112).
    """

    def __init__(
        self,
        store: Store,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        clock: Callable[[], float] = time.time,
        limits: Limits | None = None,
    ) -> None:
        check_non_negative("lock_timeout", lock_timeout)
        if not callable(clock):
            raise ConfigurationError("clock must be a callable returning epoch seconds")
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigurationError(f"limits must be a flowmem.limits.Limits, got {limits!r}")
        self.store = store
        self.lock_timeout = float(lock_timeout)
        self.clock = clock
        self.limits = limits if limits is not None else Limits.from_env()
        set_quotas = getattr(store, "set_quotas", None)
        if set_quotas is not None:  # a partial store counts no quota, as one without pop_last pops not
            set_quotas(self.limits.quotas)

    # --- resolution -------------------------------------------------------------
    def _resolve_scope(
        self, operation: str, scope: object, key: str, context: ExecutionContext | None
    ) -> str | Refusal:
        """Resolve the scope once; on refusal log the one WARNING MEM-7 asks for.

        Implements MEM-7: the refusal is decided by ``resolve_scope`` alone and each
        refusal emits exactly one warning naming the node, pipeline and workflow.
        """
        resolved = resolve_scope(scope, context)
        if isinstance(resolved, Refusal):
            metrics.refused(resolved.scope, resolved.code)
            log_refusal(operation, key, resolved, context)
        return resolved

    def _resolve(
        self, operation: str, scope: object, key: str, context: ExecutionContext | None
    ) -> str | Refusal:
        """``_resolve_scope``, then, for every operation but a guarded write, the session's owner.

        Implements MEM-8 and MEM-9 for reads (issue 38 §3, decision 0108): a ``session``
        scope id that names a session owned by someone else than the context's user
        raises AccessDeniedError, exactly as a write to it does (the write's guard
        compares the same two ids, in its transaction): a session owned by nobody is
        read by a context without a user, and an absent identity reads no one's
        session. A session that does not exist (yet) reads as empty. ``write`` and
        ``append`` are checked by their ``WriteGuard`` instead.
        """
        resolved = self._resolve_scope(operation, scope, key, context)
        if not isinstance(resolved, Refusal) and operation not in ("write", "append"):
            self._check_owner(scope, resolved, context)
        return resolved

    def _check_owner(self, scope: object, scope_id: str, context: ExecutionContext | None) -> None:
        """AccessDeniedError when ``scope_id`` names a session the context's user does not own (MEM-8)."""
        if scope != SESSION_SCOPE or usable_identity(scope_id) != scope_id:
            return
        session = self.store.get_session(scope_id)
        if session is None:
            return
        mine = None if context is None else usable_identity(context.user_id)
        if usable_identity(session.owner) != mine:  # as ``memory_context`` names the owner
            raise AccessDeniedError(
                f"session {scope_id} belongs to another owner than the context's user",
                rule="MEM-8",
            )

    def resolve(
        self, operation: str, scope: object, key: str, context: ExecutionContext | None
    ) -> str | Refusal:
        """Resolve a scope for an adapter's own operation; a refusal logs its one WARNING (MEM-7).

        It does not check the session's owner: the adapter's own operation does.
        """
        return self._resolve_scope(operation, scope, key, context)

    def session_claim(self, session_id: str, context: ExecutionContext | None) -> WriteGuard | None:
        """The guard of a write to a session: it creates it owned by the context's user (MEM-8)."""
        return self._session_guard(SESSION_SCOPE, session_id, None, context)

    def _now(self) -> float:
        return float(self.clock())

    def _session_guard(
        self,
        scope: str,
        scope_id: str,
        guard: WriteGuard | None,
        context: ExecutionContext | None,
        *,
        raw: bool = False,
        usable: bool = False,
    ) -> WriteGuard | None:
        """Return the guard of a write: for the ``session`` scope, one that claims its session.

        Implements MEM-8 for writes (docs/decisions/0032): a ``session`` scope id names
        a real session. The write creates the session when it does not exist, in its
        own transaction, owned by the context's user (nobody for a context without
        one, MEM-9), within ``limits.sessions_per_user``; a session owned by someone
        else than the context's user refuses the write (AccessDeniedError). A raw
        write (a trusted caller with its own scope id) creates an unowned session and
        accepts any owner. A caller's guard that names its session already (the HTTP
        API, the runtime) is kept as it is; an id that is not a usable identity
        claims nothing; ``usable``: ``scope_id`` is ``resolve_scope``'s, a usable identity's text.
        """
        if scope != SESSION_SCOPE or (guard is not None and guard.session_id is not None):
            return guard
        if not usable and usable_identity(scope_id) != scope_id:
            return guard
        owner = None if raw or context is None else usable_identity(context.user_id)
        claim = SessionClaim(
            owner=owner,
            create=True,
            limit=self.limits.sessions_per_user,
            created_at=self._now(),
            any_owner=raw,
        )
        return WriteGuard(None if guard is None else guard.token_id, scope_id, claim)

    # --- memory records -----------------------------------------------------------
    def read(
        self, scope: str, key: str, context: ExecutionContext | None, default: Any = None
    ) -> ReadResult:
        """Read a memory record; a refusal returns ``default``, not found (MEM-7)."""
        name = check_key(key)
        resolved = self._resolve("read", scope, name, context)
        if isinstance(resolved, Refusal):
            return ReadResult(value=default, found=False, refusal=resolved)
        return self.read_raw(scope, resolved, name, default)

    def read_raw(self, scope: str, scope_id: str, key: str, default: Any = None) -> ReadResult:
        """Read a record at an explicit scope id (trusted callers; no resolution)."""
        address = checked_address(scope, scope_id, key)
        found, value = self.store.get_record(address, self._now())
        return ReadResult(
            value=value if found else default, found=found, resolved_scope_id=scope_id
        )

    def write(
        self,
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
        *,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Write a JSON value with an optional TTL in seconds; a refusal reports failure (MEM-7).

        ``guard``: what must still hold when the value is stored (``WriteGuard``).
        ``idempotency``: a key recorded with the write, its answer made from the ``WriteResult``
        (likewise for every method that takes it; a refusal records nothing).
        """
        name = check_key(key)
        check_ttl(ttl)
        check_record(value, self.limits.record_bytes)
        resolved = self._resolve("write", scope, name, context)
        if isinstance(resolved, Refusal):
            return WriteResult(success=False, refusal=resolved)
        guard = self._session_guard(scope, resolved, guard, context)
        return self._write_at(scope, resolved, name, value, ttl, guard, idempotency, checked=True)

    def write_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        value: Any,
        ttl: float | None = None,
        *,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Write a record at an explicit scope id (trusted callers; no resolution).

        In the ``session`` scope the write creates its session when it does not
        exist (unowned; docs/decisions/0032).
        """
        name = check_key(key)
        guard = self._session_guard(check_scope(scope), check_scope_id(scope_id), guard, None, raw=True)
        return self._write_at(scope, scope_id, name, value, ttl, guard, idempotency)

    def _write_at(
        self,
        scope: str,
        scope_id: str,
        key: str,
        value: Any,
        ttl: float | None,
        guard: WriteGuard | None,
        idempotency: Idempotency | None = None,
        *,
        checked: bool = False,
    ) -> WriteResult:
        """Store ``value`` at the address; ``checked``: the caller ran ``check_record`` on it already."""
        address = checked_address(scope, scope_id, key)
        seconds = check_ttl(ttl)
        if not checked:
            check_record(value, self.limits.record_bytes)
        expires_at = None if seconds is None else self._now() + seconds
        result = WriteResult(success=True, resolved_scope_id=scope_id)
        self.store.put_record(address, value, expires_at, guard, **_keyed(idempotency, lambda _: result))
        return result

    def delete(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Delete a record; a refusal reports failure and deletes nothing (MEM-7)."""
        return self._removal("delete", scope, key, context, self.delete_raw, idempotency)

    def _removal(
        self,
        operation: str,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        raw: Callable[..., WriteResult],
        idempotency: Idempotency | None,
    ) -> WriteResult:
        """A delete or a clear at the resolved scope id (``raw``); a refusal removes nothing (MEM-7)."""
        name = check_key(key)
        resolved = self._resolve(operation, scope, name, context)
        if isinstance(resolved, Refusal):
            return WriteResult(success=False, refusal=resolved)
        return raw(scope, resolved, name, idempotency=idempotency)

    def delete_raw(
        self, scope: str, scope_id: str, key: str, *, idempotency: Idempotency | None = None
    ) -> WriteResult:
        """Delete a record at an explicit scope id; ``removed`` is 1 when one existed."""
        address = checked_address(scope, scope_id, key)

        def result(existed: bool) -> WriteResult:
            return WriteResult(success=True, resolved_scope_id=scope_id, removed=int(existed))

        return result(self.store.delete_record(address, **_keyed(idempotency, result)))

    # --- conversation buffers -----------------------------------------------------
    def append(
        self,
        scope: str,
        key: str,
        messages: object,
        context: ExecutionContext | None,
        max_messages: int = 0,
        *,
        return_messages: bool = False,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> BufferResult:
        """Append messages to a buffer under the core rules (MEM-1, 2, 3, 10, 14).

        Implements MEM-14's refused clause: a refusal returns an empty buffer with a
        count of zero and ``appended`` 0, and the turn is dropped, never written to a
        shared history (MEM-7). The result always reports ``count``, ``appended`` and
        ``appended_any``; its ``messages`` is the whole buffer after the append only
        with ``return_messages=True`` (read in the append's transaction, so it costs
        O(buffer)); by default it is ``[]`` and the call costs O(1) in the buffer's
        length (decision 0017). Refuses a row over ``limits.message_bytes``
        (MessageTooLargeError) or an append that grows the buffer past
        ``limits.buffer_bytes`` (BufferFullError), writing nothing. ``guard``: what
        must still hold when the rows are written (``WriteGuard``).
        """
        name = check_key(key)
        window = check_count(max_messages, "max_messages")
        rows = prepared(messages, int(self._now()))
        check_message_sizes(rows, self.limits.message_bytes)
        resolved = self._resolve("append", scope, name, context)
        if isinstance(resolved, Refusal):
            return BufferResult(refusal=resolved)
        guard = self._session_guard(scope, resolved, guard, context, usable=True)
        address = Address(check_scope(scope), resolved, name)
        return self._append_rows(address, rows, window or 0, return_messages, guard, idempotency)

    def append_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        messages: object,
        max_messages: int = 0,
        *,
        return_messages: bool = False,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> BufferResult:
        """Append to a buffer at an explicit scope id (trusted callers; no resolution).

        In the ``session`` scope the append creates its session when it does not
        exist (unowned; docs/decisions/0032).
        """
        address = checked_address(scope, scope_id, key)
        window = check_count(max_messages, "max_messages")
        rows = prepared(messages, int(self._now()))
        check_message_sizes(rows, self.limits.message_bytes)
        guard = self._session_guard(address.scope, address.scope_id, guard, None, raw=True)
        return self._append_rows(address, rows, window or 0, return_messages, guard, idempotency)

    def _append_rows(
        self,
        address: Address,
        rows: list[Message],
        window: int,
        return_messages: bool,
        guard: WriteGuard | None = None,
        idempotency: Idempotency | None = None,
    ) -> BufferResult:
        if all(is_empty(row) for row in rows):
            # nothing to append (e.g. a user turn with no content): a pure read, no write
            if return_messages:
                return self.load_raw(address.scope, address.scope_id, address.key)
            return BufferResult(count=self.store.count(address), resolved_scope_id=address.scope_id)

        def result(outcome: AppendOutcome) -> BufferResult:
            return BufferResult(
                messages=outcome.rows or [],
                count=outcome.count,
                appended=outcome.appended,
                appended_any=outcome.appended > 0,
                resolved_scope_id=address.scope_id,
            )

        with metrics.span("flowmem.append", scope=address.scope, key=address.key):
            try:
                outcome = self.store.append(
                    address,
                    rows,
                    window,
                    self.lock_timeout,
                    snapshot=return_messages,
                    guard=guard,
                    max_bytes=self.limits.buffer_bytes,
                    **_keyed(idempotency, result),
                )
            except BufferFullError as exc:  # refused whole: noted in the buffer's log (0121)
                note_repair(self.store, address, Repair(exc.code, (), len(rows)))
                raise
        metrics.appended(
            outcome.appended, outcome.healed, outcome.replaced, outcome.deduplicated, outcome.count
        )
        return result(outcome)

    def clear(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Delete every row of a buffer; a refusal reports failure and clears nothing (MEM-7).

        A buffer in the ``session`` scope of a session running a turn is not cleared:
        ConflictError, checked atomically with the clear (``Store.clear``).
        """
        return self._removal("clear", scope, key, context, self.clear_raw, idempotency)

    def clear_raw(
        self, scope: str, scope_id: str, key: str, *, idempotency: Idempotency | None = None
    ) -> WriteResult:
        """Clear a buffer at an explicit scope id; ``removed`` is the number of rows deleted.

        ConflictError, nothing cleared, for a ``session``-scope buffer whose session is
        running a turn (checked in the clearing transaction).
        """
        address = checked_address(scope, scope_id, key)
        guard = address.scope_id if address.scope == SESSION_SCOPE else None

        def result(removed: int) -> WriteResult:
            return WriteResult(success=True, resolved_scope_id=scope_id, removed=removed)

        return result(self.store.clear(address, guard_session=guard, **_keyed(idempotency, result)))

    def pop_last(self, scope: str, key: str, context: ExecutionContext | None) -> PopResult:
        """Remove and return a buffer's last row (the Agents SDK's ``pop_item``).

        A refusal removes nothing and reports failure (MEM-7). A ``session``-scope
        buffer of a session running a turn keeps its row: ConflictError (the running
        turn's question is the last row). ConfigurationError
        when the store cannot remove a row (it lacks ``SupportsPopLast``).
        """
        name = check_key(key)
        resolved = self._resolve("pop", scope, name, context)
        if isinstance(resolved, Refusal):
            return PopResult(refusal=resolved)
        return self.pop_last_raw(scope, resolved, name)

    def pop_last_raw(self, scope: str, scope_id: str, key: str) -> PopResult:
        """Remove a buffer's last row at an explicit scope id (trusted callers; no resolution)."""
        address = checked_address(scope, scope_id, key)
        if not isinstance(self.store, SupportsPopLast):
            raise ConfigurationError(
                f"{type(self.store).__name__} cannot remove a buffer's last row (pop_last)"
            )
        guard = address.scope_id if address.scope == SESSION_SCOPE else None
        row = self.store.pop_last(address, guard_session=guard)  # 409 while a turn runs
        return PopResult(
            message=row, success=True, resolved_scope_id=scope_id, removed=int(row is not None)
        )


if TYPE_CHECKING:  # mypy checks that MemoryService has every operation of the protocol
    _service_is_memory: type[Memory] = MemoryService
