"""The HTTP API in process: auth, sessions, transcripts, turns, buffers, records, stateless."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.api.ratelimit import RateLimits
from flowmem.errors import StoreUnavailableError
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.sessions import memory_context
from flowmem.store import Address, MemoryStore, SessionRecord, Store
from tests.api.helpers import Api, make_tokens, snapshot
from tests.api.transport import OneHopClient

MISSING = "7b0c9a8e-0000-4000-8000-000000000001"


def error_code(response: Any) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["message"], str)
    code: str = body["error"]["code"]
    return code


# --- auth ------------------------------------------------------------------------------


def test_open_endpoints_need_no_token(api: Api) -> None:
    assert api.call("GET", "/health", None).json()["status"] == "ok"
    spec = api.call("GET", "/openapi.json", None).json()
    assert "/v1/sessions" in spec["paths"]
    assert api.call("GET", "/docs", None).status_code == 200
    assert api.call("GET", "/health/store", None).json()["status"] == "ok"


def test_store_health_is_503_when_the_store_does_not_answer() -> None:
    class DownStore(MemoryStore):
        def put_record(self, address: Address, value: Any, expires_at: float | None) -> None:
            raise StoreUnavailableError("cannot connect to PostgreSQL")

    with OneHopClient(create_app(DownStore()), raise_server_exceptions=False) as client:
        assert client.get("/health").status_code == 200  # liveness does not ask the store
        response = client.get("/health/store")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "store_unavailable"


def _all_operations(app_client: TestClient) -> list[tuple[str, str]]:
    spec = app_client.get("/openapi.json").json()
    ops = []
    for path, item in spec["paths"].items():
        for method in item:
            concrete = (
                path.replace("{session_id}", MISSING)
                .replace("{seq}", "1")
                .replace("{scope}", "user")
                .replace("{key}", "k")
            )
            ops.append((method.upper(), concrete))
    return ops


@pytest.mark.parametrize("who", [None, "revoked", "bogus", "malformed"])
def test_every_route_refuses_without_valid_token(memory_api: Api, who: str | None) -> None:
    headers = {
        None: {},
        "revoked": memory_api.headers("revoked"),
        "bogus": {"Authorization": "Bearer fm_not-a-real-token"},
        "malformed": {"Authorization": "Token abc"},
    }[who]
    before = snapshot(memory_api)
    # one bad token on every route: more routes than the bad-token throttle lets through in
    # a row (tested on its own), so this app counts no failures
    app = create_app(memory_api.store, rate_limits=RateLimits.off())
    with OneHopClient(app, raise_server_exceptions=False) as client:
        for method, path in _all_operations(client):
            if path in ("/health", "/health/store"):
                continue
            body = {"messages": [{"role": "user", "content": "x"}]}
            response = client.request(method, path, headers=headers, json=body)
            assert response.status_code == 401, (method, path, response.text)
            assert error_code(response) == "unauthenticated"
            assert response.headers["www-authenticate"] == "Bearer"
    assert snapshot(memory_api) == before


# --- sessions -------------------------------------------------------------------------


def test_mem_9_create_and_read_session(api: Api) -> None:
    created = api.call("POST", "/v1/sessions", json={"name": "chat", "metadata": {"a": 1}})
    assert created.status_code == 201
    session = created.json()
    assert session["owner"] == "alice" and session["status"] == "idle"
    read = api.call("GET", f"/v1/sessions/{session['id']}").json()
    assert (read.pop("buffers"), read.pop("buffers_more")) == ([], False)  # no buffer yet
    assert read == session
    assert session["conversation"] == {"buffer": "chat_history", "messages": 0, "found_by": "default"}
    assert api.call("GET", f"/v1/sessions/{session['id']}", "viewer").status_code == 200
    assert api.call("GET", f"/v1/sessions/{session['id']}", "bob").status_code == 404
    assert api.call("GET", f"/v1/sessions/{session['id'].upper()}").status_code == 200


def test_mem_9_service_principal_creates_unowned(api: Api) -> None:
    created = api.call("POST", "/v1/sessions", "service", json={})
    assert created.status_code == 201
    assert created.json()["owner"] is None
    # the service principal owns nothing: it cannot even see what it created
    assert api.call("GET", f"/v1/sessions/{created.json()['id']}", "service").status_code == 404


def test_create_needs_permission(api: Api) -> None:
    before = snapshot(api)
    response = api.call("POST", "/v1/sessions", "viewer", json={"name": "x"})
    assert response.status_code == 403
    assert error_code(response) == "forbidden"
    assert snapshot(api) == before


def test_list_sessions_paginates_under_filter(api: Api) -> None:
    ids = [api.session("alice", f"s{i}") for i in range(5)]
    api.session("bob")
    page = api.call("GET", "/v1/sessions?limit=2&offset=1").json()
    assert page["pagination"] == {"total": 5, "limit": 2, "offset": 1, "has_more": True}
    assert [s["id"] for s in page["data"]] == [ids[3], ids[2]]
    last = api.call("GET", "/v1/sessions?limit=2&offset=4").json()
    assert last["pagination"]["has_more"] is False and len(last["data"]) == 1
    assert api.call("GET", "/v1/sessions", "viewer").json()["pagination"]["total"] == 6
    assert api.call("GET", "/v1/sessions", "service").json()["pagination"]["total"] == 0


@pytest.mark.parametrize(("limit", "clamped"), [(0, 1), (-5, 1), (100, 100), (10**12, 100)])
def test_limit_is_clamped(api: Api, limit: int, clamped: int) -> None:
    response = api.call("GET", f"/v1/sessions?limit={limit}")
    assert response.status_code == 200
    assert response.json()["pagination"]["limit"] == clamped


def test_delete_session(api: Api) -> None:
    sid = api.session()
    notes = f"/v1/buffers/session/notes?session_id={sid}"
    assert api.call("POST", notes, json={"messages": {"role": "user", "content": "n"}}).is_success
    assert api.call("PUT", f"/v1/memory/session/k?session_id={sid}", json={"value": 1}).is_success
    assert api.call("DELETE", f"/v1/sessions/{sid}", "driver").status_code == 403
    assert api.call("DELETE", f"/v1/sessions/{sid}", "bob").status_code == 404
    assert api.store.count(Address("session", sid, "notes")) == 1  # refused: nothing changed
    assert api.call("DELETE", f"/v1/sessions/{sid}").status_code == 204
    assert api.call("GET", f"/v1/sessions/{sid}").status_code == 404
    assert api.call("DELETE", f"/v1/sessions/{sid}").status_code == 404
    # the session's whole scope went with it, not only its conversation buffer
    assert api.store.count(Address("session", sid, "notes")) == 0
    assert api.store.get_record(Address("session", sid, "k"), 0.0) == (False, None)


def test_erase_user_is_admin_only_and_deletes_what_the_user_owns(api: Api) -> None:
    sid = api.session("bob")
    body = {"messages": {"role": "user", "content": "hi"}}
    url = f"/v1/buffers/session/chat_history?session_id={sid}"
    assert api.call("POST", url, "bob", json=body).status_code == 200
    assert api.call("PUT", "/v1/memory/user/k", "bob", json={"value": 1}).status_code == 200
    kept = api.session("alice")
    before = snapshot(api)
    for who in ("alice", "bob", "viewer", "driver", "service", "shared"):
        assert api.call("DELETE", "/v1/users/bob", who).status_code == 403, who
    assert api.call("DELETE", "/v1/users/bob", None).status_code == 401
    assert api.call("DELETE", "/v1/users/bob", "revoked").status_code == 401
    nobody = api.call("DELETE", "/v1/users/0", "admin")  # not an identity: owns nothing
    assert nobody.status_code == 200
    assert nobody.json() == {
        "user_id": None,
        "sessions": 0,
        "buffers": 0,
        "records": 0,
        "tokens": 0,
    }
    assert snapshot(api) == before  # refused and neutral requests changed nothing

    response = api.call("DELETE", "/v1/users/bob", "admin")
    assert response.status_code == 200
    assert response.json() == {
        "user_id": "bob",
        "sessions": 1,
        "buffers": 1,
        "records": 1,
        "tokens": 1,
    }
    assert api.store.get_session(sid) is None
    assert api.store.get_record(Address("user", "bob", "k"), 0.0) == (False, None)
    assert api.call("GET", "/v1/sessions", "bob").status_code == 401  # its token went too
    assert api.call("GET", f"/v1/sessions/{kept}").status_code == 200
    nothing = api.call("DELETE", "/v1/users/nobody", "admin").json()
    assert (nothing["sessions"], nothing["buffers"], nothing["tokens"]) == (0, 0, 0)


def test_erase_user_refuses_while_a_session_runs(api: Api) -> None:
    sid = api.session("alice")
    assert api.store.set_session_status(sid, "running")
    before = snapshot(api)
    response = api.call("DELETE", "/v1/users/alice", "admin")
    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
    assert snapshot(api) == before


# --- transcript and turns -------------------------------------------------------------


def test_turns_and_polling(api: Api) -> None:
    sid = api.session()
    accepted = api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "one"})
    assert accepted.status_code == 202
    assert accepted.json()["status"] == "completed" and accepted.json()["turn_id"]
    waited = api.call("POST", f"/v1/sessions/{sid}/turns?wait=true", json={"content": "two"})
    assert waited.status_code == 200
    for i in range(3, 6):
        api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": f"m{i}"})
    page = api.call("GET", f"/v1/sessions/{sid}/messages?limit=2").json()
    assert [m["seq"] for m in page["data"]] == [1, 2]
    assert page["has_more"] is True and page["next_since"] == 2
    page = api.call("GET", f"/v1/sessions/{sid}/messages?since=2&limit=10").json()
    assert [m["content"] for m in page["data"]] == ["m3", "m4", "m5"]
    assert page["has_more"] is False
    page = api.call("GET", f"/v1/sessions/{sid}/messages?newest_first=true&limit=2").json()
    assert [m["seq"] for m in page["data"]] == [5, 4] and page["next_before"] == 4
    page = api.call("GET", f"/v1/sessions/{sid}/messages?before=3", "viewer").json()
    assert [m["seq"] for m in page["data"]] == [1, 2]
    assert api.call("GET", f"/v1/sessions/{sid}").json()["status"] == "completed"


def test_mem_9_viewer_cannot_drive(api: Api) -> None:
    sid = api.session()
    before = snapshot(api)
    for path, body in [("turns", {"content": "hi"}), ("stop", None), ("reset", None)]:
        response = api.call("POST", f"/v1/sessions/{sid}/{path}", "viewer", json=body)
        assert response.status_code == 403, (path, response.text)
        assert error_code(response) == "forbidden"
        response = api.call("POST", f"/v1/sessions/{sid}/{path}", "bob", json=body)
        assert response.status_code == 404
    assert snapshot(api) == before


def test_mem_8_turn_by_admin_lands_in_owner_session_buffer(api: Api) -> None:
    sid = api.session("alice")
    assert api.call("POST", f"/v1/sessions/{sid}/turns", "admin", json={"content": "hi"}).is_success
    loaded = api.call("GET", f"/v1/buffers/session/chat_history?session_id={sid}").json()
    assert [m["content"] for m in loaded["messages"]] == ["hi"]
    assert loaded["resolved_scope_id"] == sid


class UserMemoryRunner:
    """Writes the user scope under memory_context(session), as the runtime does."""

    def __init__(self, store: Store, memory: MemoryService) -> None:
        self.memory = memory

    def start_turn(self, session: SessionRecord, content: str, *, wait: bool) -> dict[str, Any]:
        result = self.memory.write("user", "last_turn", content, memory_context(session))
        return {"turn_id": "t1", "status": "completed", "stored": result.success}

    def stop(self, session: SessionRecord) -> bool:
        return False


def test_mem_8_runner_turn_uses_owner_identity_not_caller() -> None:
    store = MemoryStore()
    tokens = make_tokens(store)
    app = create_app(store, runner_factory=UserMemoryRunner)
    with OneHopClient(app) as client:
        api = Api(client, store, tokens)
        owned = api.session("alice")
        unowned = api.session("service")
        turn = api.call("POST", f"/v1/sessions/{owned}/turns", "admin", json={"content": "x"})
        assert turn.json()["stored"] is True
        assert api.call("GET", "/v1/memory/user/last_turn").json()["value"] == "x"
        assert api.call("GET", "/v1/memory/user/last_turn", "admin").json()["found"] is False
        turn = api.call("POST", f"/v1/sessions/{unowned}/turns", "admin", json={"content": "y"})
        assert turn.json()["stored"] is False  # no owner: the user scope refuses
        assert store.get_record(Address("user", "root", "last_turn"), 0) == (False, None)
        assert store.get_record(Address("user", "alice", "last_turn"), 0) == (True, "x")


def test_reset_clears_buffer_not_transcript(api: Api) -> None:
    sid = api.session()
    api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "hello"})
    reset = api.call("POST", f"/v1/sessions/{sid}/reset")
    assert reset.status_code == 200 and reset.json()["reset"] is True
    loaded = api.call("GET", f"/v1/buffers/session/chat_history?session_id={sid}").json()
    assert loaded["count"] == 0
    assert len(api.call("GET", f"/v1/sessions/{sid}/messages").json()["data"]) == 1
    stop = api.call("POST", f"/v1/sessions/{sid}/stop", "driver")
    assert stop.json() == {"stopped": False, "status": "completed"}


def test_every_route_that_clears_a_running_sessions_buffer_answers_409(api: Api) -> None:
    sid = api.session()
    api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "hello"})
    other = f"/v1/buffers/session/notes?session_id={sid}"
    api.call("POST", other, json={"messages": {"role": "user", "content": "note"}})
    assert api.store.set_session_status(sid, "running")
    kept = [Address("session", sid, "chat_history"), Address("session", sid, "notes")]
    before = snapshot(api, kept)
    for method, path in [
        ("POST", f"/v1/sessions/{sid}/reset"),
        ("DELETE", f"/v1/buffers/session/chat_history?session_id={sid}"),
        ("DELETE", other),
    ]:
        response = api.call(method, path)
        assert response.status_code == 409, (path, response.json())
        assert response.json()["error"]["code"] == "conflict"
    assert snapshot(api, kept) == before
    loaded = api.call("GET", f"/v1/buffers/session/chat_history?session_id={sid}").json()
    assert loaded["count"] == 1
    assert api.store.set_session_status(sid, "completed")
    cleared = api.call("DELETE", f"/v1/buffers/session/chat_history?session_id={sid}")
    assert cleared.status_code == 200 and cleared.json()["removed"] == 1


def test_mem_15_only_admin_edits_messages(api: Api) -> None:
    sid = api.session()
    api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "original"})
    before = snapshot(api)
    forged = {"role": "user", "content": "forged"}
    for who, status in [("alice", 403), ("driver", 403), ("viewer", 403), ("bob", 404)]:
        response = api.call("PATCH", f"/v1/sessions/{sid}/messages/1", who, json=forged)
        assert response.status_code == status, who
        response = api.call("DELETE", f"/v1/sessions/{sid}/messages/1", who)
        assert response.status_code == status, who
    assert snapshot(api) == before
    edited = api.call(
        "PATCH", f"/v1/sessions/{sid}/messages/1", "admin", json={"role": "user", "content": "ok"}
    )
    assert edited.status_code == 200 and edited.json()["content"] == "ok"
    assert api.call("DELETE", f"/v1/sessions/{sid}/messages/1", "admin").status_code == 204
    assert api.call("DELETE", f"/v1/sessions/{sid}/messages/1", "admin").status_code == 404
    assert api.call("GET", f"/v1/sessions/{sid}/messages").json()["data"] == []


def test_mem_15_message_of_missing_session_denied(api: Api) -> None:
    response = api.call("DELETE", f"/v1/sessions/{MISSING}/messages/1", "admin")
    assert response.status_code == 404


# --- buffers -----------------------------------------------------------------------------


def test_buffer_append_and_load_user_scope(api: Api) -> None:
    one = api.call(
        "POST", "/v1/buffers/user/k", json={"messages": {"role": "user", "content": "a"}}
    )
    assert one.status_code == 200
    body = one.json()
    assert body["count"] == 1 and body["appended"] == 1 and body["appended_any"] is True
    assert body["resolved_scope_id"] == "alice"
    many = api.call(
        "POST",
        "/v1/buffers/user/k",
        json={
            "messages": [
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
            ],
            "return_messages": False,
        },
    ).json()
    assert many["count"] == 3 and many["messages"] == []
    last = api.call("GET", "/v1/buffers/user/k?last=2").json()
    assert [m["content"] for m in last["messages"]] == ["b", "c"] and last["count"] == 3
    # bob has his own bucket
    assert api.call("GET", "/v1/buffers/user/k", "bob").json()["count"] == 0
    cleared = api.call("DELETE", "/v1/buffers/user/k").json()
    assert cleared["success"] is True
    assert api.call("GET", "/v1/buffers/user/k").json()["count"] == 0


def test_mem_1_mem_14_duplicate_tool_result_counts_zero(api: Api) -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f"}]}
    result = {"role": "tool", "content": "42", "tool_call_id": "c1"}
    first = api.call("POST", "/v1/buffers/user/k", json={"messages": [call, result]}).json()
    assert first["appended"] == 2
    again = api.call("POST", "/v1/buffers/user/k", json={"messages": result}).json()
    assert again["appended"] == 0 and again["appended_any"] is False and again["count"] == 2


def test_mem_3_user_turn_heals_over_http(api: Api) -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f"}]}
    api.call("POST", "/v1/buffers/user/k", json={"messages": call})
    healed = api.call(
        "POST",
        "/v1/buffers/user/k",
        json={"messages": {"role": "user", "content": "next"}, "return_messages": True},
    ).json()
    assert [m["role"] for m in healed["messages"]] == ["assistant", "tool", "user"]
    assert healed["messages"][1]["metadata"] == {"tool_call_id": "c1", "healed": True}


def test_buffer_window(api: Api) -> None:
    for i in range(5):
        api.call(
            "POST",
            "/v1/buffers/user/k",
            json={"messages": {"role": "user", "content": f"m{i}"}, "max_messages": 3},
        )
    loaded = api.call("GET", "/v1/buffers/user/k").json()
    assert [m["content"] for m in loaded["messages"]] == ["m2", "m3", "m4"]


def test_mem_6_mem_7_user_scope_without_user_is_neutral(api: Api) -> None:
    before = snapshot(api)
    body = {"messages": {"role": "user", "content": "leak?"}}
    for who in ("service",):
        appended = api.call("POST", "/v1/buffers/user/k", who, json=body)
        assert appended.status_code == 200
        assert appended.json() == {
            "messages": [],
            "count": 0,
            "appended": 0,
            "appended_any": False,
            "resolved_scope_id": "",
            "refused": "no_user_id",
        }
        read = api.call("GET", '/v1/memory/user/k?default="dflt"', who).json()
        assert read == {
            "value": "dflt",
            "found": False,
            "resolved_scope_id": "",
            "refused": "no_user_id",
        }
        written = api.call("PUT", "/v1/memory/user/k", who, json={"value": 1}).json()
        assert written["success"] is False and written["resolved_scope_id"] == ""
    assert snapshot(api) == before


def test_mem_6_external_ids_007_and_7_have_separate_memories(api: Api) -> None:
    from flowmem.auth import create_token

    tokens = {who: create_token(api.store, who)[0] for who in ("7", "007", "Jos\u00e9")}
    nfd = create_token(api.store, "Jose\u0301")[0]

    def as_(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    for who in ("7", "007"):
        put = api.call(
            "PUT", "/v1/memory/user/k", None, json={"value": who}, headers=as_(tokens[who])
        )
        assert put.json()["resolved_scope_id"] == who
    for who in ("7", "007"):
        read = api.call("GET", "/v1/memory/user/k", None, headers=as_(tokens[who])).json()
        assert (read["value"], read["resolved_scope_id"]) == (who, who)
    api.call("PUT", "/v1/memory/user/k", None, json={"value": "é"}, headers=as_(nfd))
    read = api.call("GET", "/v1/memory/user/k", None, headers=as_(tokens["Jos\u00e9"])).json()
    assert (read["value"], read["resolved_scope_id"]) == ("é", "Jos\u00e9")


def test_mem_13_session_scope_needs_a_session(api: Api) -> None:
    before = snapshot(api)
    body = {"messages": {"role": "user", "content": "x"}}
    refused = api.call("POST", "/v1/buffers/session/chat_history", json=body).json()
    assert refused["count"] == 0 and refused["resolved_scope_id"] == ""
    assert snapshot(api) == before


def test_mem_9_session_scope_view_loads_drive_appends(api: Api) -> None:
    sid = api.session()
    url = f"/v1/buffers/session/chat_history?session_id={sid}"
    body = {"messages": {"role": "user", "content": "x"}}
    assert api.call("POST", url, json=body).json()["count"] == 1
    before = snapshot(api)
    assert api.call("GET", url, "viewer").json()["count"] == 1
    assert api.call("POST", url, "viewer", json=body).status_code == 403
    assert api.call("DELETE", url, "viewer").status_code == 403
    assert (
        api.call("PUT", f"/v1/memory/session/k?session_id={sid}", "viewer", json={}).status_code
        == 403
    )
    assert api.call("GET", url, "bob").status_code == 404
    assert api.call("POST", url, "bob", json=body).status_code == 404
    assert snapshot(api) == before
    assert api.call("POST", url, "driver", json=body).json()["count"] == 2


def test_shared_scopes_need_permission(api: Api) -> None:
    before = snapshot(api)
    body = {"messages": {"role": "user", "content": "x"}}
    for scope in ("global", "workflow", "pipeline", "execution"):
        response = api.call("POST", f"/v1/buffers/{scope}/k", json=body)
        assert response.status_code == 403 and error_code(response) == "forbidden"
    assert snapshot(api) == before
    wf = api.call("POST", "/v1/buffers/workflow/k?workflow_id=wf1", "shared", json=body).json()
    assert wf["resolved_scope_id"] == "wf1" and wf["count"] == 1
    assert api.call("GET", "/v1/buffers/workflow/k?workflow_id=wf2", "shared").json()["count"] == 0
    glob = api.call("PUT", "/v1/memory/global/k", "shared", json={"value": {"x": 1}}).json()
    assert glob == {"success": True, "resolved_scope_id": "", "removed": 0}
    assert api.call("GET", "/v1/memory/global/k", "admin").json()["value"] == {"x": 1}


def test_shared_scopes_are_the_shared_memory_decision(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook that denies ``shared_memory`` refuses even a caller with ``memory:shared``."""
    from flowmem import access

    def no_shared(
        principal: access.Principal, action: str, session: object, decision: access.Decision
    ) -> access.Decision | None:
        return access.Decision(False, "closed", "hook") if action == "shared_memory" else None

    monkeypatch.setattr(access, "HOOKS", [no_shared])
    before = snapshot(api)
    response = api.call("PUT", "/v1/memory/global/k", "shared", json={"value": 1})
    assert response.status_code == 403 and error_code(response) == "forbidden"
    assert snapshot(api) == before


def test_unknown_scope_is_422(api: Api) -> None:
    response = api.call("GET", "/v1/buffers/planet/k")
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == "path.scope"


# --- memory records ---------------------------------------------------------------------


def test_memory_records(api: Api) -> None:
    assert api.call("GET", "/v1/memory/user/k").json() == {
        "value": None,
        "found": False,
        "resolved_scope_id": "alice",
    }
    assert api.call("GET", "/v1/memory/user/k?default=[1,2]").json()["value"] == [1, 2]
    assert api.call("GET", "/v1/memory/user/k?default=plain").json()["value"] == "plain"
    assert api.call("GET", "/v1/memory/user/k?default=").json()["value"] == ""
    written = api.call("PUT", "/v1/memory/user/k", json={"value": {"a": [1]}, "ttl": 60}).json()
    assert written["success"] is True
    assert api.call("GET", "/v1/memory/user/k").json()["value"] == {"a": [1]}
    assert api.call("GET", "/v1/memory/user/k", "bob").json()["found"] is False
    deleted = api.call("DELETE", "/v1/memory/user/k").json()
    assert deleted["success"] is True and deleted["removed"] == 1
    assert api.call("GET", "/v1/memory/user/k").json()["found"] is False


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/v1/memory/user/k", {"value": 1, "ttl": -1}),
        ("/v1/memory/user/k", {"value": 1, "ttl": 0}),
        ("/v1/memory/user/k", {"value": 1, "extra": True}),
    ],
)
def test_memory_record_bad_fields_are_422(api: Api, url: str, body: Any) -> None:
    before = snapshot(api)
    response = api.call("GET" if body is None else "PUT", url, json=body)
    assert response.status_code == 422
    assert response.json()["error"]["details"]
    assert snapshot(api) == before


def test_ttl_expires(memory_api: Api) -> None:
    now = [1_000.0]
    store = MemoryStore()
    tokens = make_tokens(store)
    with OneHopClient(create_app(store, clock=lambda: now[0])) as client:
        api = Api(client, store, tokens)
        api.call("PUT", "/v1/memory/user/k", json={"value": 1, "ttl": 10})
        assert api.call("GET", "/v1/memory/user/k").json()["found"] is True
        now[0] += 11
        assert api.call("GET", "/v1/memory/user/k").json()["found"] is False


# --- stateless --------------------------------------------------------------------------


def test_mem_5_normalize_and_check(api: Api) -> None:
    broken = [
        {"role": "tool", "content": "orphan", "tool_call_id": "x"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f"}]},
    ]
    checked = api.call("POST", "/v1/check", json=broken).json()
    assert checked["sendable"] is False and checked["violations"]
    normalized = api.call("POST", "/v1/normalize", json={"messages": broken}).json()
    assert normalized["dropped"] >= 1
    assert [m["role"] for m in normalized["messages"]] == ["system", "user", "assistant", "tool"]
    again = api.call("POST", "/v1/check", json={"messages": normalized["messages"]}).json()
    assert again == {"format": "rows", "sendable": True, "violations": []}


# --- logs ----------------------------------------------------------------------------------


def test_one_structured_log_line_per_request(
    memory_api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="flowmem.http"):
        memory_api.call("GET", "/v1/sessions")
        memory_api.call("GET", "/v1/sessions", None)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "flowmem.http"]
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("GET", "/v1/sessions", 200),
        ("GET", "/v1/sessions", 401),
    ]
    assert lines[0]["token_id"] and lines[1]["token_id"] is None
    assert all(isinstance(line["ms"], float) for line in lines)


def test_execution_context_of_http_memory_names_node() -> None:
    # the context the API builds carries node_id "http" so refusal warnings name it
    from flowmem.access import Principal
    from flowmem.api.fast.route import Target, scope_context
    from flowmem.sessions import SessionService

    store = MemoryStore()
    sessions = SessionService(store, MemoryService(store))
    context = scope_context(sessions, Principal(None), Target("user", "notes"), write=False)
    assert context == ExecutionContext(node_id="http")
