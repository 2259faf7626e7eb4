"""``GET /v1/buffers/{scope}/{key}/repairs``: a buffer's repair log, read as the buffer is (issue 37 §2)."""

from __future__ import annotations

from typing import Any

from tests.api.helpers import Api


def _call(cid: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": cid, "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]}


def _heal(api: Api, url: str, cid: str, who: str = "alice") -> None:
    messages = [_call(cid), {"role": "user", "content": f"after {cid}"}]
    assert api.call("POST", url, who, json={"messages": messages}).status_code == 200


def test_mem_3_mem_10_the_log_is_read_newest_first_with_the_rows_it_wrote(api: Api) -> None:
    _heal(api, "/v1/buffers/user/chat", "c1")
    late = {"role": "tool", "tool_call_id": "c1", "content": "real"}
    api.call("POST", "/v1/buffers/user/chat", json={"messages": [late, late]})
    answer = api.call("GET", "/v1/buffers/user/chat/repairs")
    assert answer.status_code == 200
    body = answer.json()
    assert [(e["seq"], e["rule"], e["call_ids"], e["count"]) for e in body["repairs"]] == [
        (3, "MEM-1", ["c1"], 1),
        (2, "MEM-10", ["c1"], 1),
        (1, "MEM-3", ["c1"], 1),
    ]
    assert body["next_before"] is None and body["resolved_scope_id"] == "alice"
    rows = api.call("GET", "/v1/buffers/user/chat").json()["messages"]
    (where,) = body["repairs"][1]["positions"]
    assert rows[where]["content"] == "real" and body["repairs"][2]["positions"] == [where]


def test_mem_3_the_log_is_paged_with_next_before(api: Api) -> None:
    for i in range(3):
        _heal(api, "/v1/buffers/user/chat", f"c{i}")
    first = api.call("GET", "/v1/buffers/user/chat/repairs", params={"limit": 2}).json()
    assert [e["call_ids"] for e in first["repairs"]] == [["c2"], ["c1"]]
    older = api.call(
        "GET", "/v1/buffers/user/chat/repairs", params={"limit": 2, "before": first["next_before"]}
    ).json()
    assert [e["call_ids"] for e in older["repairs"]] == [["c0"]] and older["next_before"] is None


def test_the_log_of_a_session_buffer_needs_only_view_and_hides_it_from_others(api: Api) -> None:
    sid = api.session("alice")
    _heal(api, f"/v1/buffers/session/chat_history?session_id={sid}", "c1")
    url = f"/v1/buffers/session/chat_history/repairs?session_id={sid}"
    for who in ("alice", "viewer"):
        seen = api.call("GET", url, who)
        assert seen.status_code == 200 and seen.json()["repairs"][0]["call_ids"] == ["c1"]
    buffer = f"/v1/buffers/session/chat_history?session_id={sid}"
    assert api.call("GET", buffer, "bob").status_code == api.call("GET", url, "bob").status_code == 404
    assert api.call("GET", url, None).status_code == 401


def test_a_refused_scope_reads_an_empty_log(api: Api) -> None:
    answer = api.call("GET", "/v1/buffers/session/chat_history/repairs")  # no session_id (MEM-13)
    assert answer.status_code == 200
    assert answer.json()["repairs"] == [] and answer.json()["refused"] == "no_session_id"


def test_a_bad_page_is_422(api: Api) -> None:
    for params in ({"limit": 1001}, {"limit": -1}, {"before": -1}):
        assert api.call("GET", "/v1/buffers/user/chat/repairs", params=params).status_code == 422


def test_the_log_is_gone_after_the_buffer_is_cleared(api: Api) -> None:
    _heal(api, "/v1/buffers/user/chat", "c1")
    api.call("DELETE", "/v1/buffers/user/chat")
    assert api.call("GET", "/v1/buffers/user/chat/repairs").json()["repairs"] == []


def test_every_entry_has_the_shape_a_display_renders_and_an_eviction_its_kind(api: Api) -> None:
    _heal(api, "/v1/buffers/user/chat", "c1")
    more = [{"role": "user", "content": f"m{i}"} for i in range(3)]
    api.call("POST", "/v1/buffers/user/chat", json={"messages": more, "max_messages": 2})
    entries = api.call("GET", "/v1/buffers/user/chat/repairs").json()["repairs"]
    shape = {"seq", "at", "rule", "kind", "call_ids", "count", "positions", "archived"}
    assert all(set(entry) == shape for entry in entries)
    assert [(e["kind"], e["rule"], e["count"]) for e in entries] == [("evict", "window", 4), ("heal", "MEM-3", 1)]
    assert entries[0]["positions"] == [0, 1, 2, 3] and entries[0]["call_ids"] == ["c1"]


def test_mem_5_a_whole_provider_read_that_drops_is_noted_once_a_page_is_not(api: Api) -> None:
    orphan = {"role": "tool", "tool_call_id": "nobody", "content": "x"}
    answered = [_call("c1"), {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    rows = [*answered, {"role": "user", "content": "q"}, orphan, {"role": "assistant", "content": "a"}]
    api.call("POST", "/v1/buffers/user/chat", json={"messages": rows})
    for _ in range(3):  # a page polling a broken buffer
        read = api.call("GET", "/v1/buffers/user/chat", params={"format": "openai"})
        assert read.status_code == 200 and read.json()["dropped"] == 1
    paged = api.call("GET", "/v1/buffers/user/chat", params={"format": "openai", "last": 4})
    assert paged.json()["dropped"] == 2  # c1's result without its call: the page's own cut
    entries = api.call("GET", "/v1/buffers/user/chat/repairs").json()["repairs"]
    assert [(e["kind"], e["rule"], e["count"]) for e in entries] == [("normalize", "MEM-5", 1)]
    assert api.call("GET", "/v1/buffers/user/chat", params={"format": "openai"}).json()["count"] == 5


def test_mem_5_a_read_that_drops_nothing_notes_nothing(api: Api) -> None:
    api.call("POST", "/v1/buffers/user/chat", json={"messages": [{"role": "user", "content": "q"}]})
    assert api.call("GET", "/v1/buffers/user/chat", params={"format": "openai"}).json()["dropped"] == 0
    assert api.call("GET", "/v1/buffers/user/chat/repairs").json()["repairs"] == []


def test_mem_5_a_whole_read_of_several_pages_that_drops_is_noted(api: Api) -> None:
    """A read normalization repairs is normalized whole over its pages (decision 0106): noted too."""
    orphan = {"role": "tool", "tool_call_id": "nobody", "content": "x"}
    rows = [{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(700)]
    api.call("POST", "/v1/buffers/user/chat", json={"messages": [*rows[:350], orphan, *rows[350:]]})
    read = api.call("GET", "/v1/buffers/user/chat", params={"format": "openai"})
    assert read.status_code == 200 and read.json()["dropped"] == 1
    entries = api.call("GET", "/v1/buffers/user/chat/repairs").json()["repairs"]
    assert [(e["kind"], e["count"]) for e in entries] == [("normalize", 1)]
