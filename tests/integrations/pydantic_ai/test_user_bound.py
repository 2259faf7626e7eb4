"""A pydantic-ai store built for a user acts only as that user (issue 38 §3, decision 0109).

pydantic-ai's contract reads every conversation for a caller that names no ``scope``:
kept for a store built for no user (an operator's). A store built with
``context=ExecutionContext(user_id=…)`` lists that user's conversations only, treats
another user's (and an unowned one) as one it does not have, saves as that user, and
a ``scope`` naming another user raises ``AccessDeniedError`` (MEM-9) before anything
is read or written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict

from flowmem.errors import AccessDeniedError, ScopeRefusedError
from flowmem.integrations.pydantic_ai.store import FlowmemConversationStore
from flowmem.scope import ExecutionContext
from tests.integrations.pydantic_ai.messages import answer, prompt

SECRET = "ALICE-SECRET"


def _run(made: Any) -> Any:
    return asyncio.run(made)


def _save(store: FlowmemConversationStore, cid: str, text: str, scope: str | None = None) -> None:
    _run(store.save(Conversation(conversation_id=cid, messages=[prompt(text), answer("ok")]), scope=scope))


@pytest.fixture
def bobs(flowmem_store: FlowmemConversationStore) -> Iterator[FlowmemConversationStore]:
    """bob's store over the database where alice saved ``alices`` and nobody owns ``nobodys``."""
    _save(flowmem_store, "alices", SECRET, scope="alice")
    _save(flowmem_store, "nobodys", "anyone's")
    yield FlowmemConversationStore(flowmem_store.memory, context=ExecutionContext(user_id="bob"))


def test_mem_9_a_store_built_for_a_user_lists_and_reads_only_its_conversations(
    flowmem_store: FlowmemConversationStore, bobs: FlowmemConversationStore
) -> None:
    _save(bobs, "bobs", "bob here")  # no scope: saved as bob's
    assert flowmem_store.memory.store.get_session("bobs").owner == "bob"  # type: ignore[union-attr]
    everyone = _run(flowmem_store.list_conversations())
    assert {r.conversation_id for r in everyone} == {"alices", "nobodys", "bobs"}  # pydantic-ai's contract
    assert [r.conversation_id for r in _run(bobs.list_conversations())] == ["bobs"]
    assert [r.conversation_id for r in _run(bobs.list_conversations(scope="bob"))] == ["bobs"]
    for cid in ("alices", "nobodys"):
        assert _run(bobs.read_record(cid)) is None
        assert _run(bobs.load(cid)) is None
    assert _run(bobs.load("bobs")) is not None


def test_mem_9_a_store_built_for_a_user_refuses_another_users_scope(
    flowmem_store: FlowmemConversationStore, bobs: FlowmemConversationStore
) -> None:
    before = _run(flowmem_store.load("alices"))
    for call in (
        lambda: bobs.list_conversations(scope="alice"),
        lambda: bobs.save(Conversation(conversation_id="new", messages=[prompt("x")]), scope="alice"),
    ):
        with pytest.raises(AccessDeniedError) as refused:
            _run(call())
        assert refused.value.rule == "MEM-9"
    with pytest.raises(AccessDeniedError):
        bobs.write_ahead(Conversation(conversation_id="new"), scope="alice")
    assert flowmem_store.memory.store.get_session("new") is None
    with pytest.raises(AccessDeniedError):  # her id, his scope: the session is hers
        _save(bobs, "alices", "bob writes")
    with pytest.raises(AccessDeniedError):
        _run(bobs.delete_record("alices", expected_revision=before.revision))  # type: ignore[union-attr]
    with pytest.raises(ConversationConflict):
        _run(bobs.delete_record("missing", expected_revision="r"))
    after = _run(flowmem_store.load("alices"))
    assert after is not None and after.messages == before.messages  # type: ignore[union-attr]


def test_mem_6_a_context_user_that_is_not_usable_is_refused(flowmem_store: FlowmemConversationStore) -> None:
    with pytest.raises(ScopeRefusedError) as refused:
        FlowmemConversationStore(flowmem_store.memory, context=ExecutionContext(user_id="None"))
    assert refused.value.details["rule"] == "MEM-6"


def test_mem_9_a_store_built_for_a_user_reads_no_entry_of_another_users_conversation(
    flowmem_store: FlowmemConversationStore, bobs: FlowmemConversationStore
) -> None:
    """Entries are read by id: an id of alice's conversation is unknown to bob's store (KeyError)."""
    head = _run(flowmem_store.read_record("alices")).head_id  # type: ignore[union-attr]
    assert head is not None
    for read in (lambda: bobs.read_entry(head), lambda: bobs.read_history(head)):
        with pytest.raises(KeyError):
            _run(read())
    alices = FlowmemConversationStore(flowmem_store.memory, context=ExecutionContext(user_id="alice"))
    for store in (alices, flowmem_store):  # hers, and the operator's (pydantic-ai's contract)
        history = _run(store.read_history(head))
        assert SECRET in str(history[0].message)
        assert _run(store.read_entry(head)).id == head
    _save(bobs, "bobs", "bob here")
    his = _run(bobs.read_record("bobs")).head_id  # type: ignore[union-attr]
    assert _run(bobs.read_entry(his)).id == his
