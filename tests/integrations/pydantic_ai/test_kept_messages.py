"""A history read from the messages kept beside its rows is the one its rows give (decision 0131).

SQLite and PostgreSQL keep each entry's message as pydantic-ai's JSON (``pa_messages``)
while a line is only appended whole entries; a load reads them in one query and one
``validate_json``. A line changed any other way (a heal flowmem inserted, another
writer's row, a history stored before migration 20) is read from its rows, as before.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from flowmem.integrations.pydantic_ai.rows import entries_of
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.scope import ExecutionContext
from tests.integrations.pydantic_ai.messages import (
    answer,
    call,
    every_part_kind,
    prompt,
    result,
    round_tripped,
)


def _run(made: Any) -> Any:
    return asyncio.run(made)


def _head(store: FlowmemConversationStore, cid: str) -> str:
    stored = store.tables.get(cid)
    assert stored is not None
    return str(stored.record["head_id"])


def _dumped(entries: list[ConversationEntry]) -> list[tuple[str, str | None, bytes]]:
    """Each entry's id, parent and message exactly as pydantic-ai writes it."""
    return [
        (e.id, e.parent_id, ModelMessagesTypeAdapter.dump_json([e.message])) for e in entries
    ]


def _from_rows(store: FlowmemConversationStore, head: str) -> list[ConversationEntry]:
    rows = store.tables.history(head)
    assert rows is not None
    return entries_of(rows)


def _grown(store: FlowmemConversationStore, cid: str) -> list[ModelMessage]:
    """A conversation saved in three loads and saves: every part kind, calls and results."""
    history = every_part_kind()
    _run(store.save(Conversation(conversation_id=cid, messages=history)))
    for turn in range(2):
        loaded = _run(store.load(cid))
        added: list[ModelMessage] = [
            prompt(f"q{turn}"), call(f"k{turn}"), result(f"k{turn}"), answer(f"a{turn}", 3)
        ]
        loaded.messages.extend(added)
        _run(store.save(loaded))
        history += added
    return history


def test_a_history_read_from_its_kept_messages_is_the_one_its_rows_give(
    durable_store: FlowmemConversationStore,
) -> None:
    history = _grown(durable_store, "c1")
    head = _head(durable_store, "c1")
    assert durable_store.tables.messages(head) is not None  # read without the rows
    kept = durable_store._entries(head, None)
    assert kept is not None
    assert _dumped(kept) == _dumped(_from_rows(durable_store, head))
    assert [e.message for e in kept] == round_tripped(history)
    for limit in (1, 3, len(history), len(history) + 5):
        window = durable_store._entries(head, limit)
        assert window is not None
        assert _dumped(window) == _dumped(_from_rows(durable_store, head)[-limit:])


def test_an_entry_read_alone_from_the_kept_messages_has_its_parent(
    durable_store: FlowmemConversationStore,
) -> None:
    _grown(durable_store, "c1")
    entries = _run(durable_store.load_entries("c1"))
    middle = entries[len(entries) // 2]
    assert _run(durable_store.read_entry(middle.id)) == middle
    assert middle.parent_id == entries[len(entries) // 2 - 1].id


def test_a_line_another_writer_appended_to_is_read_from_its_rows(
    durable_store: FlowmemConversationStore,
) -> None:
    history = _grown(durable_store, "c1")
    head = _head(durable_store, "c1")
    durable_store.memory.append(
        "session", "pydantic_ai", [{"role": "user", "content": "from the buffer API"}],
        ExecutionContext(session_id="c1"),
    )
    assert durable_store.tables.messages(head) is None
    assert _run(durable_store.load("c1")).messages == round_tripped(history)


def test_a_line_flowmem_healed_is_read_from_its_rows(durable_store: FlowmemConversationStore) -> None:
    first: list[ModelMessage] = [prompt("hi"), call("k1")]
    _run(durable_store.save(Conversation(conversation_id="c1", messages=first)))
    head = _head(durable_store, "c1")
    assert durable_store.tables.messages(head) is not None
    # a prompt saved after the unanswered call, without a load: the store inserts MEM-3's placeholder
    again = Conversation(conversation_id="c1", messages=[*first, prompt("next", 5)])
    again.revision = durable_store.tables.get("c1").revision  # type: ignore[union-attr]
    _run(durable_store.save(again))
    head = _head(durable_store, "c1")
    assert durable_store.tables.messages(head) is None
    loaded = _run(durable_store.load_entries("c1"))
    assert _dumped(loaded) == _dumped(_from_rows(durable_store, head))
    assert len(loaded) == 4  # the prompt, the call, the placeholder, the next prompt


def test_a_conversation_stored_before_its_messages_were_kept_loads_and_saves_from_its_rows(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/conversations.db"
    store = FlowmemConversationStore.from_url(url)
    try:
        history = _grown(store, "c1")
        with sqlite3.connect(tmp_path / "conversations.db") as conn:  # as migration 20 left it
            conn.execute("DELETE FROM pa_messages")
            conn.execute("UPDATE pa_conversations SET line_key = NULL, line_stamp = NULL, line_version = NULL")
        head = _head(store, "c1")
        assert store.tables.messages(head) is None
        loaded = _run(store.load("c1"))
        assert loaded.messages == round_tripped(history)
        added: list[ModelMessage] = [prompt("later"), answer("ok", 9)]
        loaded.messages.extend(added)
        _run(store.save(loaded))
        assert store.tables.messages(_head(store, "c1")) is None  # its older entries have no message
        assert _run(store.load("c1")).messages == round_tripped(history + added)
    finally:
        store.close()


def test_a_limit_past_the_history_loads_all_of_it(flowmem_store: FlowmemConversationStore) -> None:
    history: list[ModelMessage] = [prompt("hi"), call("k1"), result("k1")]
    _run(flowmem_store.save(Conversation(conversation_id="c1", messages=history)))
    assert _run(flowmem_store.load("c1", limit=10)).messages == round_tripped(history)
    assert _run(flowmem_store.load("c1", limit=0)).messages == []


def test_deleting_a_conversation_deletes_its_kept_messages(
    durable_store: FlowmemConversationStore, durable_url: str
) -> None:
    _grown(durable_store, "c1")
    _run(durable_store.delete("c1"))
    with durable_store.memory.store.connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SELECT COUNT(*) FROM pa_messages").fetchone()[0] == 0


def test_a_save_from_a_record_another_store_replaced_since_is_a_conflict(durable_url: str) -> None:
    """The record a store remembers stands in for a read only while it is the stored one."""
    from pydantic_ai.conversation_store import ConversationConflict

    mine, theirs = FlowmemConversationStore.from_url(durable_url), FlowmemConversationStore.from_url(durable_url)
    try:
        _run(mine.save(Conversation(conversation_id="c1", messages=[prompt("hi"), answer("a")])))
        loaded = _run(mine.load("c1"))  # mine remembers the record at this revision
        other = _run(theirs.load("c1"))
        other.messages.append(prompt("theirs", 4))
        _run(theirs.save(other))
        loaded.messages.append(prompt("mine", 5))
        with pytest.raises(ConversationConflict):
            _run(mine.save(loaded))
        stored = _run(mine.load("c1"))
        assert stored.messages[-1] == round_tripped([prompt("theirs", 4)])[0]
        stored.messages.append(prompt("again", 6))  # from the record read again: saved
        _run(mine.save(stored))
        assert _run(theirs.load("c1")).messages[-1] == round_tripped([prompt("again", 6)])[0]
    finally:
        mine.close()
        theirs.close()
