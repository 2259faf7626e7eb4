"""Compaction over HTTP: plan, apply with the caller's summary, read with the archive (issue 28 §2)."""

from __future__ import annotations

from typing import Any

from tests.api.helpers import Api, snapshot
from tests.store.archive.test_archive import history

PLAN = "/v1/buffers/user/k/compact/plan"
APPLY = "/v1/buffers/user/k/compact"


def _fill(api: Api, url: str = "/v1/buffers/user/k", who: str = "alice") -> list[dict[str, Any]]:
    assert api.call("POST", url, who, json={"messages": history(5)}).status_code == 200
    rows: list[dict[str, Any]] = api.call("GET", url, who).json()["messages"]
    return rows


def test_plan_then_apply_archives_the_planned_rows_behind_one_summary(api: Api) -> None:
    before = _fill(api)
    plan = api.call("GET", f"{PLAN}?keep_tokens=150").json()
    assert plan["plan"] and plan["archived"] == len(plan["messages"]) > 0
    assert plan["messages"] == before[: plan["archived"]] and plan["kept"] == len(before) - plan["archived"]
    unchanged = api.call("GET", "/v1/buffers/user/k").json()["messages"]
    assert unchanged == before  # a plan is a read
    done = api.call("POST", APPLY, json={"plan": plan["plan"], "summary": "what happened"})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["compacted"] and body["archived"] == plan["archived"] and body["first"] == 1
    assert body["summary"]["metadata"]["summary"]["archived"] == plan["archived"]
    live = api.call("GET", "/v1/buffers/user/k").json()
    assert live["messages"][0]["content"] == "what happened" and live["count"] == body["count"]
    whole = api.call("GET", "/v1/buffers/user/k?archived=true").json()
    assert whole["archived"] == plan["archived"] and whole["count"] == live["count"]
    assert whole["messages"] == [*before[: plan["archived"]], *live["messages"]]


def test_a_stale_plan_is_409_and_changes_nothing(api: Api) -> None:
    _fill(api)
    plan = api.call("GET", f"{PLAN}?keep_tokens=150").json()["plan"]
    assert api.call("POST", APPLY, json={"plan": plan, "summary": "first"}).status_code == 200
    before = api.call("GET", "/v1/buffers/user/k?archived=true").json()
    again = api.call("POST", APPLY, json={"plan": plan, "summary": "second"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "compaction_stale"
    assert api.call("GET", "/v1/buffers/user/k?archived=true").json() == before


def test_bad_requests_are_refused_and_change_nothing(api: Api) -> None:
    _fill(api)
    state = snapshot(api)
    assert api.call("GET", PLAN).status_code == 422  # keep_tokens is required
    small = api.call("GET", f"{PLAN}?keep_tokens=3")
    assert small.status_code == 422 and small.json()["error"]["code"] == "window_too_small"
    bad = api.call("POST", APPLY, json={"plan": "nope", "summary": "s"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_input"
    plan = api.call("GET", f"{PLAN}?keep_tokens=150").json()["plan"]
    empty = api.call("POST", APPLY, json={"plan": plan, "summary": ""})
    assert empty.status_code == 422
    tool = {"role": "tool", "tool_call_id": "c1", "content": "x"}
    assert api.call("POST", APPLY, json={"plan": plan, "summary": tool}).status_code == 422
    assert api.call("GET", "/v1/buffers/user/k?archived=true&last=2").status_code == 422
    assert api.call("GET", "/v1/buffers/user/k?archived=true&format=openai").status_code == 422
    assert snapshot(api) == state


def test_nothing_beyond_the_budget_is_no_plan(api: Api) -> None:
    _fill(api)
    plan = api.call("GET", f"{PLAN}?keep_tokens=100000").json()
    assert plan["plan"] is None and plan["archived"] == 0 and plan["messages"] == []


def test_mem_15_a_viewer_may_plan_but_only_a_driver_compacts(api: Api) -> None:
    sid = api.session("alice")
    url = f"/v1/buffers/session/chat_history?session_id={sid}"
    _fill(api, url)
    plan_url = f"/v1/buffers/session/chat_history/compact/plan?keep_tokens=150&session_id={sid}"
    apply_url = f"/v1/buffers/session/chat_history/compact?session_id={sid}"
    plan = api.call("GET", plan_url, "viewer")
    assert plan.status_code == 200
    state = snapshot(api)
    body = {"plan": plan.json()["plan"], "summary": "s"}
    assert api.call("POST", apply_url, "viewer", json=body).status_code == 403
    assert api.call("POST", apply_url, "bob", json=body).status_code == 404
    assert api.call("GET", plan_url, "bob").status_code == 404
    assert snapshot(api) == state
    assert api.call("POST", apply_url, "driver", json=body).json()["compacted"] is True
    read = api.call("GET", f"{url}&archived=true", "viewer").json()
    assert read["archived"] == plan.json()["archived"]


def test_a_refused_scope_plans_and_compacts_nothing(api: Api) -> None:
    _fill(api)
    state = snapshot(api)
    plan = api.call("GET", "/v1/buffers/session/k/compact/plan?keep_tokens=10")
    assert plan.status_code == 200 and plan.json()["refused"] == "no_session_id"
    done = api.call("POST", "/v1/buffers/user/k/compact", "service", json={"plan": f"1.{'0' * 64}", "summary": "s"})
    assert done.status_code == 200 and done.json()["refused"] == "no_user_id"
    assert done.headers["X-Flowmem-Refused"] == "no_user_id"
    archived = api.call("GET", "/v1/buffers/session/k?archived=true")
    assert archived.json()["refused"] == "no_session_id"
    assert snapshot(api) == state


REPLACE = "/v1/buffers/user/k/compact/replace"
COMPACTED_ITEMS: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first question"}]},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
]


def test_a_history_compacted_elsewhere_replaces_the_buffer_and_archives_every_row(api: Api) -> None:
    before = _fill(api)
    done = api.call("POST", REPLACE, json={"format": "responses", "messages": COMPACTED_ITEMS})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["compacted"] and body["archived"] == len(before) and body["count"] == 2
    assert (body["first"], body["last"]) == (1, len(before))
    whole = api.call("GET", "/v1/buffers/user/k?archived=true").json()
    assert whole["archived"] == len(before) and whole["messages"][: len(before)] == before
    assert whole["messages"][len(before)]["metadata"]["summary"]["archived"] == len(before)
    items = api.call("GET", "/v1/buffers/user/k?format=responses").json()["messages"]
    assert items[-1] == COMPACTED_ITEMS[-1]  # the opaque compaction item comes back as it went in


def test_a_compacted_history_into_an_empty_buffer_is_appended(api: Api) -> None:
    rows = [{"role": "user", "content": "summary so far"}]
    done = api.call("POST", REPLACE, json={"messages": rows})
    assert done.status_code == 200 and not done.json()["compacted"] and done.json()["count"] == 1
    assert api.call("GET", "/v1/buffers/user/k?archived=true").json()["archived"] == 0


def test_a_bad_compacted_history_is_refused_and_changes_nothing(api: Api) -> None:
    _fill(api)
    state = snapshot(api)
    empty = api.call("POST", REPLACE, json={"messages": []})
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "invalid_input"
    mismatch = api.call("POST", REPLACE, json={"messages": COMPACTED_ITEMS})  # items sent as rows
    assert mismatch.status_code == 422
    unknown = api.call("POST", REPLACE, json={"messages": [{"role": "user", "content": "x"}], "max_messages": 1})
    assert unknown.status_code == 422  # the body of an append is not this one's
    many = api.call("POST", REPLACE, json={"messages": [{"role": "user", "content": "x"}] * 1001})
    assert many.status_code == 413 and many.json()["error"]["code"] == "payload_too_large"
    assert snapshot(api) == state


def test_mem_15_only_a_driver_replaces_a_sessions_history(api: Api) -> None:
    sid = api.session("alice")
    url = f"/v1/buffers/session/chat_history?session_id={sid}"
    _fill(api, url)
    replace_url = f"/v1/buffers/session/chat_history/compact/replace?session_id={sid}"
    stored = api.call("GET", url).json()["count"]
    state = snapshot(api)
    body = {"format": "responses", "messages": COMPACTED_ITEMS}
    assert api.call("POST", replace_url, "viewer", json=body).status_code == 403
    assert api.call("POST", replace_url, "bob", json=body).status_code == 404
    refused = api.call("POST", "/v1/buffers/user/k/compact/replace", "service", json=body)
    assert refused.status_code == 200 and refused.json()["refused"] == "no_user_id"
    assert snapshot(api) == state
    assert api.call("POST", replace_url, "driver", json=body).json()["archived"] == stored
