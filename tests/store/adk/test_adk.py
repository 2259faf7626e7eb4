"""``store.adk``: ADK sessions, app and user state on every backend (decision 0053).

The protocol as the ADK service uses it, without ADK: a session keyed by app, user and
ADK id (decision 0100), the revision a writer must have seen, the rows through the buffer rules, the states per
scope, and what a session delete and a user erasure remove.
"""

from __future__ import annotations

import pytest

from flowmem.core import ListEditor
from flowmem.errors import (
    AccessDeniedError,
    BufferFullError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    SessionStaleError,
)
from flowmem.store import Store
from flowmem.store.adk import (
    APPENDED,
    DROPPED,
    REPLACED,
    TAKEN,
    AdkKey,
    AdkSession,
    EventWrite,
    Seen,
    adk_of,
    apply_rows,
    events_address,
)
from flowmem.store.base import Quotas, SessionClaim, WriteGuard


def _create(
    store: Store,
    sid: str = "s1",
    user: str = "alice",
    app_delta: dict[str, object] | None = None,
    user_delta: dict[str, object] | None = None,
    adk_id: str = "",
    app: str = "shop",
) -> None:
    guard = WriteGuard(None, sid, SessionClaim(owner=user, create=True, created_at=1.0))
    adk_of(store).create(
        AdkSession(sid, app, user, {"own": 1}, created_at=1.0, updated_at=1.0, adk_id=adk_id),
        app_delta or {},
        user_delta or {},
        guard,
    )


def _event(n: int, role: str = "user", **fields: object) -> EventWrite:
    row = {"role": role, "content": f"m{n}", "metadata": {}, "timestamp": n}
    return EventWrite([row], f"e{n}", float(n), **fields)  # type: ignore[arg-type]


def test_an_adk_key_is_taken_once_and_the_refused_create_changes_nothing(store: Store) -> None:
    _create(store, app_delta={"motd": "hi"})
    with pytest.raises(ConflictError, match="already exists") as exists:
        _create(store, "s2", "alice", app_delta={"motd": "changed"}, adk_id="s1")
    assert exists.value.details["reason"] != TAKEN
    with pytest.raises(ConflictError) as taken:  # bob's "s1" needs another flowmem id
        _create(store, "s1", "bob", app_delta={"motd": "changed"})
    assert taken.value.details["reason"] == TAKEN
    app_state, listed = adk_of(store).list("shop", None)
    assert app_state == {"motd": "hi"}
    assert [(s.id, s.user_id) for s, _ in listed] == [("s1", "alice")]
    assert store.get_session("s1").owner == "alice"  # type: ignore[union-attr]
    assert store.get_session("s2") is None


def test_a_foreign_flowmem_session_refuses_the_claim(store: Store) -> None:
    guard = WriteGuard(None, "x1", SessionClaim(owner="bob", create=True, created_at=1.0))
    store.append(events_address("x1"), [{"role": "user", "content": "bob's"}], guard=guard)
    with pytest.raises(AccessDeniedError):  # the flowmem session is bob's (MEM-8)
        _create(store, "x1", "alice")
    assert adk_of(store).read(AdkKey("shop", "alice", "x1")) is None


def test_one_adk_id_of_two_users_or_apps_is_two_sessions(store: Store) -> None:
    _create(store, "chat", "ana")
    _create(store, "adk-ben", "ben", adk_id="chat")
    _create(store, "adk-blog", "ana", adk_id="chat", app="blog")
    tables = adk_of(store)
    tables.append(AdkKey("shop", "ben", "chat"), Seen(0), _event(1))
    for app, user, sid, rows in (("shop", "ana", "chat", []), ("shop", "ben", "adk-ben", ["m1"])):
        found = tables.read(AdkKey(app, user, "chat"))
        assert found is not None
        assert (found[0].session.id, found[0].session.adk_id) == (sid, "chat")
        assert [r["content"] for r in found[1]] == rows
    assert [(s.id, s.adk_id) for s, _ in tables.list("shop", "ben")[1]] == [("adk-ben", "chat")]
    assert store.get_session("adk-ben").owner == "ben"  # type: ignore[union-attr]
    assert store.delete_session("adk-ben")
    assert tables.read(AdkKey("shop", "ben", "chat")) is None
    assert tables.read(AdkKey("shop", "ana", "chat")) is not None
    assert tables.read(AdkKey("blog", "ana", "chat")) is not None


def test_a_key_created_again_after_a_delete_refuses_the_old_sessions_writer(store: Store) -> None:
    _create(store, "s1", "alice")
    tables = adk_of(store)
    tables.append(AdkKey("shop", "alice", "s1"), Seen(0, session_id="s1"), _event(1))
    assert store.delete_session("s1")
    _create(store, "adk-new", "alice", adk_id="s1")
    with pytest.raises(SessionStaleError):  # the old session's writer, at the new one's revision
        tables.append(AdkKey("shop", "alice", "s1"), Seen(0, session_id="s1"), _event(2))
    tables.append(AdkKey("shop", "alice", "s1"), Seen(0, session_id="adk-new"), _event(3))
    found = tables.read(AdkKey("shop", "alice", "s1"))
    assert found is not None
    assert [r["content"] for r in found[1]] == ["m3"]


def test_an_append_from_another_revision_is_stale_and_stores_nothing(store: Store) -> None:
    _create(store)
    tables = adk_of(store)
    written = tables.append(AdkKey("shop", "alice", "s1"), Seen(0), _event(1, session_delta={"k": 1}))
    assert written.scopes.session.revision == 1
    with pytest.raises(SessionStaleError, match="nothing was stored"):
        tables.append(AdkKey("shop", "alice", "s1"), Seen(0), _event(2, session_delta={"k": 2}, user_delta={"u": 1}))
    found = tables.read(AdkKey("shop", "alice", "s1"))
    assert found is not None
    scopes, rows = found
    assert (scopes.session.revision, scopes.session.state, scopes.user_state) == (1, {"own": 1, "k": 1}, {})
    assert [r["content"] for r in rows] == ["m1"]


def test_a_writer_without_a_revision_is_stale_unless_it_holds_the_event_stored_last(
    store: Store,
) -> None:
    _create(store)
    tables = adk_of(store)
    tables.append(AdkKey("shop", "alice", "s1"), Seen(None), _event(5))  # nothing stored yet
    tables.append(AdkKey("shop", "alice", "s1"), Seen(None, frozenset({"e5"})), _event(6))  # saw e5
    with pytest.raises(SessionStaleError):
        tables.append(AdkKey("shop", "alice", "s1"), Seen(None, frozenset({"e5"})), _event(7))
    # an event made before the writer's latest one, stored after it, is still unseen (issue 36)
    tables.append(AdkKey("shop", "alice", "s1"), Seen(None, frozenset({"e5", "e6"})), _event(4))
    with pytest.raises(SessionStaleError):
        tables.append(AdkKey("shop", "alice", "s1"), Seen(None, frozenset({"e5", "e6"})), _event(8))


def test_an_append_to_another_apps_or_users_session_is_not_found(store: Store) -> None:
    _create(store)
    tables = adk_of(store)
    for app, user in (("blog", "alice"), ("shop", "bob")):
        with pytest.raises(NotFoundError):
            tables.append(AdkKey(app, user, "s1"), Seen(0), _event(1))
        assert tables.read(AdkKey(app, user, "s1")) is None
    with pytest.raises(NotFoundError):
        tables.append(AdkKey("shop", "alice", "nope"), Seen(0), _event(1))


def test_app_state_is_the_apps_and_user_state_the_users_across_sessions(store: Store) -> None:
    _create(store, "a1", "alice", user_delta={"lang": "fr"}, app_delta={"v": 1})
    _create(store, "a2", "alice")
    _create(store, "b1", "bob", user_delta={"lang": "de"})
    tables = adk_of(store)
    tables.append(AdkKey("shop", "alice", "a2"), Seen(0), _event(1, app_delta={"v": 2}, user_delta={"seen": True}))
    found = tables.read(AdkKey("shop", "alice", "a1"), rows=False)
    assert found is not None
    assert (found[0].app_state, found[0].user_state, found[1]) == ({"v": 2}, {"lang": "fr", "seen": True}, [])
    assert tables.user_state("shop", "bob") == {"lang": "de"}
    assert tables.user_state("blog", "alice") == {}


def test_an_append_over_the_buffer_limit_stores_nothing_and_changes_no_state(store: Store) -> None:
    _create(store)
    tables = adk_of(store)
    with pytest.raises(BufferFullError):
        tables.append(AdkKey("shop", "alice", "s1"), Seen(0), _event(1, max_bytes=10, app_delta={"x": 1}))
    found = tables.read(AdkKey("shop", "alice", "s1"))
    assert found is not None
    assert (found[0].session.revision, found[0].app_state, found[1]) == (0, {}, [])


def test_an_events_rows_count_against_the_owners_quota_and_one_past_it_stores_nothing(
    store: Store,
) -> None:
    _create(store)
    tables = adk_of(store)
    tables.append(AdkKey("shop", "alice", "s1"), Seen(0), _event(1))
    used = store.usage("alice")
    assert (used.buffers, used.bytes > 0) == (1, True)  # the events buffer, its rows' bytes
    store.set_quotas(Quotas(bytes=used.bytes + 10))
    big = {"role": "user", "content": "x" * 100, "metadata": {}, "timestamp": 2}
    with pytest.raises(QuotaExceededError):
        tables.append(AdkKey("shop", "alice", "s1"), Seen(1), EventWrite([big], "e2", 2.0, app_delta={"x": 1}))
    found = tables.read(AdkKey("shop", "alice", "s1"))
    assert found is not None
    assert (found[0].session.revision, found[0].app_state, len(found[1])) == (1, {}, 1)
    assert store.usage("alice") == used


def test_an_events_append_changes_the_buffers_version(store: Store) -> None:
    _create(store)
    tables = adk_of(store)
    tables.append(AdkKey("shop", "alice", "s1"), Seen(0), _event(1))
    first = store.page_bodies(events_address("s1"))
    tables.append(AdkKey("shop", "alice", "s1"), Seen(1), _event(2))
    assert store.page_bodies(events_address("s1")).version != first.version


def test_deleting_the_session_drops_it_and_erasing_the_user_drops_their_user_states(store: Store) -> None:
    _create(store, "a1", "alice", user_delta={"lang": "fr"}, app_delta={"v": 1})
    _create(store, "a2", "alice")
    tables = adk_of(store)
    tables.append(AdkKey("shop", "alice", "a1"), Seen(0), _event(1))
    assert store.delete_session("a1")
    assert tables.read(AdkKey("shop", "alice", "a1")) is None
    assert store.load(events_address("a1")) == []
    assert tables.user_state("shop", "alice") == {"lang": "fr"}
    store.erase_user("alice")
    assert tables.list("shop", None) == ({"v": 1}, [])
    assert tables.user_state("shop", "alice") == {}


def test_mem_1_mem_3_mem_10_apply_rows_reports_each_rows_fate_and_the_calls_healed() -> None:
    call = {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "f"}]}}
    answer = {"role": "tool", "content": "42", "metadata": {"tool_call_id": "c1"}}
    editor = ListEditor([])
    assert apply_rows(editor, [call]) == ((APPENDED,), ())
    assert apply_rows(editor, [{"role": "user", "content": "hi", "metadata": {}}]) == ((APPENDED,), ("c1",))
    assert apply_rows(editor, [answer, dict(answer), call]) == ((REPLACED, DROPPED, DROPPED), ())
    assert [r["role"] for r in editor.rows] == ["assistant", "tool", "user"]
