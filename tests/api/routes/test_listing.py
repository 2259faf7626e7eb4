"""``GET /v1/memory/{scope}``: a scope's live records with their expiry, under the memory routes' scope rules."""

from __future__ import annotations

import time

import pytest

from flowmem.api.models import NO_NUL
from tests.api.helpers import Api


def _put(api: Api, key: str, who: str = "alice", ttl: float | None = None) -> None:
    answer = api.call("PUT", f"/v1/memory/user/{key}", who, json={"value": key, "ttl": ttl})
    assert answer.status_code == 200, answer.text


def test_lists_the_callers_records_in_key_order_with_their_expiry(api: Api) -> None:
    _put(api, "b")
    _put(api, "a", ttl=60)
    _put(api, "other", who="bob")
    answer = api.call("GET", "/v1/memory/user", "alice")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [r["key"] for r in body["data"]] == ["a", "b"]
    assert body["data"][0]["expires_at"] > 0 and body["data"][1]["expires_at"] is None
    assert body["resolved_scope_id"] == "alice" and body["next_start"] is None
    assert "refused" not in body


def test_pages_by_prefix_and_cursor(api: Api) -> None:
    for key in ("n.1", "n.2", "n.3", "z"):
        _put(api, key)
    first = api.call("GET", "/v1/memory/user", "alice", params={"prefix": "n.", "limit": 2}).json()
    assert [r["key"] for r in first["data"]] == ["n.1", "n.2"]
    rest = api.call(
        "GET", "/v1/memory/user", "alice", params={"prefix": "n.", "start": first["next_start"]}
    ).json()
    assert [r["key"] for r in rest["data"]] == ["n.3"] and rest["next_start"] is None


def test_an_expired_record_is_not_listed(api: Api) -> None:
    _put(api, "gone", ttl=0.001)
    _put(api, "kept")
    time.sleep(0.01)
    keys = [r["key"] for r in api.call("GET", "/v1/memory/user", "alice").json()["data"]]
    assert keys == ["kept"]


def test_a_refused_scope_lists_nothing_and_says_why(api: Api) -> None:
    _put(api, "a")
    service = api.call("GET", "/v1/memory/user", "service").json()
    assert service == {
        "data": [],
        "next_start": None,
        "resolved_scope_id": "",
        "refused": "no_user_id",
    }
    no_session = api.call("GET", "/v1/memory/session", "alice").json()
    assert no_session["refused"] == "no_session_id"


@pytest.mark.parametrize(("who", "status"), [("alice", 200), ("viewer", 200), ("bob", 404)])
def test_a_session_scope_lists_for_those_who_may_view_the_session(
    api: Api, who: str, status: int
) -> None:
    sid = api.session("alice")
    put = api.call("PUT", f"/v1/memory/session/notes?session_id={sid}", "alice", json={"value": 1})
    assert put.status_code == 200, put.text
    answer = api.call("GET", "/v1/memory/session", who, params={"session_id": sid})
    assert answer.status_code == status
    if status == 200:
        assert [r["key"] for r in answer.json()["data"]] == ["notes"]


def test_shared_scopes_need_the_shared_permission(api: Api) -> None:
    assert api.call("GET", "/v1/memory/global", "alice").status_code == 403
    assert api.call("GET", "/v1/memory/global", "shared").status_code == 200
    unknown = api.call("GET", "/v1/memory/bogus", "alice")
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_scope"
    assert api.call("GET", "/v1/memory/user", None).status_code == 401


@pytest.mark.parametrize("name", ["prefix", "start"])
def test_text_with_nul_is_refused(api: Api, name: str) -> None:
    answer = api.call("GET", "/v1/memory/user", "alice", params={name: "a\x00b"})
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["field"] == f"query.{name}"


@pytest.mark.parametrize(
    ("scope", "parameter"),
    [("workflow", "workflow_id"), ("pipeline", "pipeline_id"), ("execution", "execution_id")],
)
def test_a_shared_scope_lists_the_records_of_the_id_it_names(
    api: Api, scope: str, parameter: str
) -> None:
    """Each scope id parameter is its own query parameter (a shared ``Query`` registered only the first)."""
    for scope_id, key in (("one", "a"), ("two", "b")):
        put = api.call(
            "PUT",
            f"/v1/memory/{scope}/{key}",
            "shared",
            params={parameter: scope_id},
            json={"value": key},
        )
        assert put.status_code == 200, put.text
    listed = api.call("GET", f"/v1/memory/{scope}", "shared", params={parameter: "one"})
    assert listed.status_code == 200, listed.text
    assert [r["key"] for r in listed.json()["data"]] == ["a"]
    assert listed.json()["resolved_scope_id"] == "one"


@pytest.mark.parametrize("name", ["prefix", "start"])
def test_a_nul_in_a_listing_query_is_refused_as_the_schema_declares(api: Api, name: str) -> None:
    _put(api, "a")
    answer = api.call("GET", "/v1/memory/user", "alice", params={name: "a\x00b"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_input"
    assert [d["field"] for d in error["details"]] == [f"query.{name}"]
    listing = api.client.get("/openapi.json").json()["paths"]["/v1/memory/{scope}"]["get"]
    declared = {p["name"]: p["schema"] for p in listing["parameters"]}
    assert declared[name]["pattern"] == NO_NUL
