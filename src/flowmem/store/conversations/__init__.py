"""Conversation logs: pydantic-ai's ``ConversationStore`` records and entries, as sessions.

A conversation is a flowmem session (DESIGN.md §5, decision 0051): its record (head
entry, revision, scope, what pydantic-ai carries beside the messages) is one row of
``pa_conversations`` keyed by the session id, and its entries are rows of the session's
buffers, one *line* per linear history: ``pydantic_ai`` first, ``pydantic_ai#<entry>``
for every history a branch or a rewrite started. Rows go in through the buffer rules
(``flowmem.core.apply_append``: MEM-1, MEM-2, MEM-3, MEM-10), so a line is a buffer
like any other and the session's buffer routes show it. ``pa_entries`` says where each
entry ends (line and position), so a history is read in one query.

``Conversations`` is the protocol every backend implements (``SqlConversations``);
``conversations_of(store)`` gives a store's. Entries and records
are plain JSON here: nothing under ``store/`` imports pydantic-ai.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowmem.core import Message
from flowmem.store.base import WriteGuard
from flowmem.store.values import Capability

LINE = "pydantic_ai"
"""The first line's buffer key; a later line's is ``pydantic_ai#<its first entry id>``."""
META = "pydantic_ai"
"""The row metadata key holding an entry's id, run and message fields."""
HEALED_SUFFIX = "~healed"
"""A healed placeholder's entry id is the declaring entry's id with this suffix."""


@dataclass(frozen=True)
class StoredConversation:
    """A conversation's record as stored: the JSON pydantic-ai's record serializes to."""

    conversation_id: str
    revision: str
    scope: str | None
    updated: int
    """``updated_at`` in microseconds since the epoch, the listing order."""
    record: Mapping[str, Any]


@dataclass(frozen=True)
class NewEntry:
    """An entry to store: its id, the rows its message becomes (call ids not yet resolved), its message.

    ``message``: the message as its framework's JSON (pydantic-ai's), kept beside the
    rows when they are all stored as given, so a history is read without rebuilding
    each message from its rows (decision 0131); None: read from the rows.
    """

    entry_id: str
    rows: Sequence[Message]
    message: str | None = None


@dataclass(frozen=True)
class ConversationWrite:
    """What one ``write`` stores: the record, where its history ends and the entries it adds.

    ``parent``: the entry the first new entry follows (None: the start of a history), or,
    with no entries, the record's head. ``source``: the conversation a fork's head is in.
    ``waiting``: tool call ids a paused run waits on (deferred): never healed.
    """

    record: StoredConversation
    head: str | None
    parent: str | None
    entries: Sequence[NewEntry] = ()
    source: str | None = None
    waiting: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class LineState:
    """Where a history's kept messages are and the buffer of their line as read (decision 0183).

    ``conversation_id`` and ``key``: the line holding the history's last entry;
    ``position``: where that entry ends; ``stamp`` and ``version``: the line's buffer
    (SQLite's ``born``, PostgreSQL's ``id``; its ``version``), which the record stamped
    with its line says are unchanged. Every write of a line's messages appends that
    line's rows, which moves its version: while a line's state is the same, its
    messages up to ``position`` are the same texts.
    """

    conversation_id: str
    key: str
    position: int
    stamp: int
    version: int


class Conversations(Protocol):
    """Conversation records and their entries' lines, in one store."""

    def get(self, conversation_id: str) -> StoredConversation | None:
        """The stored record, or None."""
        ...

    def records(self, scope: str | None, limit: int | None) -> list[StoredConversation]:
        """Records newest ``updated`` first (those of ``scope`` when given), at most ``limit``."""
        ...

    def write(
        self, write: ConversationWrite, expected: str | None, guard: WriteGuard | None = None
    ) -> bool:
        """Store a record and its new entries in one transaction; False on a stale revision.

        ``expected``: the stored revision (None: there must be no record). False too when
        ``write.head`` (or ``parent``) is an entry the store does not have; nothing is
        stored then. ``guard`` claims the session, created by its first write.
        """
        ...

    def write_held(
        self,
        write: ConversationWrite,
        expected: str | None,
        guard: WriteGuard | None,
        held: LineState | None,
    ) -> tuple[bool, LineState | None]:
        """``write``, and the state its line is left in when ``held`` was the line's state before it.

        The state is given (else None) only when ``held`` is the conversation's own line
        as it was when the write began, and the write appended each of its entries'
        messages to that line, in order: the line's messages are then ``held``'s and the
        entries', nothing else (decision 0183).
        """
        ...

    def delete(self, conversation_id: str, expected: str) -> bool:
        """Delete the conversation's session (entries, lines, record) if its revision is ``expected``."""
        ...

    def history(self, entry_id: str, conversation_id: str | None = None) -> list[Message] | None:
        """The rows of the line an entry ends, up to and with it; None for an unknown entry.

        ``conversation_id``: the entry in that conversation only (a copied history puts
        one entry in several); None: in the first holding it, by id.
        """
        ...

    def holders(self, entry_id: str) -> list[str]:
        """The conversations holding the entry, by id (a user-bound reader picks one it may view)."""
        ...

    def messages(
        self, entry_id: str, conversation_id: str | None = None, limit: int | None = None
    ) -> list[tuple[str, str]] | None:
        """The last ``limit`` + 1 entries (id, message JSON) of the history ``entry_id`` ends, newest first.

        None when the store cannot tell them without the rows (``history``): a line some
        write changed other than by appending whole entries, or a backend that keeps no
        messages (decision 0131). ``conversation_id`` as in ``history``.
        """
        ...

    def loaded(
        self, conversation_id: str, limit: int | None = None
    ) -> tuple[StoredConversation | None, list[tuple[str, str]] | None]:
        """``get`` and, for the record's head, ``messages(head, None, limit)`` in one read (a load's two).

        The messages are None when there is no record or it has no head.
        """
        ...

    def loaded_held(
        self, conversation_id: str, proven: Callable[[LineState], bool]
    ) -> tuple[StoredConversation | None, list[tuple[str, str]] | None, LineState | None]:
        """``loaded`` of the whole history, its texts left unread when ``proven`` says their line's state is known.

        ``(stored, None, state)``: ``proven(state)`` was true, the texts were not read;
        ``(stored, messages, state)``: the messages read, and no message of the line lies
        past them (the state a reader may keep them by); ``(stored, messages, None)`` and
        ``(stored, None, None)`` as ``loaded`` gives them (decision 0183).
        """
        ...


def entry_of(row: Mapping[str, Any]) -> str | None:
    """The entry id a row belongs to, or None for a row no conversation wrote."""
    meta = row.get("metadata")
    data = meta.get(META) if isinstance(meta, Mapping) else None
    found = data.get("entry") if isinstance(data, Mapping) else None
    return found if isinstance(found, str) else None


def run_of(row: Mapping[str, Any]) -> str | None:
    """The pydantic-ai run a row's message came from (None: none recorded)."""
    data = row.get("metadata", {}).get(META)
    run = data.get("run") if isinstance(data, Mapping) else None
    return run if isinstance(run, str) else None


conversations_of = Capability[Conversations]("conversations", "conversations")
"""The ``Conversations`` of a store; TypeError for a store that has none."""


__all__ = [
    "HEALED_SUFFIX",
    "LINE",
    "META",
    "ConversationWrite",
    "Conversations",
    "LineState",
    "NewEntry",
    "StoredConversation",
    "conversations_of",
    "entry_of",
    "run_of",
]
