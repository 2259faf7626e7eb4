"""``FlowmemConversationStore``: a pydantic-ai ``ConversationStore`` whose conversations are sessions.

- **A conversation is a session** (DESIGN.md §5, decision 0051). Its first save creates
  the session, owned by the conversation's ``scope`` (a usable flowmem user id; None:
  owned by nobody, MEM-9). A conversation id that is not a usable session id refuses as
  MEM-13 says: a read finds nothing, a write raises ``ScopeRefusedError``; storage is not
  touched and one WARNING is logged. ``delete`` deletes the session; session delete and
  ``flowmem user erase`` delete the conversation, entries included; a deleted
  conversation's id stays deleted (decision 0042).
- **What a run saves passes the buffer rules**: a tool result saved again is stored once
  (MEM-1), a model response delivered again once (MEM-2), and a user prompt heals the
  calls left unanswered (MEM-3), except those a paused run waits on (deferred). A call id
  a later run repeats is a new call (decision 0051).
- **Loading is one query** for the record and one for its history (``read_history``).
  A loaded conversation whose last response declared calls nothing answered, and that
  is not waiting on them, comes back with MEM-3's placeholder appended, unsaved, so a new
  prompt can follow it (pydantic-ai refuses one after an unanswered call); the next save
  stores it.

Every call runs the database work in a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from pydantic import TypeAdapter
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from flowmem.errors import InvalidInputError, ScopeRefusedError
from flowmem.integrations.pydantic_ai.rows import (
    entries_of,
    entry_rows,
    placeholder_request,
    unanswered_tail,
)
from flowmem.scope import ExecutionContext, Refusal, usable_identity
from flowmem.service import MemoryService
from flowmem.store import Store, open_store
from flowmem.store.conversations import (
    LINE,
    ConversationWrite,
    NewEntry,
    StoredConversation,
    conversations_of,
)

RECORD = TypeAdapter(ConversationRecord)


def _micros(stamp: datetime) -> int:
    return int(stamp.timestamp() * 1_000_000)


def _record(stored: StoredConversation) -> ConversationRecord:
    return RECORD.validate_python(dict(stored.record))


def _deferred_ids(holder: ConversationRecord | Conversation | None) -> set[str]:
    """The tool call ids a paused run waits on (``deferred_tool_requests``)."""
    requests = None if holder is None else holder.deferred_tool_requests
    if requests is None:
        return set()
    return {call.tool_call_id for call in [*requests.calls, *requests.approvals]}


class FlowmemConversationStore(ConversationStore):
    """pydantic-ai conversations in flowmem: records beside the sessions, entries as buffer rows."""

    def __init__(self, memory: MemoryService, *, owns: Store | None = None) -> None:
        if not isinstance(memory, MemoryService):
            raise TypeError(
                "FlowmemConversationStore needs a flowmem.service.MemoryService, got "
                f"{type(memory).__name__} (it stores conversations beside the database)"
            )
        self.memory = memory
        self.tables = conversations_of(memory.store)
        self._owns = owns

    @classmethod
    def from_url(cls, url: str) -> FlowmemConversationStore:
        """A store on the flowmem database at ``url`` (``sqlite:///app.db``, ``postgresql://…``).

        It owns the database connection: ``close()`` it when done.
        """
        store = open_store(url)
        return cls(MemoryService(store), owns=store)

    def close(self) -> None:
        """Close the database this store opened (``from_url``); a no-op otherwise."""
        if self._owns is not None:
            self._owns.close()
            self._owns = None

    # --- sessions and owners ---------------------------------------------------------------
    def _session(self, conversation_id: str, operation: str) -> str | Refusal:
        context = ExecutionContext(session_id=conversation_id)
        return self.memory.resolve(operation, "session", LINE, context)

    def _writable(self, conversation_id: str, operation: str) -> str:
        found = self._session(conversation_id, operation)
        if isinstance(found, Refusal):
            raise ScopeRefusedError(
                f"pydantic-ai {operation} refused: {found.sentence} Give the conversation a "
                "usable session id (conversation_id); nothing was stored",
                rule="MEM-13",
                argument="conversation_id",
            )
        return found

    @staticmethod
    def _owner(scope: str | None) -> str | None:
        if scope is None:
            return None
        if usable_identity(scope) != scope:
            raise InvalidInputError(
                f"a conversation's scope is its owner, a flowmem user id; {scope!r} is not a "
                "usable one (1-255 characters, no whitespace): pass a user id or no scope",
                argument="scope",
            )
        return scope

    # --- the five primitives -----------------------------------------------------------------
    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The record of a conversation, or None (also for an id MEM-13 refuses)."""
        if isinstance(self._session(conversation_id, "conversation read"), Refusal):
            return None
        stored = await asyncio.to_thread(self.tables.get, conversation_id)
        return None if stored is None else _record(stored)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The records, those of ``scope`` when given, newest ``updated_at`` first."""
        stored = await asyncio.to_thread(self.tables.records, scope, limit)
        return [_record(found) for found in stored]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store a record and its new entries in one transaction; ConversationConflict when stale.

        Implements MEM-1, MEM-2 and MEM-3 for what a run saves, through the buffer rules
        (``flowmem.store.conversations.lines.write_lines``).
        """
        cid = self._writable(record.conversation_id, "conversation write")
        owner = self._owner(record.scope)
        guard = self.memory.session_claim(cid, ExecutionContext(session_id=cid, user_id=owner))
        entries = list(new_entries)
        stored = await asyncio.to_thread(self.tables.get, cid)
        waiting = _deferred_ids(record) | _deferred_ids(None if stored is None else _record(stored))
        write = ConversationWrite(
            record=StoredConversation(
                conversation_id=cid,
                revision=record.revision,
                scope=record.scope,
                updated=_micros(record.updated_at),
                record=RECORD.dump_python(record, mode="json"),
            ),
            head=record.head_id,
            parent=entries[0].parent_id if entries else record.head_id,
            entries=[NewEntry(entry.id, entry_rows(entry)) for entry in entries],
            source=record.forked_from if not entries else None,
            waiting=frozenset(waiting),
        )
        if not await asyncio.to_thread(self.tables.write, write, expected_revision, guard):
            raise ConversationConflict(record.conversation_id)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Delete the conversation's session, entries included (decision 0042: its id stays deleted)."""
        if isinstance(self._session(conversation_id, "conversation delete"), Refusal):
            raise ConversationConflict(conversation_id)
        if not await asyncio.to_thread(self.tables.delete, conversation_id, expected_revision):
            raise ConversationConflict(conversation_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id; KeyError when there is none."""
        history = await self.read_history(entry_id)
        if not history or history[-1].id != entry_id:
            raise KeyError(entry_id)
        return history[-1]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to ``head_id`` (the last ``limit``), read in one query."""
        if head_id is None:
            return []
        rows = await asyncio.to_thread(self.tables.history, head_id)
        if rows is None:
            raise KeyError(head_id)
        entries = entries_of(rows)
        if limit is not None:
            entries = entries[len(entries) - limit :] if limit else []
        return entries

    # --- loading -------------------------------------------------------------------------------
    async def load(
        self, conversation_id: str, *, limit: int | None = None, scope: str | None = None
    ) -> Conversation | None:
        """Load a conversation; an interrupted last call comes back healed (MEM-3), unsaved.

        Implements MEM-3 for a conversation resumed with a new prompt: the calls of its
        last response that nothing answered, unless a paused run waits on them
        (``deferred_tool_requests``), get MEM-3's placeholder after the loaded messages,
        where a new user prompt can follow; the next ``save`` stores it.
        """
        conversation = await super().load(conversation_id, limit=limit, scope=scope)
        if conversation is None:
            return None
        waiting = _deferred_ids(conversation)
        tail = unanswered_tail(conversation.messages, waiting)
        if tail is not None:
            conversation.messages.append(placeholder_request(*tail))
        return conversation


__all__ = ["FlowmemConversationStore"]
