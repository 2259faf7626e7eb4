"""Issue 38 §4: every adapter checks the ids it is handed as the HTTP API checks them.

An id or a name — a thread, session, conversation or user id, a checkpoint namespace
or id, a task or run id, an ADK app name, a key — holding a lone surrogate, a NUL, or
more than 255 code points is refused with flowmem's typed error naming it
(``invalid_text`` for the surrogate, ``invalid_input`` for the rest:
``flowmem.service.checks.check_name``), on reads as on writes, on every backend, and
nothing is stored. Before, ``FlowmemSaver.put(checkpoint_ns="\\ud800")`` raised the
driver's ``UnicodeEncodeError`` on SQLite and PostgreSQL, a NUL was stored by SQLite
and refused by PostgreSQL, and the ADK service stored a 5,000-character app name.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from flowmem.errors import InvalidInputError
from flowmem.integrations.langchain import FlowmemChatMessageHistory
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.integrations.langgraph.store import FlowmemStore
from flowmem.integrations.openai_agents import FlowmemSession
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from tests.store.conftest import BACKENDS, open_backend

BAD = {"surrogate": "a\ud800", "nul": "a\x00b", "long": "a" * 256}
CODE = {"surrogate": "invalid_text", "nul": "invalid_input", "long": "invalid_input"}


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    """A ``MemoryService`` on a fresh store of each backend."""
    store = open_backend(request.param, request, tmp_path)
    yield MemoryService(store)
    store.close()


def _refused(call: Callable[[], Any], kind: str, field: str) -> None:
    """``call`` (awaited when it is a coroutine) raises the typed error of ``kind`` naming ``field``."""
    with pytest.raises(InvalidInputError) as raised:
        result = call()
        if inspect.isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
    assert raised.value.code == CODE[kind], raised.value
    assert field in raised.value.message


def _nothing_stored(memory: MemoryService) -> None:
    assert memory.store.list_sessions(None, True, 10, 0)[1] == 0


# --- LangGraph checkpointer -----------------------------------------------------------------
def _conf(**configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": "t", "checkpoint_ns": "", **configurable}}


@pytest.mark.parametrize("kind", BAD)
def test_the_saver_refuses_a_bad_checkpoint_namespace_on_every_backend(
    memory: MemoryService, kind: str
) -> None:
    saver, bad = FlowmemSaver(memory), BAD[kind]
    _refused(lambda: saver.put(_conf(checkpoint_ns=bad), empty_checkpoint(), {}, {}), kind, "checkpoint_ns")
    _refused(lambda: saver.get_tuple(_conf(checkpoint_ns=bad)), kind, "checkpoint_ns")
    _refused(lambda: list(saver.list(_conf(checkpoint_ns=bad))), kind, "checkpoint_ns")
    writes = _conf(checkpoint_ns=bad, checkpoint_id="c")
    _refused(lambda: saver.put_writes(writes, [("a", 1)], "task"), kind, "checkpoint_ns")
    _refused(lambda: saver.aput(_conf(checkpoint_ns=bad), empty_checkpoint(), {}, {}), kind, "checkpoint_ns")
    _nothing_stored(memory)
    assert list(saver.list(None)) == []


@pytest.mark.parametrize("kind", BAD)
def test_the_saver_refuses_bad_ids_on_every_backend(memory: MemoryService, kind: str) -> None:
    saver, bad = FlowmemSaver(memory), BAD[kind]
    checkpoint = empty_checkpoint()
    checkpoint["id"] = bad
    _refused(lambda: saver.put(_conf(), checkpoint, {}, {}), kind, "checkpoint_id")
    _refused(lambda: saver.put(_conf(checkpoint_id=bad), empty_checkpoint(), {}, {}), kind, "checkpoint_id")
    _refused(lambda: saver.get_tuple(_conf(checkpoint_id=bad)), kind, "checkpoint_id")
    _refused(lambda: list(saver.list(None, before=_conf(checkpoint_id=bad))), kind, "checkpoint_id")
    _refused(lambda: saver.put(_conf(thread_id=bad), empty_checkpoint(), {}, {}), kind, "thread_id")
    _refused(lambda: saver.get_tuple(_conf(thread_id=bad)), kind, "thread_id")
    _refused(lambda: saver.put(_conf(user_id=bad), empty_checkpoint(), {}, {}), kind, "user_id")
    _refused(lambda: saver.get_tuple(_conf(user_id=bad)), kind, "user_id")
    _refused(lambda: saver.put_writes(_conf(checkpoint_id="c"), [("a", 1)], bad), kind, "task_id")
    _refused(lambda: saver.delete_for_runs([bad]), kind, "run_id")
    _refused(lambda: saver.delete_thread(bad), kind, "thread_id")
    _refused(lambda: saver.copy_thread("t", bad), kind, "thread_id")
    _refused(lambda: saver.prune([bad]), kind, "thread_id")
    _refused(lambda: FlowmemSaver(memory, context=ExecutionContext(user_id=bad)), kind, "user_id")
    _nothing_stored(memory)
    assert list(saver.list(None)) == []


def test_the_saver_refuses_a_channel_or_version_utf8_cannot_encode(memory: MemoryService) -> None:
    saver = FlowmemSaver(memory)
    _refused(lambda: saver.put(_conf(), empty_checkpoint(), {}, {"c\ud800": "1"}), "surrogate", "channel")
    _refused(lambda: saver.put(_conf(), empty_checkpoint(), {}, {"c": "\ud800"}), "surrogate", "channel_version")
    _refused(lambda: saver.put_writes(_conf(checkpoint_id="c"), [("\ud800", 1)], "task"), "surrogate", "channel")
    _nothing_stored(memory)


# --- ADK ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", BAD)
def test_the_adk_service_refuses_a_bad_app_name_user_or_session_id(memory: MemoryService, kind: str) -> None:
    pytest.importorskip("google.adk")
    from flowmem.integrations.adk import FlowmemSessionService

    service, bad = FlowmemSessionService(memory), BAD[kind]
    for app, user, sid, field in (
        (bad, "alice", "s1", "app_name"),
        ("shop", bad, "s1", "user_id"),
        ("shop", "alice", bad, "session_id"),
    ):
        ids = {"app_name": app, "user_id": user, "session_id": sid}
        for method in (service.create_session, service.get_session, service.delete_session):
            _refused(partial(method, **ids), kind, field)
    _refused(lambda: service.list_sessions(app_name=bad), kind, "app_name")
    _refused(lambda: service.list_sessions(app_name="shop", user_id=bad), kind, "user_id")
    _refused(lambda: service.get_user_state(app_name=bad, user_id="alice"), kind, "app_name")
    _nothing_stored(memory)


def test_the_adk_service_refuses_an_app_name_of_5000_characters(memory: MemoryService) -> None:
    pytest.importorskip("google.adk")
    from flowmem.integrations.adk import FlowmemSessionService

    service = FlowmemSessionService(memory)
    _refused(lambda: service.create_session(app_name="x" * 5000, user_id="alice"), "long", "app_name")
    _nothing_stored(memory)


# --- pydantic-ai ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", BAD)
def test_the_pydantic_ai_store_refuses_bad_conversation_scope_and_entry_ids(
    memory: MemoryService, kind: str
) -> None:
    pytest.importorskip("pydantic_ai.conversation_store")
    from pydantic_ai.conversation_store import ConversationRecord

    from flowmem.integrations.pydantic_ai import FlowmemConversationStore

    store, bad = FlowmemConversationStore(memory), BAD[kind]
    _refused(lambda: store.read_record(bad), kind, "conversation_id")
    _refused(lambda: store.load(bad), kind, "conversation_id")
    _refused(lambda: store.read_records(scope=bad), kind, "scope")
    _refused(lambda: store.read_history(bad), kind, "entry_id")
    _refused(lambda: store.read_entry(bad), kind, "entry_id")
    _refused(lambda: store.delete_record(bad, expected_revision="r"), kind, "conversation_id")
    record = ConversationRecord(conversation_id=bad, head_id=None)
    _refused(lambda: store.write_record(record, expected_revision=None), kind, "conversation_id")
    headed = ConversationRecord(conversation_id="c1", head_id=bad)
    _refused(lambda: store.write_record(headed, expected_revision=None), kind, "entry_id")
    _nothing_stored(memory)


# --- Agents SDK, LangChain, LangGraph store: ids at construction, keys on every call -------------
@pytest.mark.parametrize("kind", BAD)
def test_the_sessions_refuse_bad_ids_when_built_and_bad_keys_on_every_call(
    memory: MemoryService, kind: str
) -> None:
    bad = BAD[kind]
    _refused(lambda: FlowmemSession(bad, memory), kind, "session_id")
    _refused(
        lambda: FlowmemSession("s1", memory, context=ExecutionContext(session_id="s1", user_id=bad)),
        kind,
        "user_id",
    )
    _refused(lambda: FlowmemChatMessageHistory(memory, session_id=bad), kind, "session_id")
    _refused(lambda: FlowmemChatMessageHistory(memory, session_id="s1", user_id=bad), kind, "user_id")
    _refused(lambda: FlowmemStore(memory, context=ExecutionContext(workflow_id=bad)), kind, "workflow_id")
    keyed = FlowmemSession("s1", memory, key=bad)
    _refused(lambda: keyed.get_items(), kind, "key")
    _refused(lambda: keyed.add_items([{"role": "user", "content": "hi"}]), kind, "key")
    history = FlowmemChatMessageHistory(memory, session_id="s1", key=bad)
    _refused(lambda: history.messages, kind, "key")
    _nothing_stored(memory)
