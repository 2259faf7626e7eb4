"""The inspector's read-only routes: a session's access decisions, a LangGraph thread's checkpoints."""

from __future__ import annotations

import pytest

from flowmem.api import create_app
from flowmem.api.models import NO_NUL
from flowmem.store import open_store
from tests.api.helpers import Api, make_tokens
from tests.api.langgraph_thread import write_thread
from tests.api.transport import OneHopClient


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ("alice", {"view": True, "drive": True, "delete": True, "edit_messages": False}),
        ("viewer", {"view": True, "drive": False, "delete": False, "edit_messages": False}),
        ("driver", {"view": True, "drive": True, "delete": False, "edit_messages": False}),
        ("admin", {"view": True, "drive": True, "delete": True, "edit_messages": True}),
    ],
)
def test_access_answers_what_each_principal_may_do(
    api: Api, who: str, expected: dict[str, bool]
) -> None:
    sid = api.session("alice")
    answer = api.call("GET", f"/v1/sessions/{sid}/access", who)
    assert answer.status_code == 200, answer.text
    assert answer.json() == expected


def test_the_access_shown_is_the_access_enforced(api: Api) -> None:
    sid = api.session("alice")
    for who in ("viewer", "driver", "alice"):
        may = api.call("GET", f"/v1/sessions/{sid}/access", who).json()
        stop = api.call("POST", f"/v1/sessions/{sid}/stop", who)
        assert (stop.status_code == 200) == may["drive"], (who, stop.text)


def test_access_to_a_session_one_may_not_view_is_not_found(api: Api) -> None:
    sid = api.session("alice")
    for who in ("bob", "service"):
        answer = api.call("GET", f"/v1/sessions/{sid}/access", who)
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "not_found"
    assert api.call("GET", f"/v1/sessions/{sid}/access", None).status_code == 401


def test_a_session_no_checkpointer_wrote_has_no_checkpoints(api: Api) -> None:
    sid = api.session("alice")
    answer = api.call("GET", f"/v1/sessions/{sid}/checkpoints", "alice")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"data": [], "has_more": False}
    assert api.call("GET", f"/v1/sessions/{sid}/checkpoints", "bob").status_code == 404


def test_each_checkpoint_lists_the_thread_messages_it_held(api: Api) -> None:
    write_thread(api.store, "thread-a", "alice", ["first", "second"])
    answer = api.call("GET", "/v1/sessions/thread-a/checkpoints", "alice", params={"limit": 100})
    assert answer.status_code == 200, answer.text
    page = answer.json()
    assert not page["has_more"]
    lengths = [len(c["messages"].get("messages", [])) for c in page["data"]]
    assert lengths == sorted(lengths, reverse=True)  # newest first: the longest history
    newest = page["data"][0]["messages"]["messages"]
    assert [row["content"] for row in newest] == ["first", "answer 1", "second", "answer 3"]
    assert page["data"][0]["parent_id"] == page["data"][1]["checkpoint_id"]
    assert page["data"][0]["lines"] == {"messages": "langgraph"}
    line = api.call(
        "GET", "/v1/buffers/session/langgraph", "alice", params={"session_id": "thread-a"}
    ).json()["messages"]
    assert [row["content"] for row in line] == [row["content"] for row in newest]
    small = api.call("GET", "/v1/sessions/thread-a/checkpoints", "alice", params={"limit": 1})
    assert small.json()["has_more"] is True
    older = api.call(
        "GET",
        "/v1/sessions/thread-a/checkpoints",
        "alice",
        params={"limit": 1, "before": page["data"][0]["checkpoint_id"]},
    )
    assert older.json()["data"][0]["checkpoint_id"] == page["data"][1]["checkpoint_id"]
    assert api.call("GET", "/v1/sessions/thread-a/checkpoints", "bob").status_code == 404
    assert api.call("GET", "/v1/sessions/thread-a/checkpoints", "viewer").status_code == 200


def test_a_cursor_with_nul_is_refused(api: Api) -> None:
    sid = api.session("alice")
    answer = api.call("GET", f"/v1/sessions/{sid}/checkpoints", "alice", params={"before": "a\x00"})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_input"


@pytest.mark.postgres
def test_checkpoints_and_record_listing_on_postgres(postgres_db_url: str) -> None:
    store = open_store(postgres_db_url)
    try:
        tokens = make_tokens(store)
        write_thread(store, "thread-pg", "alice", ["first"])
        with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
            api = Api(client, store, tokens)
            page = api.call("GET", "/v1/sessions/thread-pg/checkpoints", "alice").json()
            newest = page["data"][0]["messages"]["messages"]
            assert [row["content"] for row in newest] == ["first", "answer 1"]
            for key, ttl in (("b", None), ("a", 60)):
                put = api.call(
                    "PUT", f"/v1/memory/user/{key}", "alice", json={"value": 1, "ttl": ttl}
                )
                assert put.status_code == 200, put.text
            listed = api.call("GET", "/v1/memory/user", "alice", params={"limit": 1}).json()
            assert [r["key"] for r in listed["data"]] == ["a"] and listed["next_start"]
            access = api.call("GET", "/v1/sessions/thread-pg/access", "viewer").json()
            assert access["view"] and not access["drive"]
    finally:
        store.close()


def test_a_nul_in_the_checkpoints_cursor_is_refused_as_the_schema_declares(api: Api) -> None:
    sid = api.session("alice")
    answer = api.call("GET", f"/v1/sessions/{sid}/checkpoints", "alice", params={"before": "a\x00"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_input"
    assert [d["field"] for d in error["details"]] == ["query.before"]
    route = api.client.get("/openapi.json").json()["paths"]["/v1/sessions/{session_id}/checkpoints"]
    declared = {p["name"]: p["schema"] for p in route["get"]["parameters"]}
    assert [t.get("pattern") for t in declared["before"]["anyOf"]] == [NO_NUL, None]
