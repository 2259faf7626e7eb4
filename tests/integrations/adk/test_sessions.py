"""An ADK session is a flowmem session (decisions 0053, 0100): its owner, the API, delete and erase.

Keyed as ADK keys it, by app, user and id: one id of two users or apps is two flowmem
sessions, and a session created again after a delete is a new one that no write of
the deleted one reaches (DESIGN.md §5). Where flowmem deliberately differs from
``DatabaseSessionService`` it is tested here: ids that are not usable identities are
refused (MEM-6, MEM-13).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("google.adk")

from fastapi.testclient import TestClient
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError

from flowmem.api import create_app
from flowmem.errors import ScopeRefusedError
from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk.service import FRESH
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, open_store
from flowmem.store.adk import EVENTS_KEY
from tests.api.helpers import make_tokens
from tests.integrations.adk.events import answer, user

APP = "shop"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_mem_8_the_adk_user_owns_the_session_and_only_they_see_it_through_the_api(tmp_path: Any) -> None:
    store = open_store(f"sqlite:///{tmp_path}/api.db")
    tokens = make_tokens(store)
    service = FlowmemSessionService(MemoryService(store))
    session = _run(service.create_session(app_name=APP, user_id="alice", session_id="adk-1"))
    _run(service.append_event(session, user("hello", 1)))
    _run(service.append_event(session, answer("hi alice", 2)))
    assert store.get_session("adk-1").owner == "alice"  # type: ignore[union-attr]
    with TestClient(create_app(store)) as client:
        alice = {"Authorization": f"Bearer {tokens['alice']}"}
        bob = {"Authorization": f"Bearer {tokens['bob']}"}
        listed = client.get("/v1/sessions", headers=alice).json()
        assert [s["id"] for s in listed["data"]] == ["adk-1"]
        rows = client.get(f"/v1/buffers/session/{EVENTS_KEY}?session_id=adk-1", headers=alice)
        assert rows.status_code == 200, rows.text
        assert [(m["role"], m["content"]) for m in rows.json()["messages"]] == [
            ("user", "hello"),
            ("assistant", "hi alice"),
        ]
        assert client.get("/v1/sessions", headers=bob).json()["data"] == []
        assert client.get(f"/v1/buffers/session/{EVENTS_KEY}?session_id=adk-1", headers=bob).status_code == 404
    store.close()


def test_a_session_created_again_after_a_delete_is_new_and_the_deleted_ones_writes_never_reach_it(
    flowmem_service: FlowmemSessionService,
) -> None:
    session = _run(flowmem_service.create_session(app_name=APP, user_id="alice", session_id="gone-1"))
    _run(flowmem_service.append_event(session, user("hello", 1)))
    _run(flowmem_service.delete_session(app_name=APP, user_id="alice", session_id="gone-1"))
    store = flowmem_service.memory.store
    assert store.get_session("gone-1") is None
    assert store.load(("session", "gone-1", EVENTS_KEY)) == []
    with pytest.raises(SessionNotFoundError):  # the deleted session's runner, before the create
        _run(flowmem_service.append_event(session, user("anyone?", 2)))
    again = _run(flowmem_service.create_session(app_name=APP, user_id="alice", session_id="gone-1"))
    assert (again.id, again.events) == ("gone-1", [])
    with pytest.raises(StaleSessionError):  # ... and after it: the new session is not its own
        _run(flowmem_service.append_event(session, user("still me", 3)))
    _run(flowmem_service.append_event(again, user("new start", 4)))
    read = _run(flowmem_service.get_session(app_name=APP, user_id="alice", session_id="gone-1"))
    assert [e.content.parts[0].text for e in read.events] == ["new start"]
    assert store.get_session("gone-1") is None  # the deleted id stays deleted (decision 0042)
    listed = store.list_sessions("alice", False, 10, 0)[0]
    assert [s.id for s in listed] == [read._storage_update_marker.split(":", 2)[2]]
    assert listed[0].id.startswith(FRESH)


def test_deleting_the_flowmem_session_deletes_the_adk_session(flowmem_service: FlowmemSessionService) -> None:
    session = _run(flowmem_service.create_session(app_name=APP, user_id="alice", session_id="api-del"))
    _run(flowmem_service.append_event(session, user("hello", 1)))
    assert flowmem_service.memory.store.delete_session("api-del")
    assert _run(flowmem_service.get_session(app_name=APP, user_id="alice", session_id="api-del")) is None
    assert _run(flowmem_service.list_sessions(app_name=APP)).sessions == []


def test_erasing_the_user_removes_their_sessions_and_user_state_and_keeps_the_app_state(
    flowmem_service: FlowmemSessionService,
) -> None:
    for user_id, sid in (("alice", "e-1"), ("alice", "e-2"), ("bob", "e-3")):
        state = {"user:lang": user_id, "app:motd": "hi"}
        _run(flowmem_service.create_session(app_name=APP, user_id=user_id, session_id=sid, state=state))
    erased = flowmem_service.memory.store.erase_user("alice")
    assert erased.sessions == 2
    listed = _run(flowmem_service.list_sessions(app_name=APP))
    assert [(s.id, s.state) for s in listed.sessions] == [("e-3", {"app:motd": "hi", "user:lang": "bob"})]
    assert _run(flowmem_service.get_user_state(app_name=APP, user_id="alice")) == {}
    assert _run(flowmem_service.get_user_state(app_name=APP, user_id="bob")) == {"lang": "bob"}


def test_one_session_id_of_two_users_or_apps_is_two_sessions_each_listed_for_its_owner(
    flowmem_service: FlowmemSessionService,
) -> None:
    alice = _run(flowmem_service.create_session(app_name=APP, user_id="alice", session_id="taken"))
    blog = _run(flowmem_service.create_session(app_name="blog", user_id="alice", session_id="taken"))
    bob = _run(flowmem_service.create_session(app_name=APP, user_id="bob", session_id="taken"))
    for session, text in ((alice, "alice's"), (blog, "alice's blog"), (bob, "bob's")):
        _run(flowmem_service.append_event(session, user(text, 1)))
    for app, user_id, text in ((APP, "alice", "alice's"), ("blog", "alice", "alice's blog"), (APP, "bob", "bob's")):
        read = _run(flowmem_service.get_session(app_name=app, user_id=user_id, session_id="taken"))
        assert (read.id, [e.content.parts[0].text for e in read.events]) == ("taken", [text])
    with pytest.raises(AlreadyExistsError):
        _run(flowmem_service.create_session(app_name=APP, user_id="bob", session_id="taken"))
    store = flowmem_service.memory.store
    assert store.get_session("taken").owner == "alice"  # type: ignore[union-attr]
    (bobs,), _ = store.list_sessions("bob", False, 10, 0)
    assert bobs.id.startswith(FRESH) and bobs.owner == "bob"
    assert len(store.list_sessions("alice", False, 10, 0)[0]) == 2


def test_a_flowmem_session_of_the_same_owner_becomes_the_adk_session_and_another_owners_is_left_alone(
    flowmem_service: FlowmemSessionService,
) -> None:
    memory = flowmem_service.memory
    memory.append("session", "chat", [{"role": "user", "content": "hi"}], ExecutionContext(user_id="alice", session_id="mine"))
    memory.append("session", "chat", [{"role": "user", "content": "hi"}], ExecutionContext(user_id="bob", session_id="his"))
    made = _run(flowmem_service.create_session(app_name=APP, user_id="alice", session_id="mine"))
    assert made.id == "mine"
    assert made._storage_update_marker.endswith(":mine")  # the same flowmem session
    hers = _run(flowmem_service.create_session(app_name=APP, user_id="alice", session_id="his"))
    assert hers.id == "his" and not hers._storage_update_marker.endswith(":his")  # a fresh one
    assert memory.store.get_session("his").owner == "bob"  # type: ignore[union-attr]


@pytest.fixture
def memory_service() -> Iterator[FlowmemSessionService]:
    """A service over a fresh ``MemoryStore``."""
    yield FlowmemSessionService(MemoryService(MemoryStore()))


@pytest.mark.parametrize(
    ("user_id", "session_id", "rule"),
    [("", "s-1", "MEM-6"), ("null", "s-1", "MEM-6"), ("al ice", "s-1", "MEM-6"), ("alice", "0", "MEM-13"), ("alice", "s 1", "MEM-13")],
    ids=["empty-user", "placeholder-user", "spaced-user", "zero-session", "spaced-session"],
)
def test_mem_6_and_mem_13_ids_that_are_not_usable_identities_are_refused_and_store_nothing(
    memory_service: FlowmemSessionService,
    user_id: str,
    session_id: str,
    rule: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = memory_service
    with caplog.at_level(logging.WARNING, logger="flowmem"), pytest.raises(ScopeRefusedError) as refused:
        _run(service.create_session(app_name=APP, user_id=user_id, session_id=session_id))
    assert refused.value.details["rule"] == rule
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    assert service.memory.store.list_sessions(None, True, 10, 0) == ([], 0)
    assert _run(service.get_session(app_name=APP, user_id=user_id, session_id=session_id)) is None
    assert _run(service.list_sessions(app_name=APP, user_id=user_id)).sessions == []
    assert _run(service.get_user_state(app_name=APP, user_id=user_id)) == {}


def test_a_url_opens_the_store_a_database_session_service_url_names(tmp_path: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/adk.db"

    async def go() -> list[str]:
        async with FlowmemSessionService(url) as service:
            session = await service.create_session(app_name=APP, user_id="alice")
            await service.append_event(session, user("hello", 1))
        async with FlowmemSessionService(url) as again:
            read = await again.get_session(app_name=APP, user_id="alice", session_id=session.id)
            assert read is not None
            return [e.id for e in read.events]

    assert _run(go()) == ["e1"]
    assert (tmp_path / "adk.db").exists()


def test_a_service_needs_a_url_or_a_memory_service() -> None:
    with pytest.raises(TypeError, match="database URL"):
        FlowmemSessionService(MemoryStore())  # type: ignore[arg-type]
