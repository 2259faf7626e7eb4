"""Damaged texts in the adapters' tables are ``store_corrupt``, never a raw ``JSONDecodeError`` (issue 38 §5).

An ADK session's or user's state, a pydantic-ai conversation's record and a LangGraph
checkpoint's channel versions are JSON flowmem wrote: text that no longer parses was
changed on the disk, and reading it raises ``StoreCorruptError`` (503 ``store_corrupt``
over HTTP, readiness red), as the core tables' texts do (``store.rows.stored_json``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.errors import StoreCorruptError
from flowmem.service.conversation import conversations
from flowmem.store import Store, open_store
from flowmem.store.adk import AdkKey, AdkSession, adk_of
from flowmem.store.base import SessionClaim, WriteGuard
from flowmem.store.conversations import (
    ConversationWrite,
    NewEntry,
    StoredConversation,
    conversations_of,
)
from tests.api.langgraph_thread import write_thread


def _adk_session(store: Store) -> None:
    guard = WriteGuard(None, "s1", SessionClaim(owner="alice", create=True, created_at=1.0))
    session = AdkSession("s1", "shop", "alice", {"own": 1}, created_at=1.0, updated_at=1.0)
    adk_of(store).create(session, {}, {"u": 1}, guard)


def _conversation(store: Store) -> None:
    record = StoredConversation("c1", "r1", None, 1, {"head_id": "e1"})
    row = {"role": "user", "content": "hi", "metadata": {"pydantic_ai": {"entry": "e1"}}}
    guard = WriteGuard(None, "c1", SessionClaim(owner="alice", create=True, created_at=1.0))
    write = ConversationWrite(record, "e1", None, [NewEntry("e1", [row])])
    assert conversations_of(store).write(write, None, guard)


# each kind: how it is written, the SQL that damages its text, the read that meets the damage
KINDS: dict[str, tuple[Callable[[Store], None], str, Callable[[Store], Any]]] = {
    "adk-session-state": (
        _adk_session,
        "UPDATE adk_sessions SET state = '{\"own\": '",
        lambda s: adk_of(s).read(AdkKey("shop", "alice", "s1")),
    ),
    "adk-user-state": (
        _adk_session,
        "UPDATE adk_user_states SET state = '{\"u\": '",
        lambda s: adk_of(s).list("shop", None),
    ),
    "conversation-record": (
        _conversation,
        "UPDATE pa_conversations SET record = '{\"head_id'",
        lambda s: conversations_of(s).get("c1"),
    ),
    "checkpoint-versions": (
        lambda s: write_thread(s, "t1", "alice", ["hi"]),
        "UPDATE lg_checkpoints SET versions = '{\"messages'",
        lambda s: conversations(s, ["t1"]),
    ),
}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database of each SQL backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'damaged.db'}"
    else:
        yield request.getfixturevalue("postgres_store_url")


def _damage(store: Store, url: str, sql: str) -> None:
    """Run ``sql`` on the store's database outside flowmem, then close the store."""
    if url.startswith("sqlite:///"):
        store.close()
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        conn.create_function("flowmem_over_quota", 3, lambda *_: 0)  # the store's own, for its triggers
        conn.execute(sql)
        conn.commit()
        conn.close()
    else:
        with store._pool.connection() as pg:  # type: ignore[attr-defined]  # the test's own database
            pg.execute(sql)
        store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_damaged_adapter_text_is_store_corrupt_not_a_json_error(kind: str, url: str) -> None:
    write, damage, read = KINDS[kind]
    store = open_store(url)
    write(store)
    read(store)  # intact, it reads
    _damage(store, url, damage)
    reopened = open_store(url)
    try:
        with pytest.raises(StoreCorruptError, match="damaged"):  # before: json.JSONDecodeError
            read(reopened)
    finally:
        reopened.close()
