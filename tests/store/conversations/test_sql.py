"""``flowmem.store.conversations.sql``: the entries' places held back and written once per table (decision 0171).

A write's ``pa_entries`` rows are keyed by (entry, line): one that indexes the same key
twice ends where the last index put it, as two upserts one after the other would, and
the one multi-row statement that writes them holds each key once (PostgreSQL refuses
an ``ON CONFLICT DO UPDATE`` that touches a row twice). Healing a response's two calls
does that: both placeholders are the entry ``<response>~healed``.
"""

from __future__ import annotations

from typing import Any

from flowmem.store import Store
from flowmem.store.base import SESSION_SCOPE, Address, SessionClaim, WriteGuard
from flowmem.store.conversations import (
    HEALED_SUFFIX,
    LINE,
    META,
    ConversationWrite,
    NewEntry,
    StoredConversation,
    conversations_of,
)
from flowmem.store.conversations.statements import many


def _row(role: str, entry: str, **meta: Any) -> dict[str, Any]:
    content = "" if role == "assistant" else f"{entry} says"
    return {"role": role, "content": content, "metadata": {**meta, META: {"entry": entry}}}


def test_a_write_that_heals_two_calls_places_their_placeholders_entry_at_the_last(
    store: Store,
) -> None:
    calls = [{"tool_call_id": "c1", "name": "f"}, {"tool_call_id": "c2", "name": "f"}]
    entries = [
        NewEntry("e1", [_row("user", "e1")]),
        NewEntry("e2", [_row("assistant", "e2", tool_calls=calls)]),
        NewEntry("e3", [_row("user", "e3")]),  # heals c1 and c2 after e2
    ]
    record = StoredConversation("c1", "r1", None, 1, {"head_id": "e3"})
    guard = WriteGuard(None, "c1", SessionClaim(owner=None, create=True, created_at=1.0))
    assert conversations_of(store).write(
        ConversationWrite(record, "e3", None, entries), None, guard
    )

    rows = store.load(Address(SESSION_SCOPE, "c1", LINE))
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "tool", "user"]
    healed = f"e2{HEALED_SUFFIX}"
    assert [r["metadata"][META]["entry"] for r in rows[2:4]] == [healed, healed]
    # the placeholders' entry ends at the second of them: its history is the line up to it
    history = conversations_of(store).history(healed, "c1")
    assert history is not None and len(history) == 4
    assert conversations_of(store).history("e3", "c1") == rows


def test_many_repeats_the_one_values_group_and_keeps_the_rest() -> None:
    sql = "INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT (a) DO UPDATE SET b = excluded.b"
    assert many(sql, 1) == sql
    assert many(sql, 3) == (
        "INSERT INTO t (a, b) VALUES (?, ?), (?, ?), (?, ?) ON CONFLICT (a) DO UPDATE SET b = excluded.b"
    )
