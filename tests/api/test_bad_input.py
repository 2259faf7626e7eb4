"""The bad-input list: each refused with its status and code, and the store left unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.api.gate import MAX_BODY_BYTES, MAX_DEPTH, nesting_depth_at_least, parse_body
from tests.api.helpers import Api, snapshot

JSON = {"Content-Type": "application/json"}
APPEND = "/v1/buffers/user/k"


def nested(depth: int) -> str:
    """A JSON text nesting ``depth`` levels: an object holding lists."""
    return '{"messages":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def seed(api: Api) -> str:
    """Put some data in ``api``'s store: a session of alice's with one turn, and a buffer; its id."""
    sid = api.session("alice")
    api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "hello"})
    api.call("POST", APPEND, json={"messages": {"role": "user", "content": "kept"}})
    return sid


@pytest.fixture(scope="module")
def seeded(module_memory_api: Api) -> tuple[Api, str]:
    """An app with some data in it, shared by the module's tests whose requests are all refused.

    Each of those asserts that its refusals changed nothing stored (``refused``), so none
    sees another's. The limits run before any route, so one backend suffices here; the
    route tests (``test_routes.py``) run on MemoryStore and SQLite both.
    """
    return module_memory_api, seed(module_memory_api)


@pytest.fixture
def fresh_seeded(memory_api: Api) -> tuple[Api, str]:
    """``seeded`` of the test's own: for a test that writes, or whose refusals count as failed sign-ins."""
    return memory_api, seed(memory_api)


def refused(api: Api, method: str, url: str, who: str | None = "alice", **kwargs: Any) -> Any:
    """Send a request that must be refused; assert that the store did not change."""
    before = snapshot(api)
    response = api.call(method, url, who, **kwargs)
    assert snapshot(api) == before
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) <= {"code", "message", "details"}
    return response


def test_invalid_json(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "POST", APPEND, content=b'{"messages": [', headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_json")


def test_invalid_utf8(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "POST", APPEND, content=b'{"messages": "\xff\xfe"}', headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_json")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type(seeded: tuple[Api, str], content_type: str | None) -> None:
    api, _ = seeded
    body = json.dumps({"messages": {"role": "user", "content": "x"}}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    response = refused(api, "POST", APPEND, content=body, headers=headers)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_a_body_over_the_body_limit(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    big = json.dumps({"messages": {"role": "user", "content": "x" * (MAX_BODY_BYTES + 1)}})
    response = refused(api, "POST", APPEND, content=big.encode(), headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")


def test_a_body_over_the_body_limit_streamed_without_length(seeded: tuple[Api, str]) -> None:
    api, _ = seeded

    def chunks() -> Iterator[bytes]:
        yield b'{"messages": {"role": "user", "content": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}}'

    response = refused(api, "POST", APPEND, content=chunks(), headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")


def test_lying_content_length_is_refused_first(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(
        api,
        "POST",
        APPEND,
        content=b"{}",
        headers={**JSON, "Content-Length": str(MAX_BODY_BYTES + 1)},
    )
    assert response.status_code in (400, 413)


def test_depth_100(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "POST", APPEND, content=nested(100).encode(), headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "body_too_deep")


def test_depth_limit_boundary(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    assert parse_body(nested(MAX_DEPTH).encode(), "application/json")[0] == (
        400,
        "body_too_deep",
        f"the body is nested {MAX_DEPTH} levels deep or more",
    )
    assert parse_body(nested(MAX_DEPTH - 1).encode(), "application/json") == (
        None,
        json.loads(nested(MAX_DEPTH - 1)),
    )
    # 63 levels pass the limits and reach validation (a list of lists is no message)
    response = refused(api, "POST", APPEND, content=nested(MAX_DEPTH - 1).encode(), headers=JSON)
    assert response.status_code == 422


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("[]", 1),
        ("{}", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[[[", "]]]"]', 1),
        ('{"k\\"[": [[]]}', 3),
        ("[" * 70 + "]" * 70, 70),
    ],
)
def test_depth_scanner_ignores_strings(text: str, depth: int) -> None:
    assert nesting_depth_at_least(text.encode(), depth)
    assert not nesting_depth_at_least(text.encode(), depth + 1)


@pytest.mark.parametrize("body", [b'"a string"', b"42", b"null", b"true"])
def test_body_not_object_or_array(seeded: tuple[Api, str], body: bytes) -> None:
    api, _ = seeded
    response = refused(api, "POST", APPEND, content=body, headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_body")


def test_string_where_list_expected(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "POST", APPEND, json={"messages": "hello"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert any(d["field"].startswith("body.messages") for d in error["details"])


def test_unknown_role(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(
        api,
        "POST",
        APPEND,
        json={"messages": [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "x"}]},
    )
    assert (response.status_code, response.json()["error"]["code"]) == (422, "unknown_role")


def test_ten_thousand_messages(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    messages = [{"role": "user", "content": f"m{i}"} for i in range(10_000)]
    response = refused(api, "POST", APPEND, json={"messages": messages})
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")


def test_huge_limit_is_clamped(seeded: tuple[Api, str]) -> None:
    api, sid = seeded
    sessions = api.call("GET", "/v1/sessions?limit=999999999999")
    assert sessions.status_code == 200
    assert sessions.json()["pagination"]["limit"] == 100
    messages = api.call("GET", f"/v1/sessions/{sid}/messages?limit=999999999999")
    assert messages.status_code == 200 and len(messages.json()["data"]) == 1


def test_absurd_limit_is_422(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "GET", "/v1/sessions?limit=" + "9" * 5000)
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_input")


@pytest.mark.parametrize("url", ["/v1/sessions?offset=-1", "/v1/sessions?limit=abc"])
def test_negative_offset_or_bad_number(seeded: tuple[Api, str], url: str) -> None:
    api, _ = seeded
    response = refused(api, "GET", url)
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_input")
    assert response.json()["error"]["details"][0]["field"].startswith("query.")


@pytest.mark.parametrize(
    "bad_id", ["not-a-uuid", "1", "7b0c9a8e-0000-4000-8000-00000000000g", "%00", "..%2f"]
)
def test_non_uuid_session_id(seeded: tuple[Api, str], bad_id: str) -> None:
    api, _ = seeded
    for method, suffix, body in [
        ("GET", "", None),
        ("DELETE", "", None),
        ("POST", "/turns", {"content": "x"}),
        ("GET", "/messages", None),
    ]:
        response = refused(api, method, f"/v1/sessions/{bad_id}{suffix}", json=body)
        assert response.status_code == 404, (method, suffix, response.text)
        assert response.json()["error"]["code"] == "not_found"


def test_another_users_session_id(seeded: tuple[Api, str]) -> None:
    api, sid = seeded
    for method, suffix, body in [
        ("GET", "", None),
        ("DELETE", "", None),
        ("POST", "/turns", {"content": "x"}),
        ("POST", "/reset", None),
        ("GET", "/messages", None),
        ("PATCH", "/messages/1", {"role": "user", "content": "x"}),
    ]:
        response = refused(api, method, f"/v1/sessions/{sid}{suffix}", "bob", json=body)
        assert response.status_code == 404, (method, suffix)
        assert response.json()["error"]["code"] == "not_found"
    response = refused(api, "GET", f"/v1/buffers/session/chat_history?session_id={sid}", "bob")
    assert response.status_code == 404


def test_revoked_token(fresh_seeded: tuple[Api, str]) -> None:
    api, sid = fresh_seeded
    for method, url, body in [
        ("GET", f"/v1/sessions/{sid}", None),
        ("POST", APPEND, {"messages": {"role": "user", "content": "x"}}),
        ("DELETE", f"/v1/sessions/{sid}", None),
    ]:
        response = refused(api, method, url, "revoked", json=body)
        assert (response.status_code, response.json()["error"]["code"]) == (401, "unauthenticated")


def test_unknown_fields_are_422(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "POST", "/v1/sessions", json={"name": "x", "owner": "bob"})
    assert response.status_code == 422
    response = refused(api, "POST", APPEND, json={"messages": [], "max_messages": -1})
    assert response.status_code == 422


def test_unknown_route_and_method(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    assert refused(api, "GET", "/v1/nothing").status_code == 404
    assert refused(api, "PUT", "/v1/sessions").status_code == 405


def test_repeated_query_parameter(seeded: tuple[Api, str]) -> None:
    api, _ = seeded
    response = refused(api, "GET", "/v1/sessions?limit=1&limit=2")
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_input")
    assert response.json()["error"]["details"][0]["field"] == "query.limit"


@pytest.mark.parametrize("who", ["revoked", None])
def test_unauthenticated_learns_only_401(fresh_seeded: tuple[Api, str], who: str | None) -> None:
    api, sid = fresh_seeded
    headers = {} if who else {"Authorization": "Bearer fm_unknown"}
    for method, url, body in [
        ("POST", APPEND, {"messages": "not a list"}),
        ("POST", APPEND, {"messages": [{"role": "user", "content": "x"}] * 1001}),
        ("POST", "/v1/sessions", {"owner": "me"}),
        ("GET", "/v1/sessions?offset=-1", None),
        ("GET", f"/v1/sessions/{sid}/messages?since=-5", None),
        ("PATCH", f"/v1/sessions/{sid}/messages/0", {"role": "user"}),
    ]:
        response = refused(api, method, url, who, json=body, headers=headers)
        assert response.status_code == 401, (method, url, response.text)
        assert response.json()["error"]["code"] == "unauthenticated"


def test_an_integral_number_with_a_fraction_is_the_integer_it_is(
    fresh_seeded: tuple[Api, str],
) -> None:
    api, _ = fresh_seeded
    body = {"messages": {"role": "user", "content": "windowed"}, "max_messages": 3.0}
    ok = api.call("POST", APPEND, json=body)
    assert ok.status_code == 200, ok.text
    for bad in (3.5, "3", True):
        response = refused(api, "POST", APPEND, json={**body, "max_messages": bad})
        assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_input")


# --- text that cannot be stored (issue 12): one code, 422 invalid_text, on every backend --

LONE = "\ud800"
# (method, url template, who, body): every place the issue found a 500
UNSTORABLE: list[tuple[str, str, str, Any]] = [
    ("POST", APPEND, "alice", {"messages": {"role": "user", "content": LONE}}),
    (
        "POST",
        APPEND,
        "alice",
        {"messages": {"role": "user", "content": "x", "metadata": {LONE: 1}}},
    ),
    ("POST", APPEND, "alice", {"messages": {"role": "tool", "content": "x", "tool_call_id": LONE}}),
    (
        "POST",
        APPEND,
        "alice",
        {"messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": LONE}]}]},
    ),
    ("PUT", "/v1/memory/user/k", "alice", {"value": LONE}),
    ("PUT", "/v1/memory/user/k", "alice", {"value": {LONE: [1]}}),
    ("POST", "/v1/sessions", "alice", {"name": "n", "metadata": {"k": LONE}}),
    ("POST", "/v1/sessions", "alice", {"name": LONE}),
    ("POST", "/v1/sessions/{sid}/turns", "alice", {"content": LONE}),
    ("POST", "/v1/normalize", "alice", {"messages": [{"role": "user", "content": LONE}]}),
    ("POST", "/v1/check", "alice", [{"role": "user", "content": LONE}]),
    ("PATCH", "/v1/sessions/{sid}/messages/1", "admin", {"role": "user", "content": LONE}),
    ("GET", '/v1/memory/user/k?default="\\ud800"', "alice", None),
    ("GET", '/v1/memory/user/k?default=[{{"\\udfff": 1}}]', "alice", None),
]


@pytest.mark.parametrize(
    "method,url,who,body", UNSTORABLE, ids=[f"{i}-{m}" for i, (m, _, _, _) in enumerate(UNSTORABLE)]
)
def test_unstorable_text_is_422_invalid_text_and_changes_nothing(
    api: Api, method: str, url: str, who: str, body: Any
) -> None:
    sid = api.session("alice")
    api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "hello"})
    content = None if body is None else json.dumps(body).encode("ascii")
    response = refused(api, method, url.format(sid=sid), who, content=content, headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_text")
    assert response.json()["error"]["details"][0]["field"].startswith(("body", "query.default"))


def test_unstorable_text_as_raw_bytes_is_invalid_json(api: Api) -> None:
    """The surrogate's own bytes (ED A0 80) are not UTF-8, so not a JSON body (the gate)."""
    body = '{"messages": {"role": "user", "content": "\ud800"}}'.encode("utf-8", "surrogatepass")
    response = refused(api, "POST", APPEND, content=body, headers=JSON)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_json")


def test_a_surrogate_pair_is_one_character_and_is_stored(api: Api) -> None:
    body = b'{"messages": {"role": "user", "content": "\\ud83d\\ude00 \\\\ud800"}, "return_messages": true}'
    response = api.call("POST", APPEND, content=body, headers=JSON)
    assert response.status_code == 200, response.text
    assert response.json()["messages"][-1]["content"] == "😀 \\ud800"  # an escaped backslash


@pytest.mark.parametrize("field", ["name", "agent"])
def test_a_session_name_or_agent_with_nul_is_refused_as_its_schema_says(seeded: tuple[Api, str], field: str) -> None:
    api, _ = seeded
    schema = api.call("GET", "/openapi.json").json()["components"]["schemas"]["SessionCreate"]
    assert schema["properties"][field].get("pattern") or any(
        "pattern" in option for option in schema["properties"][field].get("anyOf", [])
    )
    response = refused(api, "POST", "/v1/sessions", json={field: "a\u0000b"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"
    assert field in response.text
