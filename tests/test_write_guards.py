"""Write guards through the Python API: a write that loses against an erasure or delete.

The service and the runtime pass a ``WriteGuard``; the store checks it inside the
write's transaction and refuses with a typed flowmem error, storing nothing
(docs/decisions/0014). The HTTP side is in tests/api/test_erasure_race.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.access import Principal
from flowmem.auth import authenticate, create_token
from flowmem.errors import AuthenticationError, ConflictError, NotFoundError
from flowmem.runtime.state import LEASE_KEY, RuntimeState
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.sessions import SessionService
from flowmem.store import Address, MemoryStore, Store, WriteGuard, open_store


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The in-process reference and the SQLite file (PostgreSQL: the conformance suite)."""
    opened = MemoryStore() if request.param == "memory" else open_store(f"sqlite:///{tmp_path}/g.db")
    yield opened
    opened.close()


def _user(store: Store, user_id: str) -> tuple[Principal, WriteGuard]:
    token, record = create_token(store, user_id)
    return authenticate(store, token), WriteGuard(token_id=record.id)


def test_memory_writes_guarded_by_an_erased_token_raise_and_store_nothing(store: Store) -> None:
    memory = MemoryService(store)
    _, guard = _user(store, "ann")
    context = ExecutionContext(user_id="ann")
    memory.write("user", "k", 1, context, guard=guard)  # the guard holds: stored
    store.erase_user("ann")
    with pytest.raises(AuthenticationError):
        memory.write("user", "k", 2, context, guard=guard)
    with pytest.raises(AuthenticationError):
        memory.append("user", "chat", {"role": "user", "content": "x"}, context, guard=guard)
    assert memory.read("user", "k", context).found is False
    assert memory.load("user", "chat", context).count == 0


def test_a_turn_guarded_against_a_deleted_session_raises_not_found(store: Store) -> None:
    sessions = SessionService(store, MemoryService(store))
    principal, guard = _user(store, "bo")
    session = sessions.create(principal, "chat", guard=guard)
    assert sessions.send_turn(principal, session.id, "hi", guard=guard)["seq"] == 1
    # the delete slips in after the turn's session check, before its writes
    real_load = sessions.load

    def load_then_delete(*args: object, **kwargs: object) -> object:
        found = real_load(*args, **kwargs)  # type: ignore[arg-type]
        store.delete_session(session.id)
        return found

    sessions.load = load_then_delete  # type: ignore[method-assign,assignment]
    with pytest.raises(NotFoundError):
        sessions.send_turn(principal, session.id, "late", guard=guard)
    assert store.count(Address("session", session.id, "chat_history")) == 0
    assert store.list_transcript(session.id) == ([], False)


def test_deleting_a_session_that_started_running_after_its_check_is_refused(
    store: Store,
) -> None:
    sessions = SessionService(store, MemoryService(store))
    principal, _ = _user(store, "cy")
    session = sessions.create(principal, "chat")
    real_load = sessions.load

    def load_then_start(*args: object, **kwargs: object) -> object:
        found = real_load(*args, **kwargs)  # type: ignore[arg-type]
        assert store.set_session_status(session.id, "running", frozenset({"idle"}))
        return found

    sessions.load = load_then_start  # type: ignore[method-assign,assignment]
    with pytest.raises(ConflictError):
        sessions.delete(principal, session.id)
    assert store.get_session(session.id) is not None


def test_runtime_state_of_a_deleted_session_is_refused(store: Store) -> None:
    principal, _ = _user(store, "di")
    session = SessionService(store, MemoryService(store)).create(principal, "chat")
    state = RuntimeState(store, stale_after=60.0, clock=lambda: 1.0)
    state.beat(session.id, "turn-1")
    store.delete_session(session.id)
    with pytest.raises(NotFoundError):
        state.beat(session.id, "turn-1")
    with pytest.raises(NotFoundError):
        state.call_started(session.id, "call-1", "tool")
    assert store.get_record(Address("session", session.id, LEASE_KEY), 0.0) == (False, None)
