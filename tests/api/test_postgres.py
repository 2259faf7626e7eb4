"""The API in process over PostgreSQL (a smaller set; the route tests cover memory and SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from flowmem.api import create_app
from flowmem.store import Store, open_store
from tests.api.helpers import Api, make_tokens, snapshot
from tests.api.transport import OneHopClient

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_api(postgres_store_url: str) -> Iterator[Api]:
    store: Store = open_store(postgres_store_url)  # a schema migrated already, no rows
    tokens = make_tokens(store)
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        yield Api(client, store, tokens)
    store.close()


def test_sessions_turns_and_buffers_on_postgres(pg_api: Api) -> None:
    api = pg_api
    sid = api.session("alice")
    assert api.call("GET", f"/v1/sessions/{sid}", "bob").status_code == 404
    assert (
        api.call("POST", f"/v1/sessions/{sid}/turns", "viewer", json={"content": "x"}).status_code
        == 403
    )
    assert (
        api.call("POST", f"/v1/sessions/{sid}/turns", "admin", json={"content": "hi"}).status_code
        == 202
    )
    loaded = api.call("GET", f"/v1/buffers/session/chat_history?session_id={sid}").json()
    assert [m["content"] for m in loaded["messages"]] == ["hi"]
    assert loaded["resolved_scope_id"] == sid
    page = api.call("GET", "/v1/sessions?limit=1").json()
    assert page["pagination"] == {"total": 1, "limit": 1, "offset": 0, "has_more": False}
    assert (
        api.call(
            "PATCH", f"/v1/sessions/{sid}/messages/1", json={"role": "user", "content": "x"}
        ).status_code
        == 403
    )
    assert api.call("DELETE", f"/v1/sessions/{sid}/messages/1", "admin").status_code == 204
    assert api.call("DELETE", f"/v1/sessions/{sid}").status_code == 204


def test_mem_6_user_scope_refusal_on_postgres(pg_api: Api) -> None:
    before = snapshot(pg_api)
    body = {"messages": {"role": "user", "content": "x"}}
    refused = pg_api.call("POST", "/v1/buffers/user/k", "service", json=body).json()
    assert refused == {
        "messages": [],
        "count": 0,
        "appended": 0,
        "appended_any": False,
        "resolved_scope_id": "",
        "refused": "no_user_id",
    }
    assert snapshot(pg_api) == before


def test_mem_12_concurrent_http_appends_on_postgres(pg_api: Api) -> None:
    def append(n: int) -> int:
        response = pg_api.call(
            "POST",
            "/v1/buffers/user/k",
            json={"messages": {"role": "user", "content": f"m{n}"}, "return_messages": False},
        )
        assert response.status_code == 200, response.text
        return int(response.json()["appended"])

    # more clients than the worker's store threads (2 on PostgreSQL, decision 0037): they queue
    assert pg_api.client.app.state.services.pool.size == 2
    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(append, range(40))) == 40
    loaded = pg_api.call("GET", "/v1/buffers/user/k").json()
    assert sorted(m["content"] for m in loaded["messages"]) == sorted(f"m{n}" for n in range(40))


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        (
            "POST",
            "/v1/buffers/user/k",
            {"messages": {"role": "user", "content": "nul \u0000 here"}},
        ),
        ("PUT", "/v1/memory/user/k", {"value": {"text": "nul \u0000"}}),
        (
            "POST",
            "/v1/buffers/workflow/k?workflow_id=a%00b",
            {"messages": {"role": "user", "content": "x"}},
        ),
        ("GET", "/v1/memory/user/a%00b", None),
        ("POST", "/v1/sessions", {"name": "nul \u0000 name"}),
        ("POST", "/v1/sessions", {"agent": "nul \u0000"}),
        ("POST", "/v1/sessions", {"metadata": {"k\u0000": "v\u0000"}}),
    ],
)
def test_nul_characters_never_500_on_postgres(
    pg_api: Api, method: str, url: str, body: object
) -> None:
    who = "shared" if "workflow" in url else "alice"
    response = pg_api.call(method, url, who, json=body)
    assert response.status_code < 500, response.text


def test_nul_in_turn_content_never_500_on_postgres(pg_api: Api) -> None:
    sid = pg_api.session("alice")
    response = pg_api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "a\u0000b"})
    assert response.status_code < 500, response.text
