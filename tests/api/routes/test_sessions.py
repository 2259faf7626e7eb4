"""One session model over HTTP (issue 16 §4, docs/decisions/0032).

A write to a ``session_id`` that names no session creates it, owned by the caller,
with its first row; reads, clears and deletes of such an id create nothing; the
access rules decide everything else as for a session made by ``POST /v1/sessions``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flowmem.api import create_app
from flowmem.api.ratelimit import RateLimits
from flowmem.limits import Limits
from flowmem.store import Address, Store, open_store
from tests.api.helpers import Api, make_tokens, snapshot
from tests.api.transport import OneHopClient

APPEND = {"messages": {"role": "user", "content": "weather?"}}


def _sessions(api: Api) -> list[tuple[str, str | None]]:
    found, _ = api.store.list_sessions(None, True, 100, 0)
    return sorted((s.id, s.owner) for s in found)


def test_mem_8_a_write_to_a_new_session_id_creates_it_owned_by_the_caller(api: Api) -> None:
    append = api.call("POST", "/v1/buffers/session/chat_history?session_id=s-weather", json=APPEND)
    assert append.status_code == 200, append.text
    assert append.json()["resolved_scope_id"] == "s-weather"
    put = api.call("PUT", "/v1/memory/session/topic?session_id=s-notes", json={"value": "x"})
    assert put.status_code == 200, put.text
    assert _sessions(api) == [("s-notes", "alice"), ("s-weather", "alice")]
    listed = api.call("GET", "/v1/sessions").json()
    assert sorted(s["id"] for s in listed["data"]) == ["s-notes", "s-weather"]
    session = api.call("GET", "/v1/sessions/s-weather").json()
    assert (session["name"], session["status"], session["owner"]) == ("", "idle", "alice")
    read = api.call("GET", "/v1/buffers/session/chat_history?session_id=s-weather").json()
    assert read["count"] == 1
    turn = api.call("POST", "/v1/sessions/s-weather/turns", json={"content": "and now?"})
    assert turn.status_code == 202, turn.text
    assert api.call("DELETE", "/v1/sessions/s-weather").status_code == 204
    assert api.store.count(Address("session", "s-weather", "chat_history")) == 0


def test_mem_9_another_user_cannot_reach_a_session_made_by_a_write(api: Api) -> None:
    api.call("POST", "/v1/buffers/session/chat_history?session_id=s-alice", json=APPEND)
    before = snapshot(api, [Address("session", "s-alice", "chat_history")])
    url = "/v1/buffers/session/chat_history?session_id=s-alice"
    assert api.call("POST", url, "bob", json=APPEND).status_code == 404
    assert api.call("GET", url, "bob").status_code == 404
    assert api.call("PUT", "/v1/memory/session/k?session_id=s-alice", "bob", json={"value": 1}).status_code == 404
    assert api.call("POST", url, "viewer", json=APPEND).status_code == 403  # view, not drive
    assert api.call("POST", url, "driver", json=APPEND).status_code == 200  # drive_any
    after = snapshot(api, [Address("session", "s-alice", "chat_history")])
    assert after["sessions"] == before["sessions"]
    assert api.store.get_session("s-alice").owner == "alice"  # type: ignore[union-attr]


def test_reads_clears_and_deletes_of_an_unknown_session_id_create_nothing(api: Api) -> None:
    before = snapshot(api)
    for method, url in [
        ("GET", "/v1/buffers/session/chat_history?session_id=s-none"),
        ("DELETE", "/v1/buffers/session/chat_history?session_id=s-none"),
        ("GET", "/v1/memory/session/k?session_id=s-none"),
        ("DELETE", "/v1/memory/session/k?session_id=s-none"),
        ("GET", "/v1/sessions/s-none"),
        ("POST", "/v1/sessions/s-none/reset"),
    ]:
        assert api.call(method, url).status_code == 404, (method, url)
    turn = api.call("POST", "/v1/sessions/s-none/turns", json={"content": "hi"})
    assert turn.status_code == 404
    assert snapshot(api) == before


def test_mem_13_a_write_to_an_unusable_session_id_creates_nothing(api: Api) -> None:
    before = snapshot(api)
    for sid in ("None", "null", "0", "-1", "a%20b", "%00"):
        url = f"/v1/buffers/session/chat_history?session_id={sid}"
        assert api.call("POST", url, json=APPEND).status_code in (404, 422), sid
    assert snapshot(api) == before


def test_a_write_to_a_new_session_needs_the_create_permission(api: Api) -> None:
    url = "/v1/buffers/session/chat_history?session_id=s-viewer"
    answer = api.call("POST", url, "viewer", json=APPEND)
    assert answer.status_code == 403
    assert api.store.get_session("s-viewer") is None


def test_mem_9_a_service_token_makes_a_session_owned_by_nobody(api: Api) -> None:
    url = "/v1/buffers/session/chat_history?session_id=s-service"
    assert api.call("POST", url, "service", json=APPEND).status_code == 200
    assert _sessions(api) == [("s-service", None)]
    # owned by nobody, so not by the service token either (MEM-9)
    assert api.call("GET", url, "service").status_code == 404
    assert api.call("GET", "/v1/sessions/s-service", "admin").status_code == 200


def test_erasing_a_user_removes_the_sessions_their_writes_made(api: Api) -> None:
    api.call("POST", "/v1/buffers/session/chat_history?session_id=s-1", json=APPEND)
    api.call("PUT", "/v1/memory/session/k?session_id=s-2", json={"value": 1})
    erased = api.call("DELETE", "/v1/users/alice", "admin").json()
    assert erased["sessions"] == 2
    assert _sessions(api) == []
    assert api.store.count(Address("session", "s-1", "chat_history")) == 0


@pytest.fixture
def limited() -> Iterator[Api]:
    """An app whose users may own 3 sessions."""
    store: Store = open_store("memory://")
    tokens = make_tokens(store)
    limits = Limits(sessions_per_user=3)
    app = create_app(store, limits=limits, rate_limits=RateLimits.off())
    with OneHopClient(app, raise_server_exceptions=False) as client:
        yield Api(client, store, tokens)
    store.close()


def test_the_session_limit_applies_to_sessions_made_by_writes(limited: Api) -> None:
    api = limited
    api.session()  # one by POST /v1/sessions
    for n in (1, 2):
        url = f"/v1/buffers/session/chat_history?session_id=s-{n}"
        assert api.call("POST", url, json=APPEND).status_code == 200
    for method, url, body in [
        ("POST", "/v1/buffers/session/chat_history?session_id=s-3", APPEND),
        ("PUT", "/v1/memory/session/k?session_id=s-4", {"value": 1}),
    ]:
        answer = api.call(method, url, json=body)
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "too_many_sessions"
    assert api.call("POST", "/v1/sessions", json={"name": "x"}).status_code == 409
    assert len(_sessions(api)) == 3
    # writes to her existing sessions go on
    url = "/v1/buffers/session/chat_history?session_id=s-1"
    assert api.call("POST", url, json=APPEND).status_code == 200
