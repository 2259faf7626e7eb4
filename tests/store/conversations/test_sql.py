"""``flowmem.store.conversations.sql``: the entries' places held back and written once per table (decision 0171).

A write's ``pa_entries`` rows are keyed by (entry, line): one that indexes the same key
twice ends where the last index put it, as two upserts one after the other would, and
the one multi-row statement that writes them holds each key once (PostgreSQL refuses
an ``ON CONFLICT DO UPDATE`` that touches a row twice). Healing a response's two calls
does that: both placeholders are the entry ``<response>~healed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowmem.store import Store, open_store
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
from flowmem.store.conversations import sql as sql_module
from flowmem.store.conversations.statements import many
from tests.migrated import migrated_sqlite_url


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


def _writes() -> list[tuple[ConversationWrite, str | None]]:
    """Three writes: a heal of two calls, a branch from the middle (its history copied), more after it."""
    calls = [{"tool_call_id": "c1", "name": "f"}, {"tool_call_id": "c2", "name": "f"}]

    def rec(revision: str, head: str) -> StoredConversation:
        return StoredConversation("c1", revision, None, 1, {"head_id": head})

    first = [
        NewEntry("e1", [_row("user", "e1")], '{"m":"e1"}'),
        NewEntry("e2", [_row("assistant", "e2", tool_calls=calls)], '{"m":"e2"}'),
        NewEntry("e3", [_row("user", "e3")], '{"m":"e3"}'),
        NewEntry("e4", [_row("assistant", "e4")], '{"m":"e4"}'),
    ]
    branch = [NewEntry("b1", [_row("user", "b1")], '{"m":"b1"}')]
    after = [NewEntry(f"b{i}", [_row("user", f"b{i}")], f'{{"m":"b{i}"}}') for i in range(2, 6)]
    return [
        (ConversationWrite(rec("r1", "e4"), "e4", None, first), None),
        (ConversationWrite(rec("r2", "b1"), "b1", "e1", branch), "r1"),
        (ConversationWrite(rec("r3", "b5"), "b5", "b1", after), "r2"),
    ]


def _tables(store: Store) -> tuple[list[Any], ...]:
    with store.connection() as conn:  # type: ignore[attr-defined]
        return tuple(
            [tuple(row) for row in conn.execute(sql).fetchall()]
            for sql in (
                "SELECT entry_id, conversation_id, key, pos FROM pa_entries ORDER BY 1, 2, 3",
                "SELECT conversation_id, key, pos, entry_id, message FROM pa_messages ORDER BY 1, 2, 3",
                "SELECT conversation_id, revision, line_key, line_version FROM pa_conversations",
            )
        )


def _written(store: Store) -> tuple[list[Any], ...]:
    guard = WriteGuard(None, "c1", SessionClaim(owner=None, create=True, created_at=1.0))
    for write, expected in _writes():
        assert conversations_of(store).write(write, expected, guard)
    return _tables(store)


def test_held_back_places_and_messages_equal_the_plain_writes_entry_by_entry(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables after a heal, a branch and appends: as the plain path (each index written at once) leaves them."""
    monkeypatch.setattr(sql_module, "ROWS_PER_STATEMENT", 2)  # chunks too
    held = _written(store)

    def index_now(
        tx: Any, entry_id: str, key: str, position: int, rows: bool, message: str | None = None
    ) -> None:
        tx._run("pa_entry_put", (entry_id, tx.conversation_id, key, position))
        if message is not None:
            tx._run("pa_message_put", (tx.conversation_id, key, position, entry_id, message))

    monkeypatch.setattr(sql_module._SqlTx, "index", index_now)
    plain_store = open_store(migrated_sqlite_url(tmp_path / "plain.db"))
    try:
        plain = _written(plain_store)
    finally:
        plain_store.close()
    assert held == plain
    assert len(held[0]) > 10 and len(held[1]) > 5  # the branch's copied history included


def test_loaded_is_get_and_the_heads_messages(store: Store) -> None:
    """``loaded`` (one read, decision 0176) gives what ``get`` and ``messages`` of the record's head give."""
    tables = conversations_of(store)
    limits = [None, 0, 1, 3, 100]

    def plain(cid: str, limit: int | None) -> tuple[Any, Any]:
        stored = tables.get(cid)
        head = None if stored is None else stored.record.get("head_id")
        return stored, None if not isinstance(head, str) else tables.messages(head, None, limit)

    def same(cid: str) -> list[Any]:
        found = [tables.loaded(cid, limit) for limit in limits]
        assert found == [plain(cid, limit) for limit in limits]
        return found

    assert same("c1") == [(None, None)] * len(limits)
    guard = WriteGuard(None, "c1", SessionClaim(owner=None, create=True, created_at=1.0))
    headless = StoredConversation("c1", "r0", None, 1, {"head_id": None})
    assert tables.write(ConversationWrite(headless, None, None, ()), None, guard)
    assert same("c1") == [(tables.get("c1"), None)] * len(limits)
    expected = "r0"
    for write, _ in _writes():  # a heal (its line read from rows), a branch, appends to it
        assert tables.write(write, expected, guard)
        expected = write.record.revision
        found = same("c1")
        assert found[0][0] is not None and found[0][1] is None
    whole = [NewEntry(f"w{i}", [_row("user", f"w{i}")], f'{{"m":"w{i}"}}') for i in range(5)]
    record = StoredConversation("c2", "s1", None, 1, {"head_id": "w4"})
    guard = WriteGuard(None, "c2", SessionClaim(owner=None, create=True, created_at=1.0))
    assert tables.write(ConversationWrite(record, "w4", None, whole), None, guard)
    found = same("c2")
    assert found[0][1] == [(f"w{i}", f'{{"m":"w{i}"}}') for i in reversed(range(5))]
    assert [len(messages or []) for _, messages in found] == [5, 1, 2, 4, 5]


def _entry(name: str) -> NewEntry:
    return NewEntry(name, [_row("user", name)], '{"m":"' + name + '"}')


def _append(entries: list[str], revision: str, parent: str | None) -> ConversationWrite:
    record = StoredConversation("c1", revision, None, 1, {"head_id": entries[-1]})
    return ConversationWrite(record, entries[-1], parent, [_entry(name) for name in entries])


def _not_proven(state: object) -> bool:
    return False


def test_a_line_state_proves_the_texts_until_the_line_changes(store: Store) -> None:
    """Decision 0183: ``loaded_held`` gives the line's state with the texts read, skips them when
    proven; ``write_held`` gives the state a save appending to that line leaves, and none
    once the line moved on; any other change of the line gives no state."""
    tables = conversations_of(store)
    guard = WriteGuard(None, "c1", SessionClaim(owner=None, create=True, created_at=1.0))
    assert tables.write(_append(["e1", "e2"], "r1", None), None, guard)
    stored, texts, state = tables.loaded_held("c1", _not_proven)
    assert stored is not None and texts == tables.messages("e2") and texts is not None
    assert state is not None and (state.conversation_id, state.key) == ("c1", LINE)
    assert tables.loaded_held("c1", lambda seen: seen == state) == (stored, None, state)

    written, after = tables.write_held(_append(["e3", "e4"], "r2", "e2"), "r1", None, state)
    assert written and after is not None
    assert (after.conversation_id, after.key, after.stamp) == ("c1", LINE, state.stamp)
    assert after.position > state.position and after.version != state.version
    _, texts, now = tables.loaded_held("c1", _not_proven)
    assert now == after and texts == tables.messages("e4")
    assert [entry for entry, _ in texts or []] == ["e4", "e3", "e2", "e1"]

    # held is no longer the line's state (the save above moved it): no state after
    written, after = tables.write_held(_append(["e5"], "r3", "e4"), "r2", None, state)
    assert written and after is None
    # a refused write changes nothing and gives none
    assert tables.write_held(_append(["e6"], "r9", "e5"), "stale", None, now) == (False, None)

    # another writer appends to the line's buffer: its texts are no longer whole, no state
    _, _, before = tables.loaded_held("c1", _not_proven)
    assert before is not None
    store.append(Address(SESSION_SCOPE, "c1", LINE), [{"role": "user", "content": "by hand"}])
    assert tables.loaded_held("c1", lambda seen: True)[1:] == (None, None)
    written, after = tables.write_held(_append(["e7"], "r4", "e5"), "r3", None, before)
    assert written and after is None


def test_a_line_holding_a_message_past_the_head_gives_no_state(store: Store) -> None:
    tables = conversations_of(store)
    guard = WriteGuard(None, "c1", SessionClaim(owner=None, create=True, created_at=1.0))
    assert tables.write(_append(["e1", "e2"], "r1", None), None, guard)
    _, _, state = tables.loaded_held("c1", _not_proven)
    assert state is not None
    sql = tables
    assert isinstance(sql, sql_module.SqlConversations)

    def past(conn: Any) -> None:  # a message past the head, as no write of the store leaves one
        params = ("c1", LINE, state.position + 1, "stray", '{"m":"stray"}')
        sql._run(conn, "pa_message_put", params)

    sql.store.write_at(Address(SESSION_SCOPE, "c1", LINE), past)
    _, texts, found = tables.loaded_held("c1", _not_proven)
    assert texts == tables.messages("e2") and found is None
