"""The plain results of memory operations, shared by ``MemoryService`` and ``flowmem.client``.

Frozen dataclasses with no I/O: the in-process service and the HTTP client return
the same types, so code written against ``flowmem.memory.Memory`` runs on either.
``flowmem.service`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from functools import cache
from typing import TYPE_CHECKING, Any

from flowmem.core import Message
from flowmem.scope import Refusal

REFUSED_KEY = "refused"
"""The JSON key of a refusal's code, present only on a refused call (decision 0047)."""
UNANSWERED = frozenset({"refusal", "replayed"})
"""The fields of a result its JSON answer does not hold: the refusal (answered as its code), the client's ``replayed``."""


def replayed_field() -> bool:
    """A write result's ``replayed``, not compared (``flowmem.client`` only).

    True when the server answered a repeated ``Idempotency-Key`` with its first answer
    (``Idempotent-Replayed``) and wrote nothing this time.
    """
    return field(default=False, compare=False)


@cache
def _names(kind: type) -> tuple[str, ...]:
    """A dataclass's field names, in their order (read once per class)."""
    return tuple(item.name for item in fields(kind))


def fields_of(value: Any) -> dict[str, Any]:
    """A dataclass's fields by name, in their order, as they are (``dataclasses.asdict`` copies deeply)."""
    return {name: getattr(value, name) for name in _names(value.__class__)}


class Refusable:
    """What every result of a scoped call has: ``refused``, the code of its refusal or None."""

    if TYPE_CHECKING:
        refusal: Refusal | None

    @property
    def refused(self) -> str | None:
        """The refusal's code (``no_session_id``, ``unusable_user_id`` …), None when not refused.

        The neutral result (MEM-7) says nothing was stored or found; this says why.
        """
        refusal = self.refusal
        return None if refusal is None else refusal.code

    def _with_refused(self, answer: dict[str, Any]) -> dict[str, Any]:
        refusal = self.refusal
        if refusal is not None:
            answer[REFUSED_KEY] = refusal.code
        return answer


class Answered(Refusable):
    """A result whose JSON answer is its fields: all but ``refusal`` (answered as ``refused``) and ``replayed``."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON answer: every field but ``refusal`` and the client's ``replayed``; ``refused`` on a refusal."""
        return self._with_refused(
            {name: value for name, value in fields_of(self).items() if name not in UNANSWERED}
        )


@dataclass(frozen=True)
class ReadResult(Answered):
    """What a memory read reports: the value (or the default), whether it was found."""

    value: Any = None
    found: bool = False
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)


@dataclass(frozen=True)
class WriteResult(Answered):
    """What a write, delete or clear reports.

    ``success`` is False only on a refusal; ``removed`` is how many records (delete)
    or rows (clear) existed and were removed (0 for a write).
    """

    success: bool = False
    resolved_scope_id: str = ""
    removed: int = 0
    refusal: Refusal | None = field(default=None, compare=False)
    replayed: bool = replayed_field()


@dataclass(frozen=True)
class TokenWindow:
    """What a token-budget read cut (issue 28): the window's place and what was left out.

    ``start``: the index (0-based) in the buffer of the window's first non-kept-system
    row (``count`` when only system rows fit); ``tokens``: the window's tokens;
    ``cut_messages`` and ``cut_tokens``: the rows and tokens left out (``cut_tokens``
    None when a caller's counter counted: it is known only by reading every row).
    """

    budget: int
    tokens: int
    start: int
    cut_messages: int
    cut_tokens: int | None

    def to_dict(self) -> dict[str, Any]:
        """Return the five fields."""
        return fields_of(self)


@dataclass(frozen=True)
class BufferResult(Refusable):
    """What a buffer append or load reports (MEM-14).

    ``messages`` is the buffer after the call — for an append only when the caller
    asked for it (``return_messages=True``), else empty (decision 0017) — ``count``
    its number of rows, ``appended`` how many incoming messages became new rows and
    ``appended_any`` whether that is more than zero. ``window``: for a load with a
    token budget, what the window cut (None otherwise).
    """

    messages: list[Message] = field(default_factory=list)
    count: int = 0
    appended: int = 0
    appended_any: bool = False
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)
    replayed: bool = replayed_field()
    window: TokenWindow | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the five reported fields (``window`` too for a token budget, ``refused`` on a refusal).

        Spelled out, not read with ``fields_of``: every append's answer is made here.
        """
        answer: dict[str, Any] = {
            "messages": self.messages,
            "count": self.count,
            "appended": self.appended,
            "appended_any": self.appended_any,
            "resolved_scope_id": self.resolved_scope_id,
        }
        if self.window is not None:
            answer["window"] = self.window.to_dict()
        return self._with_refused(answer)


@dataclass(frozen=True)
class BufferPage(Answered):
    """A page of a buffer: ``messages`` in order, the whole buffer's ``count``.

    ``next_before`` is the cursor to pass as ``before`` for the page of older rows
    (None when there are none).
    """

    messages: list[Message] = field(default_factory=list)
    count: int = 0
    next_before: int | None = None
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BufferText(Refusable):
    """A buffer's rows as their stored compact JSON texts, unparsed (for streaming).

    ``bodies`` are in order; ``count`` is the whole buffer's; ``next_before`` as in
    ``BufferPage`` (None unless a page was asked for and older rows exist).
    """

    bodies: list[str] = field(default_factory=list)
    count: int = 0
    next_before: int | None = None
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)


@dataclass(frozen=True)
class BufferRows(Refusable):
    """A buffer's rows as an iterator read a batch at a time (``MemoryService.iter_load``).

    Iterate it (once) for the rows in order; ``close`` it when stopping early, to
    release what the store holds for it. A refusal iterates nothing (MEM-7).
    """

    rows: Iterator[Message] = field(default_factory=lambda: iter(()))
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)

    def __iter__(self) -> Iterator[Message]:
        """Return the rows' iterator."""
        return self.rows

    def close(self) -> None:
        """Stop reading: release the store's connection, if the iterator holds one."""
        close = getattr(self.rows, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class PopResult(Answered):
    """What removing a buffer's last row reports: the row removed (None when empty or refused).

    ``success`` is False only on a refusal; ``removed`` is 1 when a row was removed.
    """

    message: Message | None = None
    success: bool = False
    resolved_scope_id: str = ""
    removed: int = 0
    refusal: Refusal | None = field(default=None, compare=False)
    replayed: bool = replayed_field()


@dataclass(frozen=True)
class CompactionPlanResult(Answered):
    """The first step of a compaction (issue 28 §2): what it would archive, and the plan's id.

    ``messages``: the rows a summary would replace, in order (``archived`` of them,
    ``tokens`` tokens); ``kept``/``kept_tokens``: the rows left live. ``plan``: the
    id to apply it with (None when nothing lies beyond the budget: no plan).
    """

    plan: str | None = None
    messages: list[Message] = field(default_factory=list)
    archived: int = 0
    tokens: int = 0
    kept: int = 0
    kept_tokens: int = 0
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)


@dataclass(frozen=True)
class CompactResult(Answered):
    """What a compaction did: ``archived`` rows (archive numbers ``first``..``last``) replaced by ``summary``.

    ``compacted`` is False, and nothing changed, when nothing lay beyond the budget
    (or on a refusal). ``tokens``: the archived rows' tokens, when counted (None for
    a plan applied over HTTP, counted at its plan). ``count``: the buffer's live rows
    after; ``attempts``: how many plans it took (a plan made stale by a concurrent
    compaction is made again).
    """

    compacted: bool = False
    archived: int = 0
    tokens: int | None = None
    first: int | None = None
    last: int | None = None
    summary: Message | None = None
    count: int = 0
    attempts: int = 0
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RepairLogResult(Answered):
    """A page of a buffer's repair log (issue 37 §2), newest first.

    ``repairs``: each entry's ``seq``, ``at`` (seconds since the epoch), ``rule``,
    ``kind`` (``heal``, ``replace``, ``duplicate``, ``evict``, ``compact``,
    ``normalize``, ``refuse``), ``call_ids``, ``count``, ``positions`` and
    ``archived`` (``flowmem.store.repairs`` describes each).
    ``next_before``: pass it as ``before`` for the older entries (None: there are none).
    """

    repairs: list[dict[str, Any]] = field(default_factory=list)
    next_before: int | None = None
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)
