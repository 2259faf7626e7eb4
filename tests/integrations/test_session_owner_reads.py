"""Issue 38 §3: the Agents SDK session and the LangChain history never read another user's session.

A session is a flowmem session (DESIGN.md §5): reading it needs the right to view it,
as over HTTP. In process (``MemoryService``) a read by a context whose user is not the
session's owner raises ``AccessDeniedError``, exactly as the write does (decision
0108); over HTTP the server answers as for any session the token may not view. Each
test has a second user, bob, and alice's session holds ``ALICE-SECRET``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from flowmem.client import Client
from flowmem.errors import AccessDeniedError, FlowmemError
from flowmem.integrations.langchain import FlowmemChatMessageHistory
from flowmem.integrations.openai_agents import FlowmemSession
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, open_store
from tests.integrations.backends import REMOTES, remote_memory

SECRET = "ALICE-SECRET"
_IDS = itertools.count(1)


def _sid() -> str:
    return f"owner-reads-{next(_IDS)}"


@pytest.fixture(params=["memory", "sqlite"])
def local(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A ``MemoryService`` in process, over each kind of store."""
    store = MemoryStore() if request.param == "memory" else open_store(f"sqlite:///{tmp_path}/o.db")
    yield MemoryService(store)
    store.close()


def _ctx(sid: str, user: str | None) -> ExecutionContext:
    return ExecutionContext(session_id=sid, user_id=user)


def _texts(rows: list[Any]) -> str:
    return repr(rows)


# --- the Agents SDK session, in process ------------------------------------------------------
def test_agents_session_refuses_bob_in_process(local: MemoryService) -> None:
    sid = _sid()
    alice = FlowmemSession(sid, local, context=_ctx(sid, "alice"))
    asyncio.run(alice.add_items([{"role": "user", "content": SECRET}]))
    for who in ("bob", None):  # another user, and a context without one (MEM-9)
        other = FlowmemSession(sid, local, context=_ctx(sid, who))
        with pytest.raises(AccessDeniedError):
            asyncio.run(other.get_items())
        with pytest.raises(AccessDeniedError):
            asyncio.run(other.get_items(limit=1))
        with pytest.raises(AccessDeniedError):
            asyncio.run(other.pop_item())
        with pytest.raises(AccessDeniedError):
            asyncio.run(other.clear_session())
        with pytest.raises(AccessDeniedError):  # the write, as before
            asyncio.run(other.add_items([{"role": "user", "content": "bob"}]))
    items = asyncio.run(alice.get_items())
    assert SECRET in _texts(items) and len(items) == 1


def test_agents_session_unowned_is_read_as_written(local: MemoryService) -> None:
    """An unowned session: read and written by a context without a user, refused to bob."""
    sid = _sid()
    nobody = FlowmemSession(sid, local)
    asyncio.run(nobody.add_items([{"role": "user", "content": SECRET}]))
    assert SECRET in _texts(asyncio.run(nobody.get_items()))
    bob = FlowmemSession(sid, local, context=_ctx(sid, "bob"))
    with pytest.raises(AccessDeniedError):
        asyncio.run(bob.get_items())


def test_agents_session_of_no_session_yet_reads_empty(local: MemoryService) -> None:
    sid = _sid()
    assert asyncio.run(FlowmemSession(sid, local, context=_ctx(sid, "bob")).get_items()) == []


# --- the LangChain history, in process -------------------------------------------------------
def test_langchain_history_refuses_bob_in_process(local: MemoryService) -> None:
    sid = _sid()
    alice = FlowmemChatMessageHistory(local, session_id=sid, user_id="alice")
    alice.add_messages([HumanMessage(SECRET)])
    for who in ("bob", None):
        other = FlowmemChatMessageHistory(local, session_id=sid, user_id=who)
        with pytest.raises(AccessDeniedError):
            _ = other.messages
        with pytest.raises(AccessDeniedError):
            other.clear()
        with pytest.raises(AccessDeniedError):
            other.add_messages([HumanMessage("bob")])
    assert [m.content for m in alice.messages] == [SECRET]


def test_langchain_history_unowned_is_read_as_written(local: MemoryService) -> None:
    sid = _sid()
    nobody = FlowmemChatMessageHistory(local, session_id=sid)
    nobody.add_messages([HumanMessage(SECRET)])
    assert [m.content for m in nobody.messages] == [SECRET]
    with pytest.raises(AccessDeniedError):
        _ = FlowmemChatMessageHistory(local, session_id=sid, user_id="bob").messages


# --- over HTTP: two users, two tokens ---------------------------------------------------------
def _pair(request: pytest.FixtureRequest) -> tuple[Client, Client]:
    kind = request.node.callspec.params["kind"]
    return remote_memory(request, kind=kind), remote_memory(request, kind=kind)


@pytest.mark.parametrize("kind", REMOTES)
def test_agents_session_refuses_bob_remote(request: pytest.FixtureRequest, kind: str) -> None:
    alice_client, bob_client = _pair(request)
    sid = _sid()
    alice = FlowmemSession(sid, alice_client)
    asyncio.run(alice.add_items([{"role": "user", "content": SECRET}]))
    bob = FlowmemSession(sid, bob_client)
    for call in (bob.get_items(), bob.get_items(limit=1), bob.pop_item(), bob.clear_session()):
        try:
            seen = asyncio.run(call)
        except FlowmemError:
            continue
        assert SECRET not in repr(seen)
    assert SECRET in _texts(asyncio.run(alice.get_items()))


@pytest.mark.parametrize("kind", REMOTES)
def test_langchain_history_refuses_bob_remote(request: pytest.FixtureRequest, kind: str) -> None:
    alice_client, bob_client = _pair(request)
    sid = _sid()
    alice = FlowmemChatMessageHistory(alice_client, session_id=sid)
    alice.add_messages([HumanMessage(SECRET)])
    bob = FlowmemChatMessageHistory(bob_client, session_id=sid)
    try:
        seen = bob.messages
    except FlowmemError:
        seen = []
    assert SECRET not in repr(seen), seen
    with contextlib.suppress(FlowmemError):
        bob.clear()
    assert [m.content for m in alice.messages] == [SECRET]
