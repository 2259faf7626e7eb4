"""What one load or one save of ``FlowmemConversationStore`` reads once and passes along (decision 0131).

pydantic-ai's ``load`` reads the record, then the history; its ``save`` reads the
record, then writes it. The store answers each pair with as few worker-thread calls
as it can: ``Loading`` carries the history read with the record; ``Saving`` the record
a save read (for ``write_record``, instead of reading it again); ``KnownRecords`` the
record each conversation had when this store last read or wrote it, which a save
uses instead of a read when the conversation it saves is at that very revision (a
revision names one write: equal revisions are equal records; a record changed since
fails the write's own revision check, in its transaction, as a read would have).
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from dataclasses import dataclass

from pydantic_ai.conversation_store import ConversationEntry

from flowmem.store.conversations import StoredConversation

KEPT_RECORDS = 1024
"""How many conversations' records a store remembers (the least recently used go)."""


@dataclass
class Loading:
    """A ``load`` in progress: its ``limit``, and the history read with the record."""

    limit: int | None
    head: str | None = None
    entries: list[ConversationEntry] | None = None


@dataclass
class Saving:
    """A ``save`` in progress: its conversation, the revision it saves from, the record read."""

    conversation_id: str
    revision: str | None
    stored: StoredConversation | None = None
    read: bool = False


LOADING: contextvars.ContextVar[Loading | None] = contextvars.ContextVar("LOADING", default=None)
SAVING: contextvars.ContextVar[Saving | None] = contextvars.ContextVar("SAVING", default=None)


class KnownRecords:
    """The record of each conversation as this store last read or wrote it, at most ``KEPT_RECORDS``."""

    def __init__(self) -> None:
        self._records: OrderedDict[str, StoredConversation] = OrderedDict()

    def at(self, conversation_id: str, revision: str | None) -> StoredConversation | None:
        """The remembered record when it is at ``revision``, else None (read it)."""
        found = self._records.get(conversation_id)
        if found is None or revision is None or found.revision != revision:
            return None
        self._records.move_to_end(conversation_id)
        return found

    def remember(self, conversation_id: str, stored: StoredConversation | None) -> None:
        """Remember what was read or written (None: there is none)."""
        if stored is None:
            self._records.pop(conversation_id, None)
            return
        self._records[conversation_id] = stored
        self._records.move_to_end(conversation_id)
        while len(self._records) > KEPT_RECORDS:
            self._records.popitem(last=False)


__all__ = ["KEPT_RECORDS", "LOADING", "SAVING", "KnownRecords", "Loading", "Saving"]
