"""pydantic-ai's conversations in the store (``flowmem.store.conversations``), on every backend.

Their entries are rows of the session's buffers, so they count against the session
owner's quotas as any buffer does, and a write past a quota stores nothing.
"""

from __future__ import annotations

import pytest

from flowmem.errors import QuotaExceededError
from flowmem.store import Store
from flowmem.store.base import SESSION_SCOPE, Address, Quotas, SessionClaim, WriteGuard
from flowmem.store.conversations import (
    LINE,
    ConversationWrite,
    NewEntry,
    StoredConversation,
    conversations_of,
)


def _write(
    store: Store, revision: str, expected: str | None, entry: str, parent: str | None, text: str
) -> bool:
    record = StoredConversation("c1", revision, None, 1, {"head_id": entry})
    row = {"role": "user", "content": text, "metadata": {"pydantic_ai": {"entry": entry}}}
    guard = WriteGuard(None, "c1", SessionClaim(owner="alice", create=True, created_at=1.0))
    write = ConversationWrite(record, entry, parent, [NewEntry(entry, [row])])
    return conversations_of(store).write(write, expected, guard)


def test_a_conversations_entries_count_against_the_owners_quota(store: Store) -> None:
    assert _write(store, "r1", None, "e1", None, "hello")
    used = store.usage("alice")
    assert (used.buffers, used.bytes > 0) == (1, True)
    assert len(store.load(Address(SESSION_SCOPE, "c1", LINE))) == 1


def test_a_conversation_write_past_the_quota_stores_nothing(store: Store) -> None:
    assert _write(store, "r1", None, "e1", None, "hello")
    used = store.usage("alice")
    store.set_quotas(Quotas(bytes=used.bytes + 10))
    with pytest.raises(QuotaExceededError):
        _write(store, "r2", "r1", "e2", "e1", "x" * 200)
    stored = conversations_of(store).get("c1")
    assert stored is not None and stored.revision == "r1"
    assert len(store.load(Address(SESSION_SCOPE, "c1", LINE))) == 1
    assert store.usage("alice") == used
