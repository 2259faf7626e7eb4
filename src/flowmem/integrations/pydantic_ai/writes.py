"""What one ``write_record`` of ``FlowmemConversationStore`` stores, worked out before the database is touched.

The entry ids checked as the API checks names, a run's write-ahead continued (its
entries relinked after what it wrote, decision 0099), the calls one write stores with
their results (the write-ahead was not used), and the ``ConversationWrite`` itself:
the record as stored, the entries as buffer rows and kept messages, and the calls a
paused run waits on (never healed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from pydantic import TypeAdapter
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart

from flowmem.integrations.pydantic_ai.ahead import Ahead
from flowmem.integrations.pydantic_ai.dumps import message_dumps
from flowmem.integrations.pydantic_ai.rows import entry_rows, is_result
from flowmem.service.checks import check_name
from flowmem.store.conversations import ConversationWrite, NewEntry, StoredConversation

RECORD = TypeAdapter(ConversationRecord)


def micros(stamp: datetime) -> int:
    """A time as whole microseconds since the epoch (a record's ``updated``)."""
    return int(stamp.timestamp() * 1_000_000)


def record_of(stored: StoredConversation) -> ConversationRecord:
    """The pydantic-ai record a stored one holds."""
    return RECORD.validate_python(dict(stored.record))


def deferred_ids(holder: ConversationRecord | Conversation | None) -> set[str]:
    """The tool call ids a paused run waits on (``deferred_tool_requests``)."""
    requests = None if holder is None else holder.deferred_tool_requests
    if requests is None:
        return set()
    return {call.tool_call_id for call in [*requests.calls, *requests.approvals]}


def ran_before_stored(entries: Sequence[ConversationEntry]) -> list[str]:
    """The call ids one write stores with their results: their tools ran before the calls were stored."""
    calls: set[str] = set()
    answered: list[str] = []
    for entry in entries:
        message: ModelMessage = entry.message
        if isinstance(message, ModelResponse):
            calls.update(p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart))
            continue
        answered.extend(
            p.tool_call_id for p in message.parts if is_result(p) and p.tool_call_id in calls
        )
    return answered


def check_entry_ids(record: ConversationRecord, entries: Sequence[ConversationEntry]) -> None:
    """InvalidInputError for a head, entry or parent id that is not a usable name (as the API checks)."""
    for entry_id in (record.head_id, *(e.id for e in entries), *(e.parent_id for e in entries)):
        if entry_id is not None:
            check_name(entry_id, "entry_id")


def continued(
    ahead: Ahead,
    record: ConversationRecord,
    entries: Sequence[ConversationEntry],
    stored: StoredConversation | None,
) -> tuple[list[ConversationEntry], ConversationRecord]:
    """A run's own save after its write-ahead: the entries it did not write, after those it did.

    The record's head moves to the last of them (or stays where the write-ahead left
    it), and a record saved with no scope keeps the stored one's.
    """
    kept = ahead.relinked(list(entries))
    scope = record.scope if record.scope is not None or stored is None else stored.scope
    head = kept[-1].id if kept else ahead.head
    return kept, dataclasses.replace(record, head_id=head, scope=scope)


Read = tuple[str, str, ModelMessage | None]
"""An entry written: its id, its kept JSON, and what that JSON validates to when the save checked it."""


def _new_entry(entry: ConversationEntry, read: list[Read]) -> NewEntry:
    """The entry as buffer rows and its kept JSON, from one dump of its message (decision 0145)."""
    dumped, text, message = message_dumps(entry.message)
    read.append((entry.id, text, message))
    return NewEntry(entry.id, entry_rows(entry, dumped), text)


def conversation_write(
    conversation_id: str,
    record: ConversationRecord,
    entries: Sequence[ConversationEntry],
    stored: StoredConversation | None,
    read: list[Read] | None = None,
) -> ConversationWrite:
    """The write of ``record`` and its new ``entries`` (``stored``: the record it replaces, or None).

    ``read`` gets each entry's id, kept JSON and the message it validates to (``Read``).
    """
    waiting = deferred_ids(record)
    if stored is not None and stored.record.get("deferred_tool_requests") is not None:
        waiting |= deferred_ids(record_of(stored))  # validated only when it holds any
    return ConversationWrite(
        record=StoredConversation(
            conversation_id=conversation_id,
            revision=record.revision,
            scope=record.scope,
            updated=micros(record.updated_at),
            record=RECORD.dump_python(record, mode="json"),
        ),
        head=record.head_id,
        parent=entries[0].parent_id if entries else record.head_id,
        entries=[_new_entry(entry, [] if read is None else read) for entry in entries],
        source=record.forked_from if not entries else None,
        waiting=frozenset(waiting),
    )


__all__ = [
    "RECORD",
    "Read",
    "check_entry_ids",
    "continued",
    "conversation_write",
    "deferred_ids",
    "micros",
    "ran_before_stored",
    "record_of",
]
