"""The ``Memory`` protocol and the compaction as client methods, declared once for both clients.

Each takes the scope, key and execution context as ``MemoryService`` does and is a
``steps.Planned`` call: the scope resolved against the context first (a refusal sends
nothing and answers the service's neutral result, MEM-7, MEM-14), a ``session`` the
server has no write in yet answering the service's empty result. ``compact`` is
steps: plan, summarize here, apply, planned again while a concurrent compaction
makes the plan stale.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from flowmem.client import calls
from flowmem.client.base import COMPACT_ATTEMPTS
from flowmem.client.binding import Declared
from flowmem.client.steps import Awaited, Planned, Steps
from flowmem.client.types import BufferRead
from flowmem.core import Message
from flowmem.errors import CompactionStaleError
from flowmem.results import (
    BufferResult,
    CompactionPlanResult,
    CompactResult,
    PopResult,
    ReadResult,
    WriteResult,
)
from flowmem.scope import ExecutionContext


def _not_found(default: Any, session_id: str) -> ReadResult:
    """A read in a session no write has created yet: ``default``, not found."""
    return ReadResult(value=default, found=False, resolved_scope_id=session_id)


def _no_rows(session_id: str) -> BufferResult:
    """A load of a session no write has created yet: the empty buffer."""
    return BufferResult(resolved_scope_id=session_id)


def _nothing_popped(session_id: str) -> PopResult:
    """A pop in a session no write has created yet: done, no row."""
    return PopResult(success=True, resolved_scope_id=session_id)


def _nothing_removed(session_id: str) -> WriteResult:
    """A delete or clear in a session no write has created yet: done, nothing removed."""
    return WriteResult(success=True, resolved_scope_id=session_id)


def _compaction_plan(
    scope: str, key: str, context: ExecutionContext | None, keep_tokens: int
) -> Planned[CompactionPlanResult]:
    call = partial(calls.compaction_plan, scope, key, keep_tokens=keep_tokens)
    return Planned("load", scope, key, context, call, CompactionPlanResult)


def _apply_compaction(
    scope: str, key: str, context: ExecutionContext | None, plan: str, summary: Any
) -> Planned[CompactResult]:
    call = partial(calls.apply_compaction, scope, key, plan=plan, summary=summary)
    return Planned("compact", scope, key, context, call, CompactResult)


class MemoryMethods:
    """``flowmem.memory.Memory``'s operations (``AsyncMemory``'s, awaited) and the compaction calls."""

    # --- the Memory protocol (flowmem.memory): the service's signatures ----------------
    @Declared
    def read(scope: str, key: str, context: ExecutionContext | None, default: Any = None) -> Planned[ReadResult]:
        """Read a memory record as ``MemoryService.read`` does; a refusal returns ``default``."""
        read = partial(calls.read_record, scope, key, default=default)
        refused = partial(ReadResult, value=default)
        return Planned("read", scope, key, context, read, refused, partial(_not_found, default))

    @Declared
    def write(
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> Planned[WriteResult]:
        """Write a record as ``MemoryService.write`` does; a refusal reports failure."""
        write = partial(calls.write_record, scope, key, value, ttl=ttl)
        return Planned("write", scope, key, context, write, WriteResult, idempotency_key=idempotency_key)

    @Declared
    def delete(
        scope: str, key: str, context: ExecutionContext | None, *, idempotency_key: str | None = None
    ) -> Planned[WriteResult]:
        """Delete a record as ``MemoryService.delete`` does; a refusal deletes nothing."""
        delete = partial(calls.delete_record, scope, key)
        return Planned("delete", scope, key, context, delete, WriteResult, _nothing_removed, idempotency_key)

    @Declared
    def append(
        scope: str,
        key: str,
        messages: object,
        context: ExecutionContext | None,
        max_messages: int = 0,
        *,
        return_messages: bool = False,
        idempotency_key: str | None = None,
    ) -> Planned[BufferResult]:
        """Append rows as ``MemoryService.append`` does; a refusal writes nothing (MEM-14)."""
        append = partial(calls.append_buffer, scope, key, messages, max_messages=max_messages, return_messages=return_messages)
        return Planned("append", scope, key, context, append, BufferResult, idempotency_key=idempotency_key)

    @Declared
    def load(
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
        include_archived: bool = False,
    ) -> Planned[BufferResult]:
        """Load a buffer as ``MemoryService.load`` does; a refusal is the empty buffer.

        ``include_archived``: the rows compactions archived first (the first
        ``len(messages) - count``), then the live rows.
        """

        def load(where: calls.Where) -> calls.Call[BufferResult]:
            read = calls.load_buffer(scope, key, where, last=last, max_tokens=max_tokens, archived=include_archived)
            return read.then(BufferRead.as_result)

        return Planned("load", scope, key, context, load, BufferResult, _no_rows)

    @Declared
    def clear(
        scope: str, key: str, context: ExecutionContext | None, *, idempotency_key: str | None = None
    ) -> Planned[WriteResult]:
        """Clear a buffer as ``MemoryService.clear`` does; a refusal clears nothing."""
        clear = partial(calls.clear_buffer, scope, key)
        return Planned("clear", scope, key, context, clear, WriteResult, _nothing_removed, idempotency_key)

    @Declared
    def pop_last(
        scope: str, key: str, context: ExecutionContext | None, *, idempotency_key: str | None = None
    ) -> Planned[PopResult]:
        """Remove a buffer's last row as ``MemoryService.pop_last`` does."""
        pop = partial(calls.pop_buffer, scope, key)
        return Planned("pop", scope, key, context, pop, PopResult, _nothing_popped, idempotency_key)

    # --- compaction: the service's two steps over HTTP, and both with a summarizer here --
    @Declared
    def compaction_plan(
        scope: str, key: str, context: ExecutionContext | None, keep_tokens: int
    ) -> Planned[CompactionPlanResult]:
        """The first step of a compaction, as ``MemoryService.compaction_plan`` (a read)."""
        return _compaction_plan(scope, key, context, keep_tokens)

    @Declared
    def apply_compaction(
        scope: str, key: str, context: ExecutionContext | None, plan: str, summary: Any
    ) -> Planned[CompactResult]:
        """The second step, as ``MemoryService.apply_compaction`` (CompactionStaleError: plan again)."""
        return _apply_compaction(scope, key, context, plan, summary)

    @Declared
    def compact_to(
        scope: str, key: str, context: ExecutionContext | None, messages: object
    ) -> Planned[CompactResult]:
        """Replace the whole buffer by a history compacted elsewhere, as ``MemoryService.compact_to``.

        Every stored row goes to the buffer's archive; CompactionStaleError, nothing
        changed, when the buffer was written meanwhile. A refusal sends nothing (MEM-14).
        """
        call = partial(calls.compact_to, scope, key, messages=messages)
        return Planned("compact", scope, key, context, call, CompactResult)

    @Declared
    def compact(
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        keep_tokens: int,
        summarize: Callable[[list[Message]], Any],
    ) -> Steps[CompactResult]:
        """Plan, summarize here, apply: ``MemoryService.compact`` over HTTP (the default counter).

        ``summarize`` gets the rows to archive and returns the summary (text or one
        message; the async client also awaits an awaitable of it); it runs in this
        process, between the two requests. A plan made stale by a concurrent
        compaction is made again, up to ``COMPACT_ATTEMPTS`` times (then
        CompactionStaleError).
        """
        for attempt in range(1, COMPACT_ATTEMPTS + 1):
            plan: CompactionPlanResult = yield _compaction_plan(scope, key, context, keep_tokens)
            if plan.plan is None:
                return CompactResult(
                    count=plan.kept, attempts=attempt, resolved_scope_id=plan.resolved_scope_id, refusal=plan.refusal
                )
            summary = summarize(plan.messages)
            if inspect.isawaitable(summary):  # the sync client sends it on as it is
                summary = yield Awaited(summary)
            try:
                done: CompactResult = yield _apply_compaction(scope, key, context, plan.plan, summary)
            except CompactionStaleError:
                if attempt == COMPACT_ATTEMPTS:
                    raise
                continue
            return replace(done, tokens=plan.tokens, attempts=attempt)
        raise CompactionStaleError("unreachable: the last attempt raises")  # pragma: no cover


__all__ = ["MemoryMethods"]
