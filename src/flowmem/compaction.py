"""Compaction at a store address: plan, summarize outside any lock, apply if unchanged (issue 28 §2).

``MemoryService.compact`` and its two HTTP steps call these; the rules of the cut
are ``flowmem.core.compaction``'s, the transaction the store's archive's
(``flowmem.store.archive``). The summarizer is a model call in real use, so it
runs outside every lock and transaction: the store then applies the plan only if
the rows it names are unchanged (their digest), in one transaction serialized with
the buffer's appends. A plan made stale by a concurrent compaction is made again,
so a prefix is summarized into the buffer once (MEM-12); an append that raced it
only added rows after the cut, and stays live. A summarizer (or counter) that
raises leaves the buffer as it was: nothing was written yet.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from flowmem.core import Message
from flowmem.core.compaction import (
    SUMMARY_KEY,
    CompactionPlan,
    plan_compaction,
    prefix_digest,
    summary_row,
)
from flowmem.core.tokens import Counter, estimate_tokens
from flowmem.errors import CompactionStaleError, ConfigurationError, InvalidInputError
from flowmem.results import CompactionPlanResult, CompactResult
from flowmem.store.archive import EVERY_ROW, Archived, SupportsArchive
from flowmem.store.base import Address, Store

ATTEMPTS = 3  # plans one compaction makes at most when concurrent ones keep changing the rows
Summarizer = Callable[[list[Message]], object]
"""Takes the rows to archive (copies, in order); returns the summary: text, or one message."""


def archive_of(store: Store) -> SupportsArchive:
    """The store's archive; ConfigurationError when the store has none."""
    archive = getattr(store, "archive", None)
    if not isinstance(archive, SupportsArchive):
        raise ConfigurationError(f"{type(store).__name__} cannot compact a buffer (no archive)")
    return archive


def counter_of(counter: object) -> Counter:
    """``counter``, or the default one (``flowmem.core.tokens.estimate_tokens``) for None."""
    if counter is None:
        return estimate_tokens
    if not callable(counter):
        raise InvalidInputError("counter must be a callable taking one stored row", argument="counter")
    return counter


def check_summarizer(summarize: object) -> Summarizer:
    """``summarize`` when it is callable; else InvalidInputError."""
    if not callable(summarize):
        raise InvalidInputError("summarize must be a callable taking the rows", argument="summarize")
    return summarize


def read_plan(store: Store, address: Address, keep_tokens: int, counter: Counter) -> CompactionPlan | None:
    """The plan over the buffer as it is now (one read of it); None: nothing to archive."""
    bodies = store.load_bodies(address)
    rows: list[Message] = json.loads("[" + ",".join(body for _, body in bodies) + "]")
    return plan_compaction(bodies, rows, keep_tokens, counter)


def plan_result(plan: CompactionPlan | None, count: int, scope_id: str) -> CompactionPlanResult:
    """The first step's answer for ``plan`` over a buffer of ``count`` rows."""
    if plan is None:
        return CompactionPlanResult(kept=count, resolved_scope_id=scope_id)
    return CompactionPlanResult(
        plan=plan.plan_id,
        messages=[dict(row) for row in plan.rows],
        archived=len(plan.rows),
        tokens=plan.tokens,
        kept=plan.kept_rows,
        kept_tokens=plan.kept_tokens,
        resolved_scope_id=scope_id,
    )


def apply_plan(
    store: Store,
    address: Address,
    kept: int,
    digest: str,
    summary: object,
    now: int,
    check: Callable[[Message], None],
) -> Archived | None:
    """Apply a plan with ``summary`` (checked first: InvalidInputError, ``check``'s error); None: stale."""
    check(summary_row(summary, 1, 1, now))  # refused before the transaction, nothing written
    archive = archive_of(store)
    return archive.compact(address, kept, digest, lambda first, last: [summary_row(summary, first, last, now)])


def replace_all(
    store: Store, address: Address, rows: list[Message], check: Callable[[Message], None]
) -> Archived | None:
    """Archive every row of the buffer and put ``rows`` (prepared) in their place, in one transaction.

    The first of ``rows`` is marked as the summary of what was archived. None when
    the buffer is empty; CompactionStaleError, nothing changed, when it was written
    between the read and the write.
    """
    if not rows:
        raise InvalidInputError("a compacted history has at least one message", argument="messages")
    for row in rows:
        check(row)
    bodies = store.load_bodies(address)
    if not bodies:
        return None
    def made(first: int, last: int) -> list[Message]:
        head = dict(rows[0])
        head["metadata"] = {
            **head.get("metadata", {}),
            SUMMARY_KEY: {"archived": last - first + 1, "first": first, "last": last},
        }
        return [head, *rows[1:]]

    done = archive_of(store).compact(address, EVERY_ROW, prefix_digest(bodies), made)
    if done is None:
        raise CompactionStaleError(
            f"buffer {address.key!r} was written while its compacted history was made: compact again"
        )
    return done


def compacted(done: Archived, tokens: int | None, count: int, attempts: int, scope_id: str) -> CompactResult:
    """The result of an applied compaction."""
    return CompactResult(
        compacted=True,
        archived=done.count,
        tokens=tokens,
        first=done.first,
        last=done.last,
        summary=done.summary[0],
        count=count,
        attempts=attempts,
        resolved_scope_id=scope_id,
    )


def compact_at(
    store: Store,
    address: Address,
    keep_tokens: int,
    summarize: Summarizer,
    counter: Counter,
    now: int,
    check: Callable[[Message], None],
) -> CompactResult:
    """Plan, summarize, apply; plan again when a concurrent compaction made the plan stale.

    CompactionStaleError after ``ATTEMPTS`` stale plans (nothing changed by this call).
    """
    for attempt in range(1, ATTEMPTS + 1):
        plan = read_plan(store, address, keep_tokens, counter)
        if plan is None:
            return CompactResult(count=store.count(address), attempts=attempt, resolved_scope_id=address.scope_id)
        summary = summarize([_copy(row) for row in plan.rows])
        done = apply_plan(store, address, plan.kept, plan.digest, summary, now, check)
        if done is not None:
            return compacted(done, plan.tokens, store.count(address), attempt, address.scope_id)
    raise CompactionStaleError(
        f"the oldest rows of buffer {address.key!r} kept changing under {ATTEMPTS} compactions: "
        "another compaction is running; try again"
    )


def _copy(row: Mapping[str, Any]) -> Message:
    copied: Message = json.loads(json.dumps(row))
    return copied
