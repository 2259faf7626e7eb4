"""``Idempotency-Key`` on every write route: a repeat answers the first answer and writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowmem.api import create_app
from flowmem.api.idempotency import REPLAYED
from flowmem.limits import Limits
from flowmem.store import Address, Idempotency, Store, open_store
from tests.api.helpers import Api, make_tokens
from tests.api.transport import OneHopClient

MSG = {"messages": {"role": "user", "content": "hello"}}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def twice(api: Api, method: str, url: str, who: str = "alice", **kwargs: Any) -> tuple[Any, Any]:
    """Send one keyed request twice; return both responses."""
    headers = {**keyed("key-1"), **kwargs.pop("headers", {})}
    first = api.call(method, url, who, headers=headers, **kwargs)
    second = api.call(method, url, who, headers=headers, **kwargs)
    return first, second


def assert_replayed(first: Any, second: Any) -> None:
    assert 200 <= first.status_code < 300, first.text
    assert REPLAYED not in first.headers
    assert second.status_code == first.status_code
    assert second.content == first.content
    assert second.headers[REPLAYED] == "true"


def test_the_same_key_and_body_twice_appends_once_and_answers_the_same(api: Api) -> None:
    first, second = twice(api, "POST", "/v1/buffers/user/chat", json=MSG)
    assert_replayed(first, second)
    assert first.json()["appended"] == 1
    assert api.store.count(Address("user", "alice", "chat")) == 1


def test_without_a_key_a_repeat_appends_again(api: Api) -> None:
    for _ in range(2):
        assert api.call("POST", "/v1/buffers/user/chat", json=MSG).status_code == 200
    assert api.store.count(Address("user", "alice", "chat")) == 2


def test_the_same_key_with_another_body_is_refused_and_writes_nothing(api: Api) -> None:
    assert api.call("POST", "/v1/buffers/user/chat", headers=keyed("k"), json=MSG).status_code == 200
    other = {"messages": {"role": "user", "content": "something else"}}
    refused = api.call("POST", "/v1/buffers/user/chat", headers=keyed("k"), json=other)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    # another path or query is another request too
    elsewhere = api.call("POST", "/v1/buffers/user/notes", headers=keyed("k"), json=MSG)
    assert elsewhere.json()["error"]["code"] == "idempotency_key_reused"
    assert api.store.count(Address("user", "alice", "chat")) == 1
    assert api.store.count(Address("user", "alice", "notes")) == 0


def test_spacing_and_key_order_of_the_body_do_not_change_the_request(api: Api) -> None:
    body = '{"messages": {"role": "user", "content": "hi"}, "max_messages": 0}'
    reordered = '{"max_messages":0,"messages":{"content":"hi","role":"user"}}'
    headers = {**keyed("k"), "Content-Type": "application/json"}
    first = api.call("POST", "/v1/buffers/user/chat", headers=headers, content=body)
    second = api.call("POST", "/v1/buffers/user/chat", headers=headers, content=reordered)
    assert_replayed(first, second)


def test_another_principal_with_the_same_key_is_independent(api: Api) -> None:
    for who in ("alice", "bob", "admin"):
        response = api.call("POST", "/v1/buffers/user/chat", who, headers=keyed("same"), json=MSG)
        assert response.status_code == 200, response.text
        assert REPLAYED not in response.headers
        assert response.json()["appended"] == 1
    # a service principal's keys are its token's
    for who in ("service", "bob"):
        created = api.call("POST", "/v1/sessions", who, headers=keyed("sessions"), json={})
        assert created.status_code == 201 and REPLAYED not in created.headers
    assert api.call("GET", "/v1/sessions", "admin").json()["pagination"]["total"] == 2


@pytest.mark.parametrize(
    "value",
    [b"", b"x" * 256, "caf\u00e9".encode(), b"tab\there", b"nl\x7f"],
    ids=["empty", "too-long", "not-ascii", "tab", "del"],
)
def test_an_unusable_key_is_refused_with_its_code(api: Api, value: bytes) -> None:
    response = api.client.post(
        "/v1/buffers/user/chat",
        headers=[(b"authorization", f"Bearer {api.tokens['alice']}".encode()), (b"idempotency-key", value)],
        json=MSG,
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_idempotency_key"
    assert api.store.count(Address("user", "alice", "chat")) == 0


def test_a_key_of_255_printable_characters_is_accepted(api: Api) -> None:
    key = ("A ~!" * 64)[:255]
    first, second = (
        api.call("PUT", "/v1/memory/user/n", headers=keyed(key), json={"value": 1}) for _ in range(2)
    )
    assert_replayed(first, second)


def test_a_refused_write_records_no_key_and_may_be_retried(memory_api: Api) -> None:
    api = memory_api
    bad = api.call("POST", "/v1/buffers/user/chat", headers=keyed("k"), json={"messages": 5})
    assert bad.status_code == 422
    good = api.call("POST", "/v1/buffers/user/chat", headers=keyed("k"), json=MSG)
    assert good.status_code == 200 and REPLAYED not in good.headers


@dataclass
class Route:
    """A write route: how to set it up (returns the request) and what it changed."""

    name: str
    request: Callable[[Api], tuple[str, str, str, dict[str, Any] | None]]


def _session(api: Api) -> str:
    return api.session("alice")


def _with_turn(api: Api) -> str:
    sid = api.session("alice")
    assert api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "hi"}).status_code == 202
    return sid


ROUTES = [
    Route("append", lambda api: ("POST", "/v1/buffers/user/chat", "alice", MSG)),
    Route("clear", lambda api: ("DELETE", "/v1/buffers/user/chat", "alice", None)),
    Route("pop last", lambda api: ("DELETE", "/v1/buffers/user/chat/last", "alice", None)),
    Route("record write", lambda api: ("PUT", "/v1/memory/user/n", "alice", {"value": [1]})),
    Route("record delete", lambda api: ("DELETE", "/v1/memory/user/n", "alice", None)),
    Route("session create", lambda api: ("POST", "/v1/sessions", "alice", {"name": "x"})),
    Route(
        "session delete",
        lambda api: ("DELETE", f"/v1/sessions/{_session(api)}", "alice", None),
    ),
    Route(
        "turn",
        lambda api: ("POST", f"/v1/sessions/{_session(api)}/turns", "alice", {"content": "hi"}),
    ),
    Route("stop", lambda api: ("POST", f"/v1/sessions/{_session(api)}/stop", "alice", None)),
    Route("reset", lambda api: ("POST", f"/v1/sessions/{_with_turn(api)}/reset", "alice", None)),
    Route(
        "message edit",
        lambda api: (
            "PATCH",
            f"/v1/sessions/{_with_turn(api)}/messages/1",
            "admin",
            {"role": "user", "content": "edited"},
        ),
    ),
    Route(
        "message delete",
        lambda api: ("DELETE", f"/v1/sessions/{_with_turn(api)}/messages/1", "admin", None),
    ),
    Route("user erase", lambda api: ("DELETE", "/v1/users/bob", "admin", None)),
    Route(
        "compact",
        lambda api: ("POST", "/v1/buffers/user/long/compact", "alice", {"plan": _plan(api), "summary": "s"}),
    ),
    Route(
        "compact replace",
        lambda api: ("POST", "/v1/buffers/user/chat/compact/replace", "alice", {"messages": [{"role": "user", "content": "gist"}]}),
    ),
]


def _plan(api: Api) -> str:
    """A compaction plan of a buffer long enough to compact (issue 28 §2)."""
    rows = [{"role": "user", "content": f"question {i} " * 40} for i in range(6)]
    api.call("POST", "/v1/buffers/user/long", json={"messages": rows})
    plan: str = api.call("GET", "/v1/buffers/user/long/compact/plan?keep_tokens=150").json()["plan"]
    return plan


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_every_write_route_answers_a_repeat_with_the_first_answer(api: Api, route: Route) -> None:
    api.call("PUT", "/v1/memory/user/n", json={"value": 0})  # something to delete
    api.call("POST", "/v1/buffers/user/chat", json=MSG)  # something to clear
    method, url, who, body = route.request(api)
    first, second = twice(api, method, url, who, json=body)
    assert_replayed(first, second)


def test_a_repeated_session_create_creates_one_session(api: Api) -> None:
    first, second = twice(api, "POST", "/v1/sessions", json={"name": "x"})
    assert_replayed(first, second)
    assert first.json()["id"] == second.json()["id"]
    assert api.call("GET", "/v1/sessions").json()["pagination"]["total"] == 1


def test_a_repeated_turn_writes_one_message(api: Api) -> None:
    sid = api.session("alice")
    first, second = twice(api, "POST", f"/v1/sessions/{sid}/turns", json={"content": "hi"})
    assert_replayed(first, second)
    assert first.json()["turn_id"] == second.json()["turn_id"]
    messages = api.call("GET", f"/v1/sessions/{sid}/messages").json()["data"]
    assert [m["content"] for m in messages] == ["hi"]


def test_a_repeated_delete_answers_the_first_answer_not_404(api: Api) -> None:
    sid = api.session("alice")
    first, second = twice(api, "DELETE", f"/v1/sessions/{sid}")
    assert_replayed(first, second)
    assert first.status_code == 204
    assert api.call("DELETE", f"/v1/sessions/{sid}").status_code == 404  # no key: a new request


def test_a_repeat_while_the_first_is_in_flight_is_409(api: Api) -> None:
    sid = api.session("alice")
    url = f"/v1/sessions/{sid}/stop"
    assert api.call("POST", url, headers=keyed("k")).status_code == 200
    stored = api.store.get_idempotency("user:alice", "k", 0.0)
    assert stored is not None
    # another key claimed by the same request, not answered yet (its server is still on it)
    claim = Idempotency("user:alice", "k2", stored.fingerprint, None, lambda out: (0, ""))
    assert api.store.claim_idempotency(claim, 0.0) is None
    busy = api.call("POST", url, headers=keyed("k2"))
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "idempotency_key_in_flight"


def test_a_failed_claimed_write_releases_its_key(api: Api) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    gone = api.call("DELETE", f"/v1/sessions/{missing}", headers=keyed("k"))
    assert gone.status_code == 404
    assert api.store.get_idempotency("user:alice", "k", 0.0) is None


@pytest.fixture
def clocked() -> Iterator[tuple[Api, list[float]]]:
    """The app over a MemoryStore with a settable clock and keys kept 60 s."""
    now = [1000.0]
    store: Store = open_store("memory://")
    tokens = make_tokens(store)
    app = create_app(store, clock=lambda: now[0], limits=Limits(idempotency_seconds=60))
    with OneHopClient(app, raise_server_exceptions=False) as client:
        yield Api(client, store, tokens), now


def test_a_key_expires_after_its_retention_and_is_purged(
    clocked: tuple[Api, list[float]],
) -> None:
    api, now = clocked
    first, second = twice(api, "POST", "/v1/buffers/user/chat", json=MSG)
    assert_replayed(first, second)
    now[0] += 59
    assert api.call("POST", "/v1/buffers/user/chat", headers=keyed("key-1"), json=MSG).headers[
        REPLAYED
    ] == "true"
    assert api.store.purge_expired(now[0]) == 0
    assert api.store.purge_expired(now[0] + 1) == 1  # the key, at its expiry
    now[0] += 1
    again = api.call("POST", "/v1/buffers/user/chat", headers=keyed("key-1"), json=MSG)
    assert again.status_code == 200 and REPLAYED not in again.headers
    assert api.store.count(Address("user", "alice", "chat")) == 2


def test_retention_is_a_limit_read_from_the_environment() -> None:
    assert Limits().idempotency_seconds == 86_400
    assert Limits.from_env({"FLOWMEM_IDEMPOTENCY_SECONDS": "3600"}).idempotency_seconds == 3600


def test_erasing_a_user_forgets_their_keys(api: Api) -> None:
    first = api.call("PUT", "/v1/memory/user/n", headers=keyed("k"), json={"value": "secret"})
    assert first.status_code == 200
    assert api.call("DELETE", "/v1/users/alice", "admin").status_code == 200
    assert api.store.get_idempotency("user:alice", "k", 0.0) is None
    fresh = make_tokens(api.store)  # a new token for the same user id
    again = api.client.put(
        "/v1/memory/user/n",
        headers={"Authorization": f"Bearer {fresh['alice']}", **keyed("k")},
        json={"value": "secret"},
    )
    assert again.status_code == 200 and REPLAYED not in again.headers


def test_the_openapi_document_declares_the_header_on_write_routes(memory_api: Api) -> None:
    paths = memory_api.client.get("/openapi.json").json()["paths"]
    declared = {
        (method.upper(), path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
    }
    assert ("POST", "/v1/buffers/{scope}/{key}") in declared
    assert ("POST", "/v1/sessions/{session_id}/turns") in declared
    assert ("DELETE", "/v1/users/{user_id}") in declared
    assert ("GET", "/v1/buffers/{scope}/{key}") not in declared
    assert len(declared) == len(ROUTES) == 15


def test_a_key_without_a_path_in_the_store_is_unchanged_by_reads(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/k.db")
    tokens = make_tokens(store)
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        api = Api(client, store, tokens)
        read = api.call("GET", "/v1/memory/user/n", headers=keyed("k"))
        assert read.status_code == 200
        assert store.get_idempotency("user:alice", "k", 0.0) is None
    store.close()


def _concurrent_repeats(api: Api) -> None:
    """Eight copies of one keyed append at once: one row, one first answer, seven repeats of it."""
    url = "/v1/buffers/user/chat"

    def send(_: int) -> Any:
        return api.call("POST", url, headers=keyed("together"), json=MSG)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert len({a.content for a in answers}) == 1
    assert sum(REPLAYED not in a.headers for a in answers) == 1
    assert api.store.count(Address("user", "alice", "chat")) == 1


def test_concurrent_repeats_append_once(api: Api) -> None:
    _concurrent_repeats(api)


@pytest.fixture
def pg_api(postgres_store_url: str) -> Iterator[Api]:
    store: Store = open_store(postgres_store_url)  # a schema migrated already, no rows
    tokens = make_tokens(store)
    with OneHopClient(create_app(store), raise_server_exceptions=False) as client:
        yield Api(client, store, tokens)
    store.close()


@pytest.mark.postgres
def test_concurrent_repeats_append_once_on_postgres(pg_api: Api) -> None:
    _concurrent_repeats(pg_api)


@pytest.mark.postgres
@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_every_write_route_answers_a_repeat_with_the_first_answer_on_postgres(
    pg_api: Api, route: Route
) -> None:
    test_every_write_route_answers_a_repeat_with_the_first_answer(pg_api, route)


def test_a_repeated_pop_removes_one_row(api: Api) -> None:
    for text in ("one", "two"):
        api.call("POST", "/v1/buffers/user/chat", json={"messages": [{"role": "user", "content": text}]})
    first, second = twice(api, "DELETE", "/v1/buffers/user/chat/last", "alice")
    assert_replayed(first, second)
    assert first.json()["message"]["content"] == "two"
    rows = api.call("GET", "/v1/buffers/user/chat").json()["messages"]
    assert [row["content"] for row in rows] == ["one"]


def test_a_repeated_compact_replace_archives_once(api: Api) -> None:
    api.call("POST", "/v1/buffers/user/chat", json=MSG)
    body = {"messages": [{"role": "user", "content": "gist"}]}
    first, second = twice(api, "POST", "/v1/buffers/user/chat/compact/replace", "alice", json=body)
    assert_replayed(first, second)
    whole = api.call("GET", "/v1/buffers/user/chat?archived=true").json()
    assert whole["archived"] == 1 and whole["count"] == 1  # the first row archived once, not the gist
