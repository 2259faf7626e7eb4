"""Where a conversation write's entries go, and the buffer rules they pass (written once).

``write_lines`` runs inside a backend's transaction against ``LineTx`` (the few questions
and writes it needs; ``SqlConversations`` answers them with indexed queries, on every
back-end since ``memory://`` is SQLite, decision 0138). It picks the line (the end of the parent's line, else a new line
that copies the history up to the parent), resolves each row's tool call ids
(``resolve_call``, ``resolve_return``: decision 0051) and appends the rows through
``flowmem.core.apply_append`` (MEM-1, MEM-2, MEM-3, MEM-10) behind ``Tagging``, which
keeps deferred calls out of healing and names the placeholders healing inserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from flowmem.core import (
    BufferEditor,
    Dangling,
    Message,
    Repair,
    apply_append,
    check_storable,
    is_healed,
    result_id,
    to_row,
)
from flowmem.core.forwarding import ForwardingEditor
from flowmem.store.conversations import (
    HEALED_SUFFIX,
    LINE,
    META,
    ConversationWrite,
    NewEntry,
    entry_of,
    run_of,
)
from flowmem.store.rows import dumped_ahead

QUALIFIER = "@"
"""A call id a later run repeats is stored as ``<id>@<run id>`` (decision 0051)."""
START = -1
"""The position of an entry that holds no row and comes first in its line."""


class Place(NamedTuple):
    """Where an entry ends: its conversation, line and the position of its last row."""

    conversation_id: str
    key: str
    position: int


class Declaration(NamedTuple):
    """A tool call declared in a line: its stored id, position, whether answered, run and entry."""

    call_id: str
    position: int
    answered: bool
    run: str | None
    entry: str | None


class LineEditor(BufferEditor, Protocol):
    """A ``BufferEditor`` that also says where its last appended row went."""

    def last_position(self) -> int:
        """The position of the row ``append_row`` wrote last."""
        ...


class LineTx(Protocol):
    """A write transaction on one conversation's lines."""

    conversation_id: str

    def places(self, entry_id: str, conversation_id: str) -> list[Place]:
        """Where an entry of that conversation ends, in each line that holds it."""
        ...

    def line_end(self, key: str) -> int | None:
        """The position of the last row of this conversation's line ``key`` (None: no rows)."""
        ...

    def rows_upto(self, place: Place) -> list[Message]:
        """The rows of ``place``'s line up to and with its position, in order."""
        ...

    def editor(self, key: str) -> LineEditor:
        """The editor of this conversation's line ``key`` (one per key for the transaction)."""
        ...

    def declarations(self, key: str, call_id: str) -> list[Declaration]:
        """The calls declared in line ``key`` as ``call_id`` or ``call_id@<run>``, by position."""
        ...

    def index(
        self, entry_id: str, key: str, position: int, rows: bool, message: str | None = None
    ) -> None:
        """Record where an entry ends (``rows`` False: it holds no row, it ends where the line did).

        ``message``: the entry's message JSON, given when its rows were all stored as written.
        """
        ...

    def written(self, key: str, whole: bool, empty: bool) -> None:
        """Say which line the write appended to and how (decision 0131).

        ``whole``: every entry the write added holds all its rows as given, with its
        message, or no row, and no other row changed (nothing copied, inserted, replaced);
        ``empty``: the line held no row before the write.
        """
        ...

    def log(self, key: str, repairs: Sequence[Repair]) -> None:
        """Log what the buffer rules repaired in line ``key`` (MEM-3, MEM-10) with the write."""
        ...


def qualified(call_id: str, run: str | None) -> str:
    """The stored id of a call that an earlier run of the conversation declared already."""
    return f"{call_id}{QUALIFIER}{run or ''}"


def resolve_call(found: Sequence[Declaration], call_id: str, run: str | None) -> str:
    """The stored id of a call a response of ``run`` declares (decision 0051).

    The plain id, unless an earlier *run* declared it: then ``<id>@<run>``. A response of
    the same run declaring it again gets the id already stored, so MEM-2 drops it.
    """
    mine = qualified(call_id, run)
    if any(d.call_id == mine for d in found):
        return mine
    plain = [d for d in found if d.call_id == call_id]
    if not plain or (plain[-1].run or None) == (run or None):
        return call_id
    return mine


def resolve_return(found: Sequence[Declaration], call_id: str, run: str | None) -> str:
    """The stored id of the call a tool result of ``run`` answers (decision 0051).

    Its own run's call first, else the latest unanswered declaration (a deferred call a
    later run answers), else the latest declaration (so MEM-1 drops a result given twice).
    """
    mine = qualified(call_id, run)
    if any(d.call_id == mine for d in found):
        return mine
    waiting = [d for d in found if not d.answered]
    if waiting:
        return waiting[-1].call_id
    return found[-1].call_id if found else call_id


def is_waiting(call_id: str, waiting: frozenset[str]) -> bool:
    """True when a stored call id is one of the calls a paused run waits on."""
    return call_id in waiting or any(call_id.startswith(w + QUALIFIER) for w in waiting)


class Tagging(ForwardingEditor[LineEditor]):
    """The line's editor as the append rules see it.

    ``dangling`` leaves out the calls a paused run waits on (DeferredToolRequests: waiting,
    not interrupted); ``insert_after`` (only healing inserts) gives the placeholders the
    entry id ``<declaring entry>~healed``; appends and replacements of the current entry's
    rows are noted in ``kept``.
    """

    def __init__(self, tx: LineTx, key: str, waiting: frozenset[str]) -> None:
        super().__init__(tx.editor(key))
        self.tx = tx
        self.key = key
        self.waiting = waiting
        self.entry: str | None = None
        self.kept: list[int] = []
        self.altered = (
            False  # a row inserted, replaced or deleted: the line's messages are not whole
        )

    def dangling(self) -> list[Dangling]:
        """The unanswered calls MEM-3 heals: every one but those a paused run waits on."""
        return [d for d in self.inner.dangling() if not is_waiting(d.call_id, self.waiting)]

    def append_row(self, row: Message) -> None:
        """Append a row, noting it when it is the current entry's."""
        self.inner.append_row(row)
        if entry_of(row) == self.entry:
            self.kept.append(self.inner.last_position())

    def insert_after(self, position: int, rows: Sequence[Message]) -> None:
        """Insert healed placeholders, each named after the entry that declared its call."""
        self.altered = True
        named: list[Message] = []
        for row in rows:
            call = row.get("metadata", {}).get("tool_call_id")
            found = [d for d in self.tx.declarations(self.key, str(call)) if d.call_id == call]
            owner = found[0].entry if found else None
            tagged = dict(row)
            tagged["metadata"] = {
                **row["metadata"],
                META: {"entry": f"{owner}{HEALED_SUFFIX}", "healed": True},
            }
            named.append(tagged)
        self.inner.insert_after(position, named)
        for offset, row in enumerate(named, start=1):
            entry = entry_of(row)
            if entry is not None:
                self.tx.index(entry, self.key, position + offset, True)

    def replace(self, position: int, row: Message) -> None:
        """Replace a placeholder with a real result (MEM-10), noting it for the current entry."""
        self.altered = True
        self.inner.replace(position, row)
        if entry_of(row) == self.entry:
            self.kept.append(position)

    def delete(self, position: int) -> None:
        """Delete a row (the window; conversations have none)."""
        self.altered = True
        self.inner.delete(position)


def _resolved(tx: LineTx, key: str, row: Message) -> Message:
    """``row`` with its tool call ids as the line stores them: ``row`` itself when none changed (decision 0166).

    A row given back as it came keeps its JSON text (a ``DumpedRow`` from ``prepared``),
    which the editor then writes instead of serializing the row again; a row whose ids
    the line qualifies is a new plain row, serialized by the editor as before.
    """
    run = run_of(row)
    meta = row["metadata"]
    if row["role"] == "assistant" and meta.get("tool_calls"):
        calls = []
        changed = False
        for call in meta["tool_calls"]:
            given = call["tool_call_id"]
            stored = resolve_call(tx.declarations(key, str(given)), str(given), run)
            changed = changed or not _same_id(given, stored)
            calls.append({**call, "tool_call_id": stored})
        if not changed:
            return row
        return {**row, "metadata": {**meta, "tool_calls": calls}}
    if row["role"] == "tool" and meta.get("tool_call_id") is not None:
        given = meta["tool_call_id"]
        stored = resolve_return(tx.declarations(key, str(given)), str(given), run)
        if _same_id(given, stored):
            return row
        return {**row, "metadata": {**meta, "tool_call_id": stored}}
    return row


def _same_id(given: object, stored: str) -> bool:
    """Whether the id a row holds is the very string the line stores (so the row's JSON is unchanged)."""
    return type(given) is str and given == stored


def _end(tx: LineTx, key: str) -> int:
    end = tx.line_end(key)
    return START if end is None else end


def _copy(tx: LineTx, source: Place, key: str, head: str) -> None:
    """Start line ``key`` with the history up to ``source`` (rows verbatim, entries indexed)."""
    editor = tx.editor(key)
    seen: set[str] = set()
    for row in tx.rows_upto(source):
        editor.append_row(row)
        entry = entry_of(row)
        if entry is not None:
            tx.index(entry, key, editor.last_position(), True)
            seen.add(entry)
    if head not in seen:
        tx.index(head, key, _end(tx, key), False)


def locate(tx: LineTx, entry_id: str, conversation_id: str) -> Place | None:
    """Where an entry ends: in a line it ends (to append there) when one does, else the first."""
    found = tx.places(entry_id, conversation_id)
    if conversation_id == tx.conversation_id:
        for place in found:
            if place.position == _end(tx, place.key):
                return place
    return found[0] if found else None


def write_lines(tx: LineTx, write: ConversationWrite) -> bool:
    """Store a write's entries in the right line; False when its parent is not stored.

    Implements MEM-1, MEM-2 and MEM-3 for a conversation's saves, through
    ``apply_append``: a result for a call already answered, or a response whose every
    call is known, adds no row (the entry then ends where the line did), and a user
    prompt heals the calls left unanswered, except those a paused run waits on. What
    the rules repaired in the line (``AppendOutcome.logged``) goes to ``tx.log``, with
    a MEM-3 entry for the placeholders an entry brings that the line did not hold (the
    pydantic-ai store heals a loaded history: its placeholders arrive as rows).
    """
    entries = list(write.entries)
    target = _line_for(tx, write, entries)
    if not isinstance(target, tuple):
        return target
    key, copied = target
    empty = not copied and tx.line_end(key) is None
    editor = Tagging(tx, key, write.waiting)
    whole = not copied
    repairs: list[Repair] = []
    for entry in entries:
        repairs.extend(_append_entry(tx, editor, key, entry))
        whole = _index_entry(tx, editor, key, entry) and whole
    if repairs:  # the line's repair log, in the write's transaction (issue 37 §2)
        tx.log(key, repairs)
    tx.written(key, whole and not editor.altered, empty)
    return True


def _line_for(
    tx: LineTx, write: ConversationWrite, entries: Sequence[NewEntry]
) -> tuple[str, bool] | bool:
    """The line a write's entries go to and whether it was just copied (a branch, a fork).

    Or, when there is nothing to write, what ``write_lines`` returns: True for no
    entries, False for a parent that is not stored.
    """
    parent = write.parent
    if parent is None:
        if not entries:
            return True
        return (LINE if tx.line_end(LINE) is None else f"{LINE}#{entries[0].entry_id}"), False
    place = locate(tx, parent, tx.conversation_id)
    if place is None:  # a fork: the parent is in the source conversation
        source = None if write.source is None else locate(tx, parent, write.source)
        if source is None:
            return False
        key = LINE if tx.line_end(LINE) is None else f"{LINE}#{parent}"
        _copy(tx, source, key, parent)
        return key, True
    if not entries:
        return True
    if place.position == _end(tx, place.key):
        return place.key, False
    key = (
        f"{LINE}#{entries[0].entry_id}"  # a branch: a new line, the history up to the parent copied
    )
    _copy(tx, place, key, parent)
    return key, True


def prepared(rows: Sequence[Message]) -> list[Message]:
    """``flowmem.core.prepare`` of an entry's rows, each with its JSON text made once (decisions 0171, 0166).

    The same rows (``to_row`` of each), and the same refusal. Each row is serialized
    once, by the encoder the editor writes with (``flowmem.store.rows.dumped_ahead``):
    its text holds a lone surrogate exactly when one of its strings or keys does, so a
    ``DumpedRow`` is proven storable and the editor writes its text instead of
    serializing it again. Rows that do not all serialize to storable text are walked by
    ``check_storable``, which raises ``InvalidTextError`` naming the first text that
    cannot be stored, as ``prepare`` does, and are returned plain (the editor decides
    what is not JSON, as before).
    """
    made = [to_row(dict(row)) for row in rows]
    dumped: list[Message] = dumped_ahead(made)
    if dumped is made:
        check_storable(made, "messages")
    return dumped


def _append_entry(tx: LineTx, editor: Tagging, key: str, entry: NewEntry) -> list[Repair]:
    """Append an entry's rows through the buffer rules; the repairs they made in the line."""
    editor.entry, editor.kept = entry.entry_id, []
    repairs: list[Repair] = []
    adopted: list[str] = []  # placeholders the adapter wrote (a loaded history healed)
    for row in prepared(entry.rows):
        resolved = _resolved(tx, key, row)
        outcome = apply_append(editor, [resolved])
        repairs.extend(outcome.logged)
        if outcome.appended and is_healed(resolved) and (cid := result_id(resolved)):
            adopted.append(cid)  # new to the line: MEM-1 drops one it already holds
    if adopted:
        repairs.append(Repair("MEM-3", tuple(adopted), len(adopted)))
    return repairs


def _index_entry(tx: LineTx, editor: Tagging, key: str, entry: NewEntry) -> bool:
    """Index where an entry ends; whether the line still holds it as written (its message kept)."""
    if not editor.kept:  # it added no row: it ends where the line does
        tx.index(entry.entry_id, key, _end(tx, key), False)
        return True
    # the message read as written only when every row of it is, and nothing else changed
    complete = len(editor.kept) == len(entry.rows) and entry.message is not None
    message = entry.message if complete and not editor.altered else None
    tx.index(entry.entry_id, key, max(editor.kept), True, message)
    return complete and not editor.altered


def placeholder_owner(row: Message) -> str | None:
    """The declaring entry of a healed placeholder row, or None for any other row."""
    entry = entry_of(row)
    if entry is None or not entry.endswith(HEALED_SUFFIX):
        return None
    data: Any = row["metadata"].get(META, {})
    return entry[: -len(HEALED_SUFFIX)] if data.get("healed") else None


__all__ = [
    "QUALIFIER",
    "START",
    "Declaration",
    "LineEditor",
    "LineTx",
    "Place",
    "Tagging",
    "is_waiting",
    "locate",
    "prepared",
    "qualified",
    "resolve_call",
    "resolve_return",
    "write_lines",
]
