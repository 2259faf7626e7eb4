# Generated from src/flowmem/client/aio_compaction.py by scripts/async_to_sync.py: do not edit.
# Change aio_compaction.py, then run `python scripts/async_to_sync.py` (`make lint` fails while this file is stale).
"""The sync client's compaction calls (``flowmem.client.sync.Client`` inherits them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from flowmem.client import calls
from flowmem.client.base import COMPACT_ATTEMPTS
from flowmem.client.sync_scoped import ScopedCalls
from flowmem.core import Message
from flowmem.errors import CompactionStaleError
from flowmem.results import CompactionPlanResult, CompactResult
from flowmem.scope import ExecutionContext

T = TypeVar("T")


class CompactionCalls(ScopedCalls):
    """The compaction calls of ``Client``, over its ``call`` and ``_memory``."""

    def compaction_plan(
        self, scope: str, key: str, context: ExecutionContext | None, keep_tokens: int
    ) -> CompactionPlanResult:
        """The first step of a compaction, as ``MemoryService.compaction_plan`` (a read)."""
        call = partial(calls.compaction_plan, scope, key, keep_tokens=keep_tokens)
        return self._memory("load", scope, key, context, call, CompactionPlanResult)

    def apply_compaction(
        self, scope: str, key: str, context: ExecutionContext | None, plan: str, summary: Any
    ) -> CompactResult:
        """The second step, as ``MemoryService.apply_compaction`` (CompactionStaleError: plan again)."""
        call = partial(calls.apply_compaction, scope, key, plan=plan, summary=summary)
        return self._memory("compact", scope, key, context, call, CompactResult)

    def compact_to(
        self, scope: str, key: str, context: ExecutionContext | None, messages: object
    ) -> CompactResult:
        """Replace the whole buffer by a history compacted elsewhere, as ``MemoryService.compact_to``.

        Every stored row goes to the buffer's archive; CompactionStaleError, nothing
        changed, when the buffer was written meanwhile. A refusal sends nothing (MEM-14).
        """
        call = partial(calls.compact_to, scope, key, messages=messages)
        return self._memory("compact", scope, key, context, call, CompactResult)

    def compact(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        keep_tokens: int,
        summarize: Callable[[list[Message]], Any],
    ) -> CompactResult:
        """Plan, summarize here, apply: ``MemoryService.compact`` over HTTP (the default counter).

        ``summarize`` gets the rows to archive and returns the summary (text or one
        message; the async client also awaits an awaitable of it); it runs in this
        process, between the two requests. A plan made stale by a concurrent
        compaction is made again, up to ``COMPACT_ATTEMPTS`` times (then
        CompactionStaleError).
        """
        for attempt in range(1, COMPACT_ATTEMPTS + 1):
            plan = self.compaction_plan(scope, key, context, keep_tokens)
            if plan.plan is None:
                return CompactResult(
                    count=plan.kept, attempts=attempt, resolved_scope_id=plan.resolved_scope_id, refusal=plan.refusal
                )
            summary = summarize(plan.messages)
            try:
                done = self.apply_compaction(scope, key, context, plan.plan, summary)
            except CompactionStaleError:
                if attempt == COMPACT_ATTEMPTS:
                    raise
                continue
            return replace(done, tokens=plan.tokens, attempts=attempt)
        raise CompactionStaleError("unreachable: the last attempt raises")  # pragma: no cover
