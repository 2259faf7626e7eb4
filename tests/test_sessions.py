"""The session service: ownership, listing, driving as the owner (MEM-8, MEM-9, MEM-15)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem import access
from flowmem.access import Decision, Principal
from flowmem.errors import (
    AccessDeniedError,
    ConflictError,
    InvalidInputError,
    InvalidTextError,
    NotFoundError,
    SessionDeletedError,
    TooManySessionsError,
    UnknownRoleError,
)
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.sessions import (
    BUFFER_KEY,
    BUFFER_SCOPE,
    SessionPage,
    SessionService,
    memory_context,
)
from flowmem.store import Address, Erasure, MemoryStore, SessionRecord, Store, TokenRecord
from tests.store.conftest import BACKENDS, open_backend

ALICE = Principal("alice", frozenset({"sessions:create"}), "t1")
BOB = Principal("bob", frozenset({"sessions:create"}), "t2")
VIEWER = Principal("carol", frozenset({"sessions:view_any"}), "t3")
DRIVER = Principal("dave", frozenset({"sessions:drive_any"}), "t4")
ADMIN = Principal("root", frozenset({"admin"}), "t5")
SERVICE = Principal(None, frozenset({"sessions:create", "sessions:drive_any"}), "t6")
NOBODY = Principal(None, frozenset(), "t7")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def service(store: MemoryStore) -> SessionService:
    clock = Clock()
    return SessionService(store, MemoryService(store, clock=clock), clock=clock)


def buffer(store: MemoryStore, session_id: str) -> list[dict[str, Any]]:
    return store.load(Address(BUFFER_SCOPE, session_id, BUFFER_KEY))


def test_mem_9_creator_owns_the_session(service: SessionService) -> None:
    session = service.create(ALICE, "chat")
    assert session.owner == "alice"
    assert session.status == "idle"
    assert service.get(ALICE, session.id) == session


def test_mem_9_service_principal_creates_unowned_session(service: SessionService) -> None:
    session = service.create(SERVICE, "bot")
    assert session.owner is None
    # matching one absent identity against another grants nothing
    with pytest.raises(NotFoundError):
        service.get(NOBODY, session.id)


def test_create_needs_permission(service: SessionService, store: MemoryStore) -> None:
    with pytest.raises(AccessDeniedError):
        service.create(VIEWER, "x")
    assert store.list_sessions(None, True, 100, 0) == ([], 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": 5},
        {"name": "x" * 201},
        {"name": "a\x00b"},
        {"agent": ""},
        {"agent": "a\x00"},
        {"metadata": []},
        {"metadata": {"x": {1}}},
    ],
)
def test_create_validates_fields(
    service: SessionService, store: MemoryStore, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidInputError):
        service.create(ALICE, **kwargs)
    assert store.list_sessions(None, True, 100, 0)[1] == 0


def test_mem_9_list_shows_only_viewable(service: SessionService) -> None:
    mine = [service.create(ALICE, f"a{i}") for i in range(3)]
    service.create(BOB, "b")
    service.create(SERVICE, "unowned")
    page = service.list_sessions(ALICE, limit=2, offset=0)
    assert page.total == 3
    assert [s.name for s in page.sessions] == ["a2", "a1"]
    page = service.list_sessions(ALICE, limit=2, offset=2)
    assert [s.id for s in page.sessions] == [mine[0].id]
    assert service.list_sessions(VIEWER, 100, 0).total == 5
    assert service.list_sessions(NOBODY, 100, 0).total == 0
    assert service.list_sessions(SERVICE, 100, 0).total == 5  # drive_any implies view


def test_mem_9_listing_every_session_is_the_list_all_decision(
    service: SessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook that denies ``list_all`` leaves a viewer only the sessions it owns."""
    service.create(ALICE, "a")
    service.create(SERVICE, "unowned")
    assert service.list_sessions(VIEWER, 100, 0).total == 2

    def no_list_all(
        principal: Principal, action: str, session: object, decision: Decision
    ) -> Decision | None:
        return Decision(False, "owned sessions only", "hook") if action == "list_all" else None

    monkeypatch.setattr(access, "HOOKS", [no_list_all])
    assert service.list_sessions(VIEWER, 100, 0) == SessionPage([], 0)
    assert service.list_sessions(ALICE, 100, 0).total == 1


@pytest.mark.parametrize("bad", ["nope", "", "1234", "x" * 100, 42, None])
def test_mem_15_unloadable_session_is_not_found(service: SessionService, bad: object) -> None:
    with pytest.raises(NotFoundError):
        service.get(ADMIN, bad)


def test_mem_9_other_users_session_is_not_found(service: SessionService) -> None:
    session = service.create(ALICE, "private")
    for action in (
        lambda: service.get(BOB, session.id),
        lambda: service.send_turn(BOB, session.id, "hi"),
        lambda: service.reset(BOB, session.id),
        lambda: service.delete(BOB, session.id),
        lambda: service.messages(BOB, session.id),
    ):
        with pytest.raises(NotFoundError):
            action()


def test_mem_9_view_does_not_allow_drive(service: SessionService, store: MemoryStore) -> None:
    session = service.create(ALICE, "chat")
    assert service.get(VIEWER, session.id) == session
    for action in (
        lambda: service.send_turn(VIEWER, session.id, "hi"),
        lambda: service.stop(VIEWER, session.id),
        lambda: service.reset(VIEWER, session.id),
        lambda: service.delete(VIEWER, session.id),
    ):
        with pytest.raises(AccessDeniedError):
            action()
    assert buffer(store, session.id) == []
    assert service.messages(ALICE, session.id) == ([], False)
    assert store.get_session(session.id) == session


def test_mem_8_memory_context_is_owner_or_nobody() -> None:
    owned = SessionRecord(id="7b0c9a8e-0000-4000-8000-000000000001", name="", owner="alice")
    assert memory_context(owned) == ExecutionContext(session_id=owned.id, user_id="alice")
    for owner in (None, "0", "", " "):
        unowned = SessionRecord(id=owned.id, name="", owner=owner)
        assert memory_context(unowned).user_id is None


class UserScopeRunner:
    """A runner that does what the runtime does: memory under memory_context(session)."""

    def __init__(self, memory: MemoryService) -> None:
        self.memory = memory
        self.results: list[Any] = []

    def start_turn(self, session: SessionRecord, content: str, *, wait: bool) -> dict[str, Any]:
        result = self.memory.write("user", "last_turn", content, memory_context(session))
        self.results.append(result)
        return {"turn_id": "t", "status": "completed"}

    def stop(self, session: SessionRecord) -> bool:
        return False


def test_mem_8_admin_turn_lands_in_owner_bucket(store: MemoryStore) -> None:
    memory = MemoryService(store)
    runner = UserScopeRunner(memory)
    service = SessionService(store, memory, runner)
    session = service.create(ALICE, "chat")
    service.send_turn(ADMIN, session.id, "from the admin")
    assert store.get_record(Address("user", "alice", "last_turn"), 0) == (True, "from the admin")
    assert store.get_record(Address("user", "root", "last_turn"), 0) == (False, None)


def test_mem_8_unowned_session_refuses_user_scope(store: MemoryStore) -> None:
    memory = MemoryService(store)
    runner = UserScopeRunner(memory)
    service = SessionService(store, memory, runner)
    session = service.create(SERVICE, "bot")
    service.send_turn(ADMIN, session.id, "hello")
    (result,) = runner.results
    assert result.success is False
    assert result.resolved_scope_id == ""
    assert store.get_record(Address("user", "root", "last_turn"), 0) == (False, None)
    assert store.get_record(Address("user", "", "last_turn"), 0) == (False, None)


def test_mem_8_turn_without_runner_appends_owner_buffer(
    service: SessionService, store: MemoryStore
) -> None:
    session = service.create(ALICE, "chat")
    result = service.send_turn(DRIVER, session.id, "hello")
    assert result["status"] == "completed" and result["turn_id"]
    assert [r["content"] for r in buffer(store, session.id)] == ["hello"]
    rows, more = service.messages(ALICE, session.id)
    assert [(m.seq, m.row["role"], m.row["content"]) for m in rows] == [(1, "user", "hello")]
    assert not more
    assert service.get(ALICE, session.id).status == "completed"


@pytest.mark.parametrize("content", ["", "   ", None, 5, ["x"]])
def test_turn_content_is_validated(
    service: SessionService, store: MemoryStore, content: object
) -> None:
    session = service.create(ALICE, "chat")
    with pytest.raises(InvalidInputError):
        service.send_turn(ALICE, session.id, content)
    assert buffer(store, session.id) == []
    assert service.messages(ALICE, session.id) == ([], False)


def test_turn_while_running_conflicts(service: SessionService, store: MemoryStore) -> None:
    session = service.create(ALICE, "chat")
    store.set_session_status(session.id, "running")
    with pytest.raises(ConflictError):
        service.send_turn(ALICE, session.id, "hi")
    with pytest.raises(ConflictError):
        service.reset(ALICE, session.id)
    assert buffer(store, session.id) == []


def test_runner_receives_the_turn(store: MemoryStore) -> None:
    calls: list[tuple[str, str, bool]] = []

    class Runner:
        def start_turn(self, session: SessionRecord, content: str, *, wait: bool) -> dict[str, Any]:
            calls.append((session.id, content, wait))
            if len(calls) > 1:
                raise ConflictError("a turn is already running")
            return {"turn_id": "abc", "status": "running"}

        def stop(self, session: SessionRecord) -> bool:
            calls.append((session.id, "stop", False))
            return True

    service = SessionService(store, MemoryService(store), Runner())
    session = service.create(ALICE, "chat")
    assert service.send_turn(ALICE, session.id, "go", wait=True) == {
        "turn_id": "abc",
        "status": "running",
    }
    with pytest.raises(ConflictError):
        service.send_turn(ALICE, session.id, "again")
    assert service.stop(ALICE, session.id)["stopped"] is True
    assert calls == [
        (session.id, "go", True),
        (session.id, "again", False),
        (session.id, "stop", False),
    ]


def test_stop_without_runner_stops_nothing(service: SessionService) -> None:
    session = service.create(ALICE, "chat")
    assert service.stop(ALICE, session.id) == {"stopped": False, "status": "idle"}


def test_reset_clears_buffer_keeps_transcript(service: SessionService, store: MemoryStore) -> None:
    session = service.create(ALICE, "chat")
    service.send_turn(ALICE, session.id, "one")
    service.send_turn(ALICE, session.id, "two")
    assert service.reset(ALICE, session.id)["reset"] is True
    assert buffer(store, session.id) == []
    rows, _ = service.messages(ALICE, session.id)
    assert [m.row["content"] for m in rows] == ["one", "two"]


def test_transcript_cursor(service: SessionService) -> None:
    session = service.create(ALICE, "chat")
    for i in range(5):
        service.send_turn(ALICE, session.id, f"m{i}")
    rows, more = service.messages(ALICE, session.id, since=1, limit=2)
    assert [m.seq for m in rows] == [2, 3] and more
    rows, more = service.messages(ALICE, session.id, before=5, limit=10, newest_first=True)
    assert [m.seq for m in rows] == [4, 3, 2, 1] and not more


def test_mem_15_only_admin_edits_or_deletes_messages(
    service: SessionService, store: MemoryStore
) -> None:
    session = service.create(ALICE, "chat")
    service.send_turn(ALICE, session.id, "original")
    for who in (ALICE, DRIVER, VIEWER):
        with pytest.raises(AccessDeniedError):
            service.edit_message(who, session.id, 1, {"role": "user", "content": "forged"})
        with pytest.raises(AccessDeniedError):
            service.delete_message(who, session.id, 1)
    with pytest.raises(NotFoundError):  # cannot even see it
        service.edit_message(BOB, session.id, 1, {"role": "user", "content": "forged"})
    assert service.messages(ALICE, session.id)[0][0].row["content"] == "original"

    with pytest.raises(UnknownRoleError):
        service.edit_message(ADMIN, session.id, 1, {"role": "wizard", "content": "x"})
    edited = service.edit_message(ADMIN, session.id, 1, {"role": "user", "content": "fixed"})
    assert edited.row["content"] == "fixed"
    assert service.messages(ALICE, session.id)[0][0].row["content"] == "fixed"
    with pytest.raises(NotFoundError):
        service.edit_message(ADMIN, session.id, 99, {"role": "user", "content": "x"})
    service.delete_message(ADMIN, session.id, 1)
    assert service.messages(ALICE, session.id) == ([], False)
    with pytest.raises(NotFoundError):
        service.delete_message(ADMIN, session.id, 1)


def test_mem_15_message_of_missing_session_is_denied(service: SessionService) -> None:
    with pytest.raises(NotFoundError):
        service.edit_message(
            ADMIN, "7b0c9a8e-0000-4000-8000-000000000001", 1, {"role": "user", "content": "x"}
        )
    with pytest.raises(NotFoundError):
        service.delete_message(ADMIN, "7b0c9a8e-0000-4000-8000-000000000001", 1)


def test_erase_user_is_admin_only_and_takes_a_usable_id(
    service: SessionService, store: MemoryStore
) -> None:
    numeric = Principal("42", frozenset({"sessions:create"}), "t42")
    session = service.create(numeric, "chat")
    for principal in (ALICE, numeric, VIEWER, DRIVER, SERVICE):
        with pytest.raises(AccessDeniedError):
            service.erase_user(principal, "42")
    for unusable in ("0", "", " ", "-3", "a b", None):  # no identity owns anything (MEM-9)
        assert service.erase_user(ADMIN, unusable) == (None, Erasure())
    assert store.get_session(session.id) is not None
    canonical, erased = service.erase_user(ADMIN, 42)  # the canonical id of 42 is "42"
    assert canonical == "42" and erased.sessions == 1
    assert store.get_session(session.id) is None


def test_delete_session(service: SessionService, store: MemoryStore) -> None:
    session = service.create(ALICE, "chat")
    service.send_turn(ALICE, session.id, "hi")
    notes = Address("session", session.id, "notes")
    store.append(notes, [{"role": "user", "content": "n"}])
    store.put_record(Address("session", session.id, "__flowmem_runtime__/lease"), {}, None)
    with pytest.raises(AccessDeniedError):
        service.delete(DRIVER, session.id)
    assert store.count(notes) == 1  # a denied delete changed nothing
    service.delete(ALICE, session.id)
    assert store.get_session(session.id) is None
    assert buffer(store, session.id) == []
    assert store.count(notes) == 0
    lease = store.get_record(Address("session", session.id, "__flowmem_runtime__/lease"), 0.0)
    assert lease == (False, None)
    with pytest.raises(NotFoundError):
        service.get(ALICE, session.id)
    other = service.create(BOB, "b")
    service.delete(ADMIN, other.id)
    assert store.get_session(other.id) is None


def test_mem_6_erasing_a_user_erases_the_spellings_stored_before_0016(
    service: SessionService, store: MemoryStore
) -> None:
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    store.put_record(Address("user", nfc, "k"), "new", None)
    store.put_record(Address("user", nfd, "k"), "old", None)  # written before 0016
    store.put_record(Address("user", "None", "k"), "shared", None)  # a placeholder, before 0016
    store.put_record(Address("user", "7", "k"), "seven's", None)
    assert service.erase_user(ADMIN, nfd) == (nfc, Erasure(records=2))
    assert service.erase_user(ADMIN, "None") == (None, Erasure(records=1))
    assert service.erase_user(ADMIN, "007") == ("007", Erasure())  # "7" is another user
    assert store.get_record(Address("user", "7", "k"), 0) == (True, "seven's")
    with sqlite3.connect(store.path) as conn:  # what is stored, read directly
        kept = conn.execute("SELECT scope_id FROM records WHERE scope = 'user'").fetchall()
    assert not any(scope_id in (nfc, nfd, "None") for (scope_id,) in kept)


def test_unstorable_text_in_a_session_raises_invalid_text_and_stores_nothing(
    service: SessionService, store: MemoryStore
) -> None:
    lone = "\ud800"
    for fields in (
        {"name": lone},
        {"agent": lone},
        {"metadata": {"k": lone}},
        {"metadata": {lone: 1}},
    ):
        with pytest.raises(InvalidTextError):
            service.create(ALICE, **fields)
    assert store.list_sessions(None, True, 10, 0) == ([], 0)
    session = service.create(ALICE, "chat")
    with pytest.raises(InvalidTextError):
        service.send_turn(ALICE, session.id, f"hi {lone}")
    service.send_turn(ALICE, session.id, "hi")
    with pytest.raises(InvalidTextError):
        service.edit_message(ADMIN, session.id, 1, {"role": "user", "content": lone})
    with pytest.raises(InvalidTextError):
        service.edit_message(ADMIN, session.id, 1, {"role": "user", "content": "x", lone: 1})
    assert [m.row["content"] for m in service.messages(ALICE, session.id)[0]] == ["hi"]


# --- one session model (issue 16 §4, docs/decisions/0032) ----------------------------------


def _memory(store: MemoryStore, **limits: int) -> MemoryService:
    from flowmem.limits import Limits

    return MemoryService(store, clock=Clock(), limits=Limits(**limits) if limits else None)


def _scope_data(store: MemoryStore, sid: str) -> tuple[int, tuple[bool, Any]]:
    return store.count(Address("session", sid, "chat")), store.get_record(
        Address("session", sid, "topic"), 0.0
    )


def test_mem_8_a_session_scope_write_creates_its_session_owned_by_the_context_user(
    store: MemoryStore,
) -> None:
    memory = _memory(store)
    context = ExecutionContext(session_id="s-weather", user_id="alice")
    assert memory.append("session", "chat", [{"role": "user", "content": "hi"}], context).count == 1
    assert memory.write("session", "topic", "Lisbon", context).success
    session = store.get_session("s-weather")
    assert session is not None and (session.owner, session.status) == ("alice", "idle")
    # a session like any other: its owner lists, views and drives it (MEM-9)
    sessions = SessionService(store, memory)
    assert [s.id for s in sessions.list_sessions(ALICE).sessions] == ["s-weather"]
    assert sessions.send_turn(ALICE, "s-weather", "more")["status"] == "completed"
    with pytest.raises(NotFoundError):
        sessions.get(BOB, "s-weather")


def test_mem_9_a_write_without_a_user_creates_a_session_owned_by_nobody(
    store: MemoryStore,
) -> None:
    memory = _memory(store)
    for user_id in (None, 0, "None"):  # no user, the id of nobody, a placeholder: no owner
        context = ExecutionContext(session_id=f"s-{user_id}", user_id=user_id)
        memory.write("session", "topic", "x", context)
        session = store.get_session(f"s-{user_id}")
        assert session is not None and session.owner is None
    sessions = SessionService(store, memory)
    assert sessions.list_sessions(NOBODY).sessions == []  # an absent identity owns nothing
    assert sessions.list_sessions(ALICE).sessions == []


def test_reading_a_session_that_does_not_exist_creates_nothing(store: MemoryStore) -> None:
    memory = _memory(store)
    context = ExecutionContext(session_id="s-read", user_id="alice")
    assert memory.read("session", "topic", context).found is False
    assert memory.load("session", "chat", context).count == 0
    assert memory.clear("session", "chat", context).success
    assert memory.delete("session", "topic", context).success
    # an append with nothing to append is a pure read (DESIGN.md §2)
    assert memory.append("session", "chat", [{"role": "user", "content": ""}], context).count == 0
    assert store.get_session("s-read") is None


def test_mem_13_an_unusable_session_id_creates_nothing(store: MemoryStore) -> None:
    memory = _memory(store)
    for sid in (None, "", 0, "0", "None", "null", "undefined", "nil", "a b", "-1", True):
        context = ExecutionContext(session_id=sid, user_id="alice")
        assert memory.append("session", "chat", [{"role": "user", "content": "x"}], context).count == 0
        assert not memory.write("session", "topic", "x", context).success
    for scope_id in ("", "None", "a b"):  # raw writes never refuse, and claim no session
        memory.write_raw("session", scope_id, "topic", "x")
    assert store.list_sessions(None, True, 100, 0) == ([], 0)


def test_mem_8_a_write_to_another_users_session_is_refused_and_changes_nothing(
    store: MemoryStore,
) -> None:
    memory = _memory(store)
    bob = ExecutionContext(session_id="s-bob", user_id="bob")
    memory.write("session", "topic", "bob's", bob)
    for user_id in ("alice", None):
        intruder = ExecutionContext(session_id="s-bob", user_id=user_id)
        with pytest.raises(AccessDeniedError) as caught:
            memory.append("session", "chat", [{"role": "user", "content": "x"}], intruder)
        assert caught.value.rule == "MEM-8"
        with pytest.raises(AccessDeniedError):
            memory.write("session", "topic", "mine now", intruder)
    assert _scope_data(store, "s-bob") == (0, (True, "bob's"))
    # a raw write (a trusted caller with its own scope id) writes to any owner's session
    memory.append_raw("session", "s-bob", "chat", [{"role": "user", "content": "raw"}])
    assert store.get_session("s-bob").owner == "bob"  # type: ignore[union-attr]


def test_a_write_after_the_session_was_deleted_is_refused_and_creates_nothing(
    store: MemoryStore,
) -> None:
    """DESIGN.md §5, issue 24 §2: a deleted session's id is remembered, never made again."""
    memory = _memory(store)
    context = ExecutionContext(session_id="s-again", user_id="alice")
    memory.append("session", "chat", [{"role": "user", "content": "old"}], context)
    SessionService(store, memory).delete(ALICE, "s-again")
    assert store.get_session("s-again") is None
    with pytest.raises(SessionDeletedError, match="use a new session id"):
        memory.append("session", "chat", [{"role": "user", "content": "new"}], context)
    with pytest.raises(SessionDeletedError):
        memory.write("session", "topic", "x", context)
    assert store.get_session("s-again") is None
    assert store.load(Address("session", "s-again", "chat")) == []


def test_the_session_limit_applies_to_sessions_made_by_writes(store: MemoryStore) -> None:
    memory = _memory(store, sessions_per_user=2)
    sessions = SessionService(store, memory)
    sessions.create(ALICE, "made")
    alice = ExecutionContext(session_id="s-1", user_id="alice")
    memory.write("session", "topic", "x", alice)
    with pytest.raises(TooManySessionsError):
        memory.write("session", "topic", "x", ExecutionContext(session_id="s-2", user_id="alice"))
    with pytest.raises(TooManySessionsError):
        memory.append(
            "session", "chat", [{"role": "user", "content": "x"}],
            ExecutionContext(session_id="s-3", user_id="alice"),
        )  # fmt: skip
    assert store.get_session("s-2") is None and store.get_session("s-3") is None
    memory.write("session", "topic", "y", alice)  # her existing sessions still take writes
    with pytest.raises(TooManySessionsError):
        sessions.create(ALICE, "one more")  # and the explicit creation counts them
    memory.write("session", "topic", "x", ExecutionContext(session_id="s-anon"))  # unowned: free
    assert store.list_sessions(None, True, 10, 0)[1] == 3


@pytest.fixture(params=BACKENDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend kind (memory, SQLite, PostgreSQL)."""
    opened = open_backend(request.param, request, tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def test_mem_8_the_loser_of_a_first_write_race_is_404_on_every_backend(any_store: Store) -> None:
    """Issue 24 §2: bob looked the id up and found nothing; alice's first write then made it.

    Bob's write is refused as if his lookup had found her session (404, never 403:
    that would tell him it exists) and changes nothing, on PostgreSQL as on SQLite.
    """
    for who in (ALICE, BOB):  # the guards name the principals' tokens, as over HTTP
        token = TokenRecord(str(who.token_id), f"h-{who.token_id}", who.user_id, who.permissions, 1.0)
        any_store.create_token(token)
    clock = Clock()
    memory = MemoryService(any_store, clock=clock)
    sessions = SessionService(any_store, memory, clock=clock)
    message = [{"role": "user", "content": "mine"}]
    for write in ("append", "write"):
        sid = f"s-race-{write}"
        assert sessions.find(sid) is None
        context, guard = sessions.write_target_for(BOB, sid, None, create=True)  # bob: none yet
        alice, first = sessions.write_target_for(ALICE, sid, None, create=True)
        memory.append("session", "chat", message, alice, guard=first)  # alice wins the race
        with pytest.raises(NotFoundError) as lost:
            if write == "append":
                memory.append("session", "chat", message, context, guard=guard)
            else:
                memory.write("session", "topic", "bob's", context, guard=guard)
        assert not isinstance(lost.value, AccessDeniedError)
        assert str(lost.value) == "no such session"
        assert any_store.get_session(sid).owner == "alice"  # type: ignore[union-attr]
        assert any_store.count(Address("session", sid, "chat")) == 1
        assert any_store.get_record(Address("session", sid, "topic"), 0.0) == (False, None)
