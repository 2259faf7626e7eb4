"""The memory service's compaction calls (issue 28 §2), joined to ``MemoryService`` as a base class.

Plan and apply, compact in one call, replace by a history made elsewhere, and the
archive read: each checks its arguments, resolves the scope through the service
(a refusal changes nothing, MEM-7) and hands the store work to ``flowmem.compaction``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal, overload

from flowmem import compaction
from flowmem.core import Message, prepare
from flowmem.core.compaction import parse_plan_id
from flowmem.core.tokens import Counter
from flowmem.errors import CompactionStaleError, InvalidInputError
from flowmem.limits import Limits
from flowmem.results import BufferResult, CompactionPlanResult, CompactResult
from flowmem.scope import ExecutionContext, Refusal, check_scope
from flowmem.service.checks import (
    check_count,
    check_key,
    check_message_sizes,
    checked_address,
)
from flowmem.service.paged_reads import PagedRead, plan_read
from flowmem.service.part import ServicePart
from flowmem.store.base import Address


class CompactionCalls(ServicePart):
    """``MemoryService``'s compaction methods; the service gives them its store, limits and scope resolution."""

    limits: Limits

    if TYPE_CHECKING:

        def _now(self) -> float: ...

        def append(
            self, scope: str, key: str, messages: object, context: ExecutionContext | None
        ) -> BufferResult: ...

    def _with_archive(self, address: Address, last: int | None) -> BufferResult:
        if last is not None:
            raise InvalidInputError(
                "include_archived reads the whole buffer: leave out last", argument="last"
            )
        read = compaction.archive_of(self.store).read(address)
        rows: list[Message] = json.loads("[" + ",".join([*read.archived, *read.live]) + "]")
        return BufferResult(messages=rows, count=len(read.live), resolved_scope_id=address.scope_id)

    def _check_summary(self, row: Message) -> None:
        check_message_sizes([row], self.limits.message_bytes)

    @overload
    def compaction_plan(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        keep_tokens: int,
        *,
        counter: Counter | None = None,
        paged: Literal[False] = False,
    ) -> CompactionPlanResult: ...

    @overload
    def compaction_plan(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        keep_tokens: int,
        *,
        counter: Counter | None = None,
        paged: Literal[True],
    ) -> PagedRead: ...

    def compaction_plan(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        keep_tokens: int,
        *,
        counter: Counter | None = None,
        paged: bool = False,
    ) -> CompactionPlanResult | PagedRead:
        """The first step of a compaction: the rows beyond ``keep_tokens`` and the plan's id.

        A read (it changes nothing). Summarize ``messages``, then ``apply_compaction``
        with ``plan``. WindowTooSmallError when the newest turn alone passes the
        budget. A refusal returns no plan (MEM-7). ``paged`` (the default counter): a
        ``PagedRead`` of the same answer instead, its rows read a page at a time
        (``MemoryService.read_segment``), for a caller that writes them as they come.
        """
        name = check_key(key)
        budget = check_count(keep_tokens, "keep_tokens") or 0
        count = compaction.counter_of(counter)
        if paged and counter is not None:
            raise InvalidInputError("a paged compaction plan counts by default: leave out counter")
        resolved = self._resolve("load", scope, name, context)
        if isinstance(resolved, Refusal):
            return PagedRead(refusal=resolved) if paged else CompactionPlanResult(refusal=resolved)
        if paged:
            return plan_read(self.store, Address(check_scope(scope), resolved, name), budget)
        return self.compaction_plan_raw(scope, resolved, name, budget, counter=count)

    def compaction_plan_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        keep_tokens: int,
        *,
        counter: Counter | None = None,
    ) -> CompactionPlanResult:
        """``compaction_plan`` at an explicit scope id (trusted callers; no resolution)."""
        address = checked_address(scope, scope_id, key)
        budget = check_count(keep_tokens, "keep_tokens") or 0
        plan = compaction.read_plan(self.store, address, budget, compaction.counter_of(counter))
        total = 0 if plan is not None else self.store.count(address)
        return compaction.plan_result(plan, total, scope_id)

    def apply_compaction(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        plan: str,
        summary: object,
    ) -> CompactResult:
        """The second step: replace the plan's rows by ``summary`` (text or one message), archiving them.

        CompactionStaleError (409), nothing changed, when the rows changed since the
        plan (another compaction, a clear): plan again. A refusal changes nothing (MEM-7).
        """
        name = check_key(key)
        parse_plan_id(plan)  # refused before the scope is resolved
        resolved = self._resolve("compact", scope, name, context)
        if isinstance(resolved, Refusal):
            return CompactResult(refusal=resolved)
        return self.apply_compaction_raw(scope, resolved, name, plan, summary)

    def apply_compaction_raw(
        self, scope: str, scope_id: str, key: str, plan: str, summary: object
    ) -> CompactResult:
        """``apply_compaction`` at an explicit scope id (trusted callers; no resolution)."""
        address = checked_address(scope, scope_id, key)
        kept, digest = parse_plan_id(plan)
        now = int(self._now())
        done = compaction.apply_plan(
            self.store, address, kept, digest, summary, now, self._check_summary
        )
        if done is None:
            raise CompactionStaleError(
                f"the rows of this compaction plan of buffer {key!r} changed since it was "
                "made: make a new plan"
            )
        return compaction.compacted(done, None, self.store.count(address), 1, scope_id)

    def compact(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        keep_tokens: int,
        summarize: compaction.Summarizer,
        counter: Counter | None = None,
    ) -> CompactResult:
        """Replace the oldest rows beyond ``keep_tokens`` by one summary; archive them (issue 28 §2).

        The newest rows that fit in ``keep_tokens`` tokens (``counter``: a stored row's
        tokens, default ``flowmem.core.tokens.estimate_tokens``) stay, cut where the
        window rules allow; ``summarize`` gets the rows before them and returns the
        summary (text or one message), marked ``metadata.summary``. The rows stay
        retrievable (``load(..., include_archived=True)``) until the buffer is
        cleared, its session deleted or its user erased, and a late copy of an
        archived result or turn is still a duplicate (MEM-1, MEM-2). A summarizer
        that raises changes nothing; concurrent compactions archive a prefix once
        (MEM-12). A refusal changes nothing (MEM-7).
        """
        name = check_key(key)
        check_count(keep_tokens, "keep_tokens")
        compaction.counter_of(counter)
        compaction.check_summarizer(summarize)
        resolved = self._resolve("compact", scope, name, context)
        if isinstance(resolved, Refusal):
            return CompactResult(refusal=resolved)
        return self.compact_raw(
            scope, resolved, name, keep_tokens=keep_tokens, summarize=summarize, counter=counter
        )

    def compact_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        *,
        keep_tokens: int,
        summarize: compaction.Summarizer,
        counter: Counter | None = None,
    ) -> CompactResult:
        """``compact`` at an explicit scope id (trusted callers; no resolution)."""
        address = checked_address(scope, scope_id, key)
        budget = check_count(keep_tokens, "keep_tokens") or 0
        return compaction.compact_at(
            self.store,
            address,
            budget,
            compaction.check_summarizer(summarize),
            compaction.counter_of(counter),
            int(self._now()),
            self._check_summary,
        )

    def compact_to(
        self, scope: str, key: str, context: ExecutionContext | None, messages: object
    ) -> CompactResult:
        """Replace the whole buffer by ``messages`` (a history a compaction model made), archiving every row.

        For a compaction made elsewhere (the Agents SDK's ``responses.compact``): the
        rows go to the archive as ``compact`` archives them, the first message is
        marked as their summary, in one transaction; CompactionStaleError, nothing
        changed, when the buffer was written since it was read. An empty buffer just
        gets ``messages`` appended. A refusal changes nothing (MEM-7).
        """
        name = check_key(key)
        rows = prepare(messages, int(self._now()))
        check_message_sizes(rows, self.limits.message_bytes)
        resolved = self._resolve("compact", scope, name, context)
        if isinstance(resolved, Refusal):
            return CompactResult(refusal=resolved)
        address = Address(check_scope(scope), resolved, name)
        done = compaction.replace_all(self.store, address, rows, self._check_summary)
        if done is None:
            appended = self.append(scope, key, rows, context)
            return CompactResult(count=appended.count, attempts=1, resolved_scope_id=resolved)
        return compaction.compacted(done, None, self.store.count(address), 1, resolved)


__all__ = ["CompactionCalls"]
