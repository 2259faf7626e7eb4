"""A conversation is a flowmem session: owned by its scope, deleted with it, never made again."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict

from flowmem.errors import (
    AccessDeniedError,
    InvalidInputError,
    ScopeRefusedError,
    SessionDeletedError,
)
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.scope import ExecutionContext
from flowmem.sessions import erase_user_data
from tests.integrations.pydantic_ai.messages import answer, prompt


def _run(made: Any) -> Any:
    return asyncio.run(made)


def _save(store: FlowmemConversationStore, cid: str, scope: str | None = None) -> None:
    conversation = Conversation(conversation_id=cid, messages=[prompt("hi"), answer("hello")])
    _run(store.save(conversation, scope=scope))


def test_a_conversation_is_a_session_owned_by_its_scope(flowmem_store: FlowmemConversationStore) -> None:
    _save(flowmem_store, "c1", scope="alice")
    _save(flowmem_store, "c2")
    assert flowmem_store.memory.store.get_session("c1").owner == "alice"
    assert flowmem_store.memory.store.get_session("c2").owner is None
    assert _run(flowmem_store.load("c1", scope="bob")) is None


def test_a_session_of_another_owner_refuses_the_conversation(flowmem_store: FlowmemConversationStore) -> None:
    bob = ExecutionContext(session_id="s9", user_id="bob")
    flowmem_store.memory.append("session", "notes", [{"role": "user", "content": "x"}], bob)
    with pytest.raises(AccessDeniedError):
        _save(flowmem_store, "s9", scope="alice")
    assert _run(flowmem_store.load("s9")) is None


def test_erasing_the_owner_removes_the_conversation_and_its_entries(
    flowmem_store: FlowmemConversationStore,
) -> None:
    _save(flowmem_store, "c1", scope="alice")
    _save(flowmem_store, "c2", scope="bob")
    entries = _run(flowmem_store.load_entries("c1"))
    erase_user_data(flowmem_store.memory.store, "alice")
    assert all(flowmem_store.tables.history(e.id) is None for e in entries)
    assert _run(flowmem_store.load("c1")) is None
    assert [r.conversation_id for r in _run(flowmem_store.list_conversations())] == ["c2"]
    assert flowmem_store.tables.history("nothing") is None


def test_a_deleted_session_deletes_the_conversation_and_its_id_stays_deleted(
    flowmem_store: FlowmemConversationStore,
) -> None:
    _save(flowmem_store, "c1")
    entries = _run(flowmem_store.load_entries("c1"))
    flowmem_store.memory.store.delete_session("c1")
    assert _run(flowmem_store.load("c1")) is None
    assert flowmem_store.tables.history(entries[-1].id) is None
    with pytest.raises(SessionDeletedError):
        _save(flowmem_store, "c1")
    assert _run(flowmem_store.load("c1")) is None


def test_deleting_a_conversation_deletes_its_session_for_good(flowmem_store: FlowmemConversationStore) -> None:
    _save(flowmem_store, "c1", scope="alice")
    _run(flowmem_store.delete("c1"))
    assert flowmem_store.memory.store.get_session("c1") is None
    with pytest.raises(SessionDeletedError):
        _save(flowmem_store, "c1", scope="alice")


def test_mem_13_a_conversation_id_that_is_no_session_id_refuses(
    flowmem_store: FlowmemConversationStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        assert _run(flowmem_store.load("has space")) is None
    assert len(caplog.records) == 1
    with pytest.raises(ScopeRefusedError):
        _save(flowmem_store, "null")
    assert _run(flowmem_store.list_conversations()) == []


def test_a_scope_that_is_no_user_id_is_refused_and_stores_nothing(flowmem_store: FlowmemConversationStore) -> None:
    with pytest.raises(InvalidInputError):
        _save(flowmem_store, "c1", scope="team a")
    assert _run(flowmem_store.load("c1")) is None
    assert flowmem_store.memory.store.get_session("c1") is None


def test_a_stale_save_creates_no_session(flowmem_store: FlowmemConversationStore) -> None:
    stale = Conversation(conversation_id="c1", messages=[prompt("hi")], revision="made-up")
    with pytest.raises(ConversationConflict):
        _run(flowmem_store.save(stale))
    assert flowmem_store.memory.store.get_session("c1") is None
