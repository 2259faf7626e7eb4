"""``DELETE /v1/buffers/{scope}/{key}/last``: remove and return a buffer's last message."""

from __future__ import annotations

from flowmem.store import Address
from tests.api.helpers import Api, snapshot

ROWS = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]


def test_pop_returns_the_last_row_until_the_buffer_is_empty(api: Api) -> None:
    api.call("POST", "/v1/buffers/user/k", json={"messages": ROWS})
    first = api.call("DELETE", "/v1/buffers/user/k/last")
    assert first.status_code == 200
    body = first.json()
    assert body["message"]["content"] == "b" and body["message"]["role"] == "assistant"
    assert (body["success"], body["removed"], body["resolved_scope_id"]) == (True, 1, "alice")
    assert api.call("DELETE", "/v1/buffers/user/k/last").json()["message"]["content"] == "a"
    empty = api.call("DELETE", "/v1/buffers/user/k/last").json()
    assert empty == {"success": True, "resolved_scope_id": "alice", "removed": 0, "message": None}
    assert api.store.load(Address("user", "alice", "k")) == []


def test_a_refused_scope_pops_nothing(api: Api) -> None:
    api.call("POST", "/v1/buffers/user/k", json={"messages": ROWS})
    before = snapshot(api)
    refused = api.call("DELETE", "/v1/buffers/session/k/last")  # no session_id (MEM-13)
    assert refused.status_code == 200
    assert refused.json() == {
        "success": False,
        "resolved_scope_id": "",
        "removed": 0,
        "message": None,
        "refused": "no_session_id",
    }
    assert refused.headers["X-Flowmem-Refused"] == "no_session_id"
    service = api.call("DELETE", "/v1/buffers/user/k/last", "service")  # no user (MEM-6)
    assert service.json()["success"] is False
    assert service.json()["refused"] == "no_user_id"
    assert snapshot(api) == before


def test_pop_in_a_session_needs_drive(api: Api) -> None:
    sid = api.session("alice")
    url = f"/v1/buffers/session/chat_history?session_id={sid}"
    api.call("POST", url, json={"messages": ROWS})
    before = snapshot(api)
    assert api.call("DELETE", f"/v1/buffers/session/chat_history/last?session_id={sid}", "viewer").status_code == 403
    assert api.call("DELETE", f"/v1/buffers/session/chat_history/last?session_id={sid}", "bob").status_code == 404
    assert api.call("DELETE", f"/v1/buffers/session/chat_history/last?session_id={sid}", None).status_code == 401
    assert snapshot(api) == before
    popped = api.call("DELETE", f"/v1/buffers/session/chat_history/last?session_id={sid}", "driver")
    assert popped.json()["message"]["content"] == "b"


def test_pop_while_the_session_runs_a_turn_answers_409_and_removes_nothing(api: Api) -> None:
    """Issue 24 §2: the running turn's question is the last row; pop must not take it."""
    sid = api.session("alice")
    url = f"/v1/buffers/session/chat_history?session_id={sid}"
    api.call("POST", url, json={"messages": ROWS})
    assert api.store.set_session_status(sid, "running")
    before = snapshot(api)
    answer = api.call("DELETE", f"/v1/buffers/session/chat_history/last?session_id={sid}")
    assert answer.status_code == 409, answer.text
    assert answer.json()["error"]["code"] == "conflict"
    assert snapshot(api) == before
    assert api.store.set_session_status(sid, "completed")
    done = api.call("DELETE", f"/v1/buffers/session/chat_history/last?session_id={sid}")
    assert done.json()["message"]["content"] == "b"
