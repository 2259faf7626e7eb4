"""The conversation-buffer append: MEM-1, MEM-2, MEM-3, MEM-10, MEM-14 and the window.

The rules are written once, against ``BufferEditor``: a small read/write view of one
buffer. ``ListEditor`` implements it over a plain list for the pure ``append``; each
store implements it with indexed queries inside one transaction, so the pure append
and the stored append run the very same code (``apply_append``).

A buffer also remembers the call ids of the turns its window evicted (the latest
``EVICTED_CALLS_KEPT``), so that a late or re-delivered copy of an evicted call or
result is a duplicate (MEM-1, MEM-2), not an orphan result or an unanswered call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from flowmem.core.messages import (
    Message,
    call_ids,
    healed_row,
    is_empty_content,
    is_healed,
    result_id,
    to_row,
)
from flowmem.core.repairs import WINDOW, Repair, Tally, removed_index
from flowmem.core.storable import check_storable
from flowmem.errors import InvalidInputError


class Answer(NamedTuple):
    """Where a call id is answered in a buffer, and whether by a healed placeholder."""

    position: int
    healed: bool


class Dangling(NamedTuple):
    """A declared call with no answer, and the row after which its placeholder goes."""

    call_id: str
    after: int


class PositionedRow(NamedTuple):
    """A row of a buffer with its position (its oldest, for window eviction)."""

    position: int
    row: Message


Oldest = PositionedRow  # the first name of ``PositionedRow``, kept for callers of flowmem.core

EVICTED_CALLS_KEPT = 256
"""Call ids of evicted turns a buffer remembers, per buffer: the most recent (docs/memory.md)."""


class BufferEditor(Protocol):
    """A read/write view of one buffer: the questions the append rules ask.

    Positions are opaque integers ordered like the rows. A position returned by a
    query stays valid until the next mutation *at or before it*; ``apply_append``
    only relies on that.
    """

    def count(self) -> int:
        """Return the number of rows."""
        ...

    def is_declared(self, call_id: str) -> bool:
        """Return True when some assistant row declares ``call_id``."""
        ...

    def answer_of(self, call_id: str) -> Answer | None:
        """Return the row answering ``call_id`` anywhere in the buffer, if any."""
        ...

    def dangling(self) -> list[Dangling]:
        """Return every declared, unanswered call in buffer and declaration order.

        ``after`` is the last row of the declaring turn's result run (the contiguous
        tool rows right after it), or the turn itself when none follow.
        """
        ...

    def oldest(self) -> PositionedRow | None:
        """Return the first row, or None for an empty buffer."""
        ...

    def index_of(self, position: int) -> int:
        """Return the index of the row at ``position`` (how many rows come before it)."""
        ...

    def was_evicted(self, call_id: str) -> bool:
        """Return True when a turn the window evicted declared ``call_id`` (and it is remembered)."""
        ...

    def append_row(self, row: Message) -> None:
        """Add ``row`` at the end."""
        ...

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert ``rows`` in order directly after the row at ``position``."""
        ...

    def replace(self, position: int, row: Message) -> None:
        """Replace the row at ``position`` with ``row``, keeping its place."""
        ...

    def delete(self, position: int) -> None:
        """Remove the row at ``position``."""
        ...

    def remember_evicted(self, call_ids: Sequence[str]) -> None:
        """Remember the call ids of an evicted turn, keeping the latest ``EVICTED_CALLS_KEPT``."""
        ...


REPORTED = ("messages", "count", "appended", "appended_any")
"""What an append reports (MEM-14), by ``AppendResult``'s names, in the order it reports them."""


@dataclass(frozen=True)
class AppendResult:
    """What an append reports (MEM-14): the buffer after it and how much was new.

    ``evicted``: the call ids of evicted turns the buffer remembers after the append,
    oldest first; the pure ``append`` takes them back for the next append.
    """

    messages: list[Message] = field(default_factory=list)
    count: int = 0
    appended: int = 0
    evicted: tuple[str, ...] = ()

    @property
    def appended_any(self) -> bool:
        """True when at least one incoming message became a new row (MEM-14)."""
        return self.appended > 0

    def to_dict(self) -> dict[str, Any]:
        """Return the four reported fields (``REPORTED``) as a plain dict."""
        return {name: getattr(self, name) for name in REPORTED}


@dataclass(frozen=True)
class AppendOutcome:
    """What ``apply_append`` did to an editor: rows added and the final count.

    A store asked for a snapshot also sets ``rows``: the buffer as the same
    transaction left it, so ``count`` and ``rows`` always agree. What the rules did
    besides, for the metrics (``flowmem.metrics``): ``healed`` placeholders inserted
    (MEM-3), ``replaced`` placeholders a real result took the place of (MEM-10), and
    ``deduplicated`` incoming rows dropped as already known (MEM-1, MEM-2). For the
    buffer's repair log (``flowmem.store.repairs``): ``repairs``, one per rule that
    acted (MEM-3, MEM-10, MEM-1, MEM-2), then the window's eviction, if any.
    """

    appended: int
    count: int
    rows: list[Message] | None = None
    healed: int = 0
    replaced: int = 0
    deduplicated: int = 0
    repairs: tuple[Repair, ...] = ()

    @property
    def logged(self) -> tuple[Repair, ...]:
        """The repairs a buffer's repair log keeps: none when the append changed no row.

        An append whose every row was refused as a duplicate, and that evicted
        nothing, writes nothing, as before the log (decision 0071: it commits
        nothing); its refusals are in its answer.
        """
        changed = self.appended or self.healed or self.replaced
        return self.repairs if changed or any(r.kind == "evict" for r in self.repairs) else ()


def incoming_list(incoming: object) -> list[Any]:
    """Return the incoming messages as a list: one map becomes a one-element list."""
    if isinstance(incoming, Mapping):
        return [incoming]
    if isinstance(incoming, (list, tuple)):
        return list(incoming)
    if incoming is None:
        return []
    raise InvalidInputError(
        f"messages must be one message object or a list of them, got {type(incoming).__name__}"
    )


def prepare(incoming: object, now: int | None = None) -> list[Message]:
    """Validate and convert incoming messages to stored rows, all or nothing.

    Raises before anything is written when any message is invalid — including text
    that cannot be stored (``InvalidTextError``, ``check_storable``) — so a refused
    append changes nothing.
    """
    rows = [to_row(message, now) for message in incoming_list(incoming)]
    check_storable(rows, "messages")
    return rows


def is_empty(row: Message) -> bool:
    """Return True for a row the append skips: empty content, unless it declares calls.

    Content is empty when it is ``""``, ``None`` or an empty list: parts count, so a
    message whose only part is an image is not empty (decision 0021).
    """
    if not is_empty_content(row["content"]):
        return False
    return not call_ids(row)


def heal(editor: BufferEditor, timestamp: object = None, healed: list[str] | None = None) -> int:
    """Answer every unanswered declared call with a healed placeholder; return how many.

    Implements MEM-3: each placeholder goes directly after the declaring turn (after
    results already following it contiguously), in declaration order. Groups are
    inserted from the last position backwards so earlier positions stay valid.
    Placeholders carry ``timestamp`` (the healing user turn's) when given; ``healed``
    gets the healed call ids, in declaration order.
    """
    groups: dict[int, list[str]] = {}
    for item in editor.dangling():
        groups.setdefault(item.after, []).append(item.call_id)
        if healed is not None:
            healed.append(item.call_id)
    for after in sorted(groups, reverse=True):
        editor.insert_after(after, [healed_row(cid, timestamp) for cid in groups[after]])
    return sum(len(ids) for ids in groups.values())


def _append_tool(editor: BufferEditor, row: Message, tally: Tally) -> None:
    """Append a tool result unless its id is already answered.

    Implements MEM-1 (a second result for an id is dropped, also one whose call the
    window evicted and no turn in the buffer declares again: it was stored and left
    with its turn, or it comes too late to be paired) and MEM-10 (a real result
    replaces a healed placeholder in place, dropping the healed marking; an incoming
    row itself marked healed never replaces anything).
    """
    rid = result_id(row)
    if rid is None:
        editor.append_row(row)
        tally.appended += 1
        return
    answer = editor.answer_of(rid)
    if answer is None:
        if editor.was_evicted(rid) and not editor.is_declared(rid):
            tally.deduplicated += 1
            tally.note("MEM-1", (rid,))
            return
        editor.append_row(row)
        tally.appended += 1
        return
    if answer.healed and not is_healed(row):
        replacement = dict(row)
        replacement["metadata"] = {k: v for k, v in row["metadata"].items() if k != "healed"}
        editor.replace(answer.position, replacement)
        tally.replaced += 1
        tally.note("MEM-10", (rid,))
        return
    tally.deduplicated += 1
    tally.note("MEM-1", (rid,))


def _append_assistant(editor: BufferEditor, row: Message, tally: Tally) -> None:
    """Append an assistant turn unless every call id it declares is already known.

    Implements MEM-2: an id is known when a row of the buffer declares it, or a turn
    the window evicted did (a re-delivered turn is not appended again).
    """
    ids = call_ids(row)
    if ids and all(editor.is_declared(cid) or editor.was_evicted(cid) for cid in ids):
        tally.deduplicated += 1
        tally.refused_turns += 1
        tally.note("MEM-2", ids)
        return
    editor.append_row(row)
    tally.appended += 1


def _append_one(editor: BufferEditor, row: Message, tally: Tally) -> None:
    """Apply the rules to one row that is not empty (``is_empty``: the caller skipped those)."""
    role = row["role"]
    if role == "tool":
        _append_tool(editor, row, tally)
        return
    if role == "assistant":
        _append_assistant(editor, row, tally)
        return
    if role == "user":
        healed: list[str] = []
        count = heal(editor, row.get("timestamp"), healed)
        if count:
            tally.healed += count
            tally.note("MEM-3", healed)
    editor.append_row(row)
    tally.appended += 1


def evict(editor: BufferEditor, max_messages: int) -> Repair | None:
    """Evict the oldest rows until the buffer fits ``max_messages`` (0 = unlimited).

    Evicting an assistant turn evicts the results answering its calls too, and the
    buffer never starts with a tool row, so the count may end below the window. The
    evicted turn's call ids are remembered (MEM-1, MEM-2: see ``_append_tool``).
    Returns the eviction's repair log entry (None: nothing evicted): the call ids of
    the rows removed, how many, and the indexes they had just before the eviction.
    """
    if max_messages <= 0:
        return None
    removed: list[int] = []  # indexes before the eviction, sorted
    ids_gone: dict[str, None] = {}

    def drop(position: int, index: int, row_ids: Sequence[str]) -> None:
        removed_index(removed, index)
        ids_gone.update(dict.fromkeys(row_ids))
        editor.delete(position)

    while editor.count() > max_messages:
        first = editor.oldest()
        if first is None:
            break
        ids = call_ids(first.row)
        drop(first.position, 0, ids)
        if ids:
            editor.remember_evicted(ids)
        for cid in ids:
            answer = editor.answer_of(cid)
            if answer is not None:
                drop(answer.position, editor.index_of(answer.position), ())
    while (first := editor.oldest()) is not None and first.row["role"] == "tool":
        rid = result_id(first.row)
        drop(first.position, 0, () if rid is None else (rid,))
    if not removed:
        return None
    return Repair(WINDOW, tuple(ids_gone), len(removed), tuple(removed))


def apply_append(
    editor: BufferEditor, rows: Iterable[Message], max_messages: int = 0
) -> AppendOutcome:
    """Apply the append rules for already-prepared ``rows`` to ``editor``.

    Implements MEM-1, MEM-2, MEM-3, MEM-10 and MEM-14: messages are taken in order,
    so ids added earlier in the same call are deduplicated too; ``appended`` counts
    only new rows (and ``healed``, ``replaced``, ``deduplicated`` what else the rules did). Then the window is applied — unless every row is empty (e.g. a
    ``user`` turn with no content, or no rows at all): DESIGN.md §2 makes such an
    append a pure read, so nothing is healed and nothing is evicted either.
    """
    if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 0:
        raise InvalidInputError(f"max_messages must be an integer >= 0, got {max_messages!r}")
    kept = [row for row in rows if not is_empty(row)]  # each row tested once: they are skipped
    if not kept:
        return AppendOutcome(appended=0, count=editor.count())
    tally = Tally()
    for row in kept:
        _append_one(editor, row, tally)
    tally.evicted = evict(editor, max_messages)
    return AppendOutcome(
        appended=tally.appended,
        count=editor.count(),
        healed=tally.healed,
        replaced=tally.replaced,
        deduplicated=tally.deduplicated,
        repairs=tally.repairs(),
    )


class ListEditor:
    """``BufferEditor`` over a Python list of stored rows; positions are indices.

    ``evicted``: the call ids of evicted turns the buffer remembers, oldest first
    (kept in ``self.evicted``, a dict used as an ordered set).
    """

    def __init__(self, rows: Iterable[Message], evicted: Iterable[str] = ()) -> None:
        self.rows: list[Message] = list(rows)
        self.evicted: dict[str, None] = dict.fromkeys(evicted)

    def count(self) -> int:
        """Return the number of rows."""
        return len(self.rows)

    def is_declared(self, call_id: str) -> bool:
        """Return True when some assistant row declares ``call_id``."""
        return any(call_id in call_ids(row) for row in self.rows)

    def answer_of(self, call_id: str) -> Answer | None:
        """Return the first row answering ``call_id``."""
        for index, row in enumerate(self.rows):
            if result_id(row) == call_id:
                return Answer(index, is_healed(row))
        return None

    def dangling(self) -> list[Dangling]:
        """Return the declared, unanswered calls with the end of each turn's result run."""
        answered = {rid for row in self.rows if (rid := result_id(row)) is not None}
        found: list[Dangling] = []
        seen: set[str] = set()
        for index, row in enumerate(self.rows):
            ids = [cid for cid in call_ids(row) if cid not in answered and cid not in seen]
            if not ids:
                continue
            seen.update(ids)
            end = index
            while end + 1 < len(self.rows) and self.rows[end + 1]["role"] == "tool":
                end += 1
            found.extend(Dangling(cid, end) for cid in ids)
        return found

    def oldest(self) -> PositionedRow | None:
        """Return the first row."""
        return PositionedRow(0, self.rows[0]) if self.rows else None

    def index_of(self, position: int) -> int:
        """Return the index of the row at ``position``: the position itself."""
        return position

    def was_evicted(self, call_id: str) -> bool:
        """Return True when ``call_id`` is among the remembered ids of evicted turns."""
        return call_id in self.evicted

    def remember_evicted(self, call_ids: Sequence[str]) -> None:
        """Remember the ids as the newest, forgetting the oldest past ``EVICTED_CALLS_KEPT``."""
        for cid in call_ids:
            self.evicted.pop(cid, None)
            self.evicted[cid] = None
        while len(self.evicted) > EVICTED_CALLS_KEPT:
            del self.evicted[next(iter(self.evicted))]

    def append_row(self, row: Message) -> None:
        """Add a row at the end."""
        self.rows.append(row)

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert rows directly after ``position``."""
        self.rows[position + 1 : position + 1] = list(rows)

    def replace(self, position: int, row: Message) -> None:
        """Replace the row at ``position``."""
        self.rows[position] = row

    def delete(self, position: int) -> None:
        """Remove the row at ``position``."""
        del self.rows[position]




@dataclass(frozen=True)
class CallIndex:
    """What an ``IndexedListEditor`` knows of its rows' tool calls, for the next editor of them.

    ``declared`` / ``answered``: call id -> how many rows declare / answer it; ``open``:
    the declared ids no row answers. A store that keeps a buffer in memory keeps its
    index beside it, so that an append does not index every row again.
    """

    declared: dict[str, int]
    answered: dict[str, int]
    open: int


class IndexedListEditor(ListEditor):
    """``ListEditor`` whose questions are answered from indexes it keeps across its writes.

    A speed twin (proven equal to ``ListEditor`` by
    ``tests/core/test_properties.py::test_apply_append_gives_the_same_buffer_on_any_editor``):
    ``is_declared`` and an unanswered ``answer_of`` are O(1), ``dangling`` is O(1) while
    every declared call is answered, so an append of n well-formed messages is O(n), not
    O(n²) (issue 24 §1). Positions are read from the list only when a question needs
    one (a duplicate, a placeholder to replace, a call to heal).
    """

    def __init__(
        self, rows: Iterable[Message], evicted: Iterable[str] = (), index: CallIndex | None = None
    ) -> None:
        """``index``: the index of exactly these rows (kept by the caller), else built here.

        A given index is copied (C-speed, per call id), never changed: an append that
        fails leaves it as it was.
        """
        super().__init__(rows, evicted)
        if index is not None:
            self._declared = dict(index.declared)  # call id -> declaring rows
            self._answered = dict(index.answered)  # call id -> answering rows
            self._open = index.open  # declared call ids with no answering row
            return
        self._declared = {}
        self._answered = {}
        self._open = 0
        for row in self.rows:
            self._index(row, 1)

    def call_index(self) -> CallIndex:
        """The index of the rows as they are now (for the next editor of them)."""
        return CallIndex(self._declared, self._answered, self._open)

    def _index(self, row: Message, step: int) -> None:
        for cid in call_ids(row):
            was = self._is_open(cid)
            self._declared[cid] = self._declared.get(cid, 0) + step
            self._open += self._is_open(cid) - was
        rid = result_id(row)
        if rid is not None:
            was = self._is_open(rid)
            self._answered[rid] = self._answered.get(rid, 0) + step
            self._open += self._is_open(rid) - was

    def _is_open(self, call_id: str) -> int:
        return int(self._declared.get(call_id, 0) > 0 and not self._answered.get(call_id, 0))

    def is_declared(self, call_id: str) -> bool:
        """Return True when some assistant row declares ``call_id`` (from the index)."""
        return self._declared.get(call_id, 0) > 0

    def answer_of(self, call_id: str) -> Answer | None:
        """Return the first row answering ``call_id``; None from the index when there is none."""
        if not self._answered.get(call_id, 0):
            return None
        return super().answer_of(call_id)

    def dangling(self) -> list[Dangling]:
        """Return the declared, unanswered calls; an empty list from the index when all are answered."""
        if self._open == 0:
            return []
        return super().dangling()

    def append_row(self, row: Message) -> None:
        """Add a row at the end, indexing its calls and answer."""
        super().append_row(row)
        self._index(row, 1)

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert rows directly after ``position``, indexing them."""
        super().insert_after(position, rows)
        for row in rows:
            self._index(row, 1)

    def replace(self, position: int, row: Message) -> None:
        """Replace the row at ``position``, re-indexing it."""
        self._index(self.rows[position], -1)
        super().replace(position, row)
        self._index(row, 1)

    def delete(self, position: int) -> None:
        """Remove the row at ``position`` and its index entries."""
        self._index(self.rows[position], -1)
        super().delete(position)

def append(
    buffer: Sequence[Mapping[str, Any]],
    incoming: object,
    *,
    max_messages: int = 0,
    now: int | None = None,
    evicted: Iterable[str] = (),
) -> AppendResult:
    """Append ``incoming`` (one message or a list, flat or stored) to ``buffer``.

    Implements MEM-1, MEM-2, MEM-3, MEM-10 and MEM-14 with the window of DESIGN.md §2.
    Returns a new buffer of stored rows (buffer rows given flat are converted too);
    ``buffer`` and ``incoming`` are not mutated. ``evicted``: the call ids of turns
    the window evicted before (the previous result's ``evicted``), which make a late
    copy of such a call or result a duplicate. Raises ``InvalidInputError`` (an
    ``InvalidMessageError``/``UnknownRoleError`` for a bad message, in the buffer or
    incoming) before changing anything.
    """
    rows = prepare(incoming, now)
    if not isinstance(buffer, (list, tuple)):
        raise InvalidInputError(f"buffer must be a list of rows, got {type(buffer).__name__}")
    if isinstance(evicted, (str, bytes)):
        raise InvalidInputError("evicted must be a list of call ids, not one string")
    editor = ListEditor([to_row(row) for row in buffer], evicted)
    outcome = apply_append(editor, rows, max_messages)
    return AppendResult(
        messages=editor.rows,
        count=outcome.count,
        appended=outcome.appended,
        evicted=tuple(editor.evicted),
    )
