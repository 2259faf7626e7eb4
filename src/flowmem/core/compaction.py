"""Compaction plans: which oldest rows of a buffer one summary replaces (issue 28 §2).

A compaction keeps the newest rows that fit in ``keep_tokens`` (the window rules of
``flowmem.core.window``, system rows counted as ordinary rows: the cut is a plain
prefix) and moves the rows before them to the buffer's archive, replaced in reads
by one summary row. The cut is a window start, so it never separates a call from
its results nor a reasoning part from its turn.

The plan names the prefix by the stored rows themselves: a digest of the cursor
and JSON text of every row up to and including the first kept one. A store
applies a plan only when the same digest is read again in the applying
transaction, so a prefix changed in between (another compaction, a clear, a
healed placeholder, a row inserted at the cut) is never archived or summarized
twice (MEM-12). The plan's id (``CompactionPlan.plan_id``) carries the first kept
row's cursor and the digest: nothing is kept on a server between the two steps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowmem.core.append import is_empty, prepare
from flowmem.core.messages import Message, call_ids, result_id
from flowmem.core.tokens import Counter
from flowmem.core.window import RowFacts, fit
from flowmem.errors import InvalidInputError

SUMMARY_KEY = "summary"  # the metadata key that marks a summary row
SUMMARY_ROLE = "user"  # the role of a summary given as text: every provider starts on it
_PLAN_SEPARATOR = "."



@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The oldest rows a compaction archives, and what it keeps.

    ``cursors``/``rows``/``bodies``: the archived rows, in order; ``tokens`` their
    tokens. ``kept``: the cursor of the first row kept; ``kept_rows`` and
    ``kept_tokens``: what stays live. ``digest``: of every row up to ``kept``.
    """

    cursors: tuple[int, ...]
    rows: tuple[Message, ...]
    tokens: int
    kept: int
    kept_rows: int
    kept_tokens: int
    digest: str

    @property
    def plan_id(self) -> str:
        """The plan's id: what a store needs to apply it (``parse_plan_id``)."""
        return f"{self.kept}{_PLAN_SEPARATOR}{self.digest}"


def row_facts(row: Mapping[str, Any], counter: Counter) -> RowFacts:
    """What the window rules need of one stored row, its tokens by ``counter``."""
    tokens = counter(row)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise InvalidInputError(
            f"a token counter must return an integer >= 0, got {tokens!r}", argument="counter"
        )
    return RowFacts(str(row.get("role")), tokens, tuple(call_ids(row)), result_id(row))


def prefix_digest(bodies: Iterable[tuple[int, str]]) -> str:
    """The digest of stored rows by cursor and JSON text, in order (a plan's prefix)."""
    digest = hashlib.sha256()
    for cursor, body in bodies:
        digest.update(f"{cursor}\x00{body}\x00".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def plan_compaction(
    bodies: Sequence[tuple[int, str]],
    rows: Sequence[Message],
    keep_tokens: int,
    counter: Counter,
) -> CompactionPlan | None:
    """The plan that keeps the longest sendable suffix within ``keep_tokens``; None: nothing to archive.

    ``bodies``: the buffer's ``(cursor, JSON text)`` in order; ``rows``: the same rows
    parsed. WindowTooSmallError when the newest turn alone passes ``keep_tokens``.
    """
    facts = [row_facts(row, counter) for row in rows]
    window = fit(facts, keep_tokens, keep_system=False)
    start = window.start
    if start == 0 or start >= len(rows) or (start == 1 and is_summary(rows[0])):
        return None  # nothing beyond the budget but the last compaction's summary: keep it
    return CompactionPlan(
        cursors=tuple(cursor for cursor, _ in bodies[:start]),
        rows=tuple(rows[:start]),
        tokens=sum(fact.tokens for fact in facts[:start]),
        kept=bodies[start][0],
        kept_rows=len(rows) - start,
        kept_tokens=window.tokens,
        digest=prefix_digest(bodies[: start + 1]),
    )


def parse_plan_id(plan_id: object) -> tuple[int, str]:
    """Return ``(first kept cursor, digest)`` of a plan id; InvalidInputError when it is none."""
    if isinstance(plan_id, str):
        kept, _, digest = plan_id.partition(_PLAN_SEPARATOR)
        if kept.isdigit() and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
            return int(kept), digest
    raise InvalidInputError(
        f"not a compaction plan id: {plan_id!r} (take `plan` from the plan's answer)",
        argument="plan",
    )


def summary_row(summary: object, first: int, last: int, now: int) -> Message:
    """The stored summary row of a compaction: ``summary`` (text or a message) marked.

    Its ``metadata.summary`` says which archived rows it stands for: the archive's
    rows numbered ``first`` to ``last`` (``archived``: how many).
    InvalidInputError for an empty summary, a tool result or a turn with tool calls
    (it would pair with nothing).
    """
    message = {"role": SUMMARY_ROLE, "content": summary} if isinstance(summary, str) else summary
    rows = prepare([message], now)
    if len(rows) != 1 or is_empty(rows[0]):
        raise InvalidInputError(
            "a compaction's summary must be non-empty text or one message with content",
            argument="summary",
        )
    row = rows[0]
    if row["role"] == "tool" or call_ids(row):
        raise InvalidInputError(
            "a compaction's summary cannot be a tool result or declare tool calls",
            argument="summary",
        )
    marker = {"archived": last - first + 1, "first": first, "last": last}
    row["metadata"] = {**row.get("metadata", {}), SUMMARY_KEY: marker}
    return row


def is_summary(row: Mapping[str, Any]) -> bool:
    """Whether a stored row is a compaction's summary."""
    meta = row.get("metadata")
    return isinstance(meta, Mapping) and isinstance(meta.get(SUMMARY_KEY), Mapping)
