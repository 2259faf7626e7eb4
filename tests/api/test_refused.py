"""MEM-7 over HTTP: a refused scope answers the neutral result *and* says which refusal (decision 0047).

The neutral shape is unchanged but for one key, ``refused``, present only on a
refusal, and the same code in the ``X-Flowmem-Refused`` header; nothing is stored.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.helpers import Api, snapshot

HEADER = "X-Flowmem-Refused"
ROW = {"role": "user", "content": "hi"}

# (method, url, body, the neutral answer without ``refused``)
SESSION_CALLS: list[tuple[str, str, Any, dict[str, Any]]] = [
    (
        "POST",
        "/v1/buffers/session/chat",
        {"messages": ROW},
        {"messages": [], "count": 0, "appended": 0, "appended_any": False, "resolved_scope_id": ""},
    ),
    (
        "GET",
        "/v1/buffers/session/chat",
        None,
        {
            "messages": [],
            "count": 0,
            "appended": 0,
            "appended_any": False,
            "resolved_scope_id": "",
            "next_before": None,
        },
    ),
    ("GET", "/v1/memory/session/k", None, {"value": None, "found": False, "resolved_scope_id": ""}),
    ("PUT", "/v1/memory/session/k", {"value": 1}, {"success": False, "resolved_scope_id": "", "removed": 0}),
    ("DELETE", "/v1/memory/session/k", None, {"success": False, "resolved_scope_id": "", "removed": 0}),
    ("DELETE", "/v1/buffers/session/chat", None, {"success": False, "resolved_scope_id": "", "removed": 0}),
    (
        "DELETE",
        "/v1/buffers/session/chat/last",
        None,
        {"message": None, "success": False, "resolved_scope_id": "", "removed": 0},
    ),
]


@pytest.mark.parametrize(
    ("method", "url", "body", "neutral"),
    SESSION_CALLS,
    ids=[f"{m} {u}" for m, u, _, _ in SESSION_CALLS],
)
def test_mem_7_a_session_call_without_session_id_names_its_refusal(
    api: Api, method: str, url: str, body: Any, neutral: dict[str, Any]
) -> None:
    api.call("POST", "/v1/buffers/user/chat", json={"messages": ROW})
    before = snapshot(api)
    answer = api.call(method, url, json=body) if body is not None else api.call(method, url)
    assert answer.status_code == 200
    assert answer.json() == {**neutral, "refused": "no_session_id"}
    assert answer.headers[HEADER] == "no_session_id"
    assert snapshot(api) == before


def test_mem_7_a_keyed_refused_write_and_its_repeat_name_the_refusal(api: Api) -> None:
    key = {"Idempotency-Key": "refused-1"}
    for _ in range(2):  # a refusal stores nothing, the key included: the repeat is refused again
        answer = api.call("POST", "/v1/buffers/session/chat", json={"messages": ROW}, headers=key)
        assert answer.json()["refused"] == "no_session_id"
        assert answer.headers[HEADER] == "no_session_id"
    popped = [api.call("DELETE", "/v1/buffers/session/chat/last", headers={"Idempotency-Key": "p"}) for _ in range(2)]
    assert popped[1].headers.get("Idempotent-Replayed") == "true"  # a pop claims its key first
    assert [p.headers[HEADER] for p in popped] == ["no_session_id", "no_session_id"]


def test_mem_7_a_user_scope_call_of_a_service_token_is_no_user_id(api: Api) -> None:
    before = snapshot(api)
    for method, url, body in (
        ("POST", "/v1/buffers/user/chat", {"messages": ROW}),
        ("GET", "/v1/buffers/user/chat?format=openai", None),
        ("GET", "/v1/memory/user/k", None),
        ("PUT", "/v1/memory/user/k", {"value": 1}),
    ):
        answer = api.call(method, url, "service", json=body)
        assert answer.status_code == 200
        assert (answer.json()["refused"], answer.headers[HEADER]) == ("no_user_id", "no_user_id")
    assert snapshot(api) == before


def test_an_answer_that_is_not_refused_has_no_refused_key_nor_header(api: Api) -> None:
    sid = api.session("alice")
    answers = [
        api.call("POST", f"/v1/buffers/session/chat_history?session_id={sid}", json={"messages": ROW}),
        api.call("GET", f"/v1/buffers/session/chat_history?session_id={sid}"),
        api.call("GET", "/v1/memory/user/k"),
        api.call("PUT", "/v1/memory/user/k", json={"value": None}),
        api.call("GET", "/v1/memory/user/k"),
    ]
    for answer in answers:
        assert answer.status_code == 200
        assert "refused" not in answer.json() and HEADER not in answer.headers
