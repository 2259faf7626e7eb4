"""Each adapter's heal and late result are in the repair log of the buffer the inspector opens (issue 37 §2).

The sessions are written by the real adapters (LangGraph's ``create_agent`` with
``FlowmemSaver`` and ``FlowmemHealing``, Google ADK's ``FlowmemSessionService``,
pydantic-ai's ``FlowmemConversationStore``) on memory, SQLite and PostgreSQL; the log
is read as the inspector reads it: the session's conversation buffer
(``session_buffers``), through ``MemoryService``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import result_id
from flowmem.service import MemoryService
from flowmem.service.conversation import session_buffers
from flowmem.store import Address, Store, open_store
from flowmem.store.checkpoints.repairs import is_placeholder
from tests.api.adapter_sessions import adk_session, pydantic_session
from tests.api.langgraph_thread import crash_thread, heal_thread
from tests.migrated import migrated_sqlite_url
from tests.ui.test_adapter_sessions import adk_late, langgraph_late


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend the adapters write to."""
    url = "memory://"
    if request.param == "sqlite":
        url = migrated_sqlite_url(tmp_path / "flowmem.db")  # migrated once per process
    elif request.param == "postgres":
        url = request.getfixturevalue("postgres_store_url")  # migrated already, no rows
    opened = open_store(url)
    try:
        yield opened
    finally:
        opened.close()


def _conversation(store: Store, sid: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The conversation buffer's rows and its repair log (newest first), as the inspector reads them."""
    buffer = session_buffers(store, sid).conversation.buffer
    log = MemoryService(store).repairs_raw("session", sid, buffer, limit=1000).repairs
    return store.load(Address("session", sid, buffer)), [e for e in log if e["rule"] in ("MEM-3", "MEM-10")]


HEALS: dict[str, tuple[Callable[..., None], str]] = {
    "langgraph": (heal_thread, "call_w1"),
    "adk": (adk_session, "c1"),
    "pydantic-ai": (pydantic_session, "call_p1"),
}
LATE: dict[str, tuple[Callable[..., None], str]] = {
    "langgraph": (langgraph_late, "call_w1"),
    "adk": (adk_late, "c1"),
}


@pytest.mark.parametrize("adapter", list(HEALS))
def test_mem_3_an_adapters_heal_is_logged_on_its_conversation_at_the_placeholder(store: Store, adapter: str) -> None:
    build, call = HEALS[adapter]
    build(store, "s1", "alice")
    rows, log = _conversation(store, "s1")
    assert [(e["kind"], e["call_ids"], e["count"]) for e in log] == [("heal", [call], 1)]
    (position,) = log[0]["positions"]
    assert result_id(rows[position]) == call and is_placeholder(rows[position])


@pytest.mark.parametrize("adapter", list(LATE))
def test_mem_10_an_adapters_late_result_is_logged_after_its_heal(store: Store, adapter: str) -> None:
    build, call = LATE[adapter]
    build(store, "s1", "alice")
    rows, log = _conversation(store, "s1")
    assert [(e["kind"], e["call_ids"]) for e in log] == [("replace", [call]), ("heal", [call])]
    (replacement,) = log[0]["positions"]  # the real result's row (LangGraph: after the placeholder)
    assert result_id(rows[replacement]) == call and not is_placeholder(rows[replacement])


def test_a_crashed_langgraph_thread_logs_nothing_until_its_heal(store: Store) -> None:
    crash_thread(store, "s1", "alice")
    assert _conversation(store, "s1")[1] == []
    heal_thread(store, "s1", "alice", crashed=True)
    rows, log = _conversation(store, "s1")
    assert [(e["kind"], e["call_ids"]) for e in log] == [("heal", ["call_w1"])]
    assert is_placeholder(rows[log[0]["positions"][0]])
    assert session_buffers(store, "s1").conversation.buffer.startswith("langgraph#")  # the new line's log
