"""Provider formats over HTTP (issue 13 §6): appends, buffer reads, check and normalize.

A corpus history (``tests/corpus/<provider>/*.json``) appended with its format and
read back in it is its normalized payload (the payload itself when sendable), on
SQLite and PostgreSQL; other formats report what they leave out; check and
normalize detect the format; every refusal leaves the buffer as it was.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import check_sendable, normalize
from flowmem.formats import FORMATS, detect_format, read_document, write_document
from tests.api.conftest import app_over
from tests.api.helpers import Api
from tests.corpus.test_corpus import FILES, IDS, assert_valid, history, load

URL = "/v1/buffers/user/chat"
THINKING = Path(__file__).parents[1] / "corpus" / "anthropic" / "thinking_parallel_tool_use.json"
WEB_SEARCH = Path(__file__).parents[1] / "corpus" / "responses" / "web_search_call.json"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The app over SQLite and over PostgreSQL (a migrated schema of its own, no rows)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/api.db"
    else:
        url = request.getfixturevalue("postgres_store_url")  # migrated already, no rows
    with app_over(url) as app:
        yield app


def append_body(provider: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The append body of a corpus payload: its history with its format (Anthropic's system too)."""
    if provider == "openai":
        return {"format": provider, "messages": payload["messages"]}
    if provider == "responses":
        return {"format": provider, "messages": payload["input"]}
    if provider == "gemini":
        return {"format": provider, **{"messages" if k == "contents" else k: v for k, v in history(payload, provider).items()}}
    return {"format": provider, **history(payload, provider)}


def read_back(api: Api, fmt: str, url: str = URL, **params: Any) -> dict[str, Any]:
    """GET a buffer in ``fmt``; the answer's history spelled as ``write_document`` spells it."""
    response = api.call("GET", url, params={"format": fmt, **params})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert answer["format"] == fmt
    return answer


def written(fmt: str, answer: dict[str, Any]) -> Any:
    """The history of a read answer in ``write_document``'s spelling."""
    if fmt == "gemini":
        instruction = answer["system_instruction"]
        contents = {"contents": answer["messages"]}
        return contents if instruction is None else {"system_instruction": instruction, **contents}
    if fmt != "anthropic":
        return answer["messages"]
    system = answer["system"]
    return {"messages": answer["messages"]} if system is None else {"system": system, "messages": answer["messages"]}  # fmt: skip


def normalized_payload(provider: str, payload: dict[str, Any]) -> Any:
    """What a history appended as is and read back must be: its normalized form in its format."""
    rows = read_document(provider, payload)
    return write_document(provider, normalize(rows, keep_content=True).messages)


def assert_corpus_round_trip(api: Api, path: Path, url: str) -> None:
    entry = load(path)
    provider, payload = entry["provider"], entry["payload"]
    before = copy.deepcopy(payload)
    response = api.call("POST", url, json=append_body(provider, payload))
    assert response.status_code == 200, (path.name, response.text)
    answer = read_back(api, provider, url)
    got = written(provider, answer)
    assert_valid(provider, got)
    assert check_sendable(read_document(provider, got)) == [], path.name
    if entry["sendable"]:
        assert got == history(payload, provider), path.name
        assert answer["not_carried"] == {} and answer["dropped"] == 0, path.name
    else:
        assert got == normalized_payload(provider, payload), path.name
    assert payload == before
    rows = api.call("GET", url).json()["messages"]  # the stored rows: parts, never strings
    for sent, row in zip(read_document(provider, payload), rows, strict=False):
        if isinstance(sent["content"], list):
            assert isinstance(row["content"], list), path.name


# --- appends and reads in a provider's format ---------------------------------------------


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_a_corpus_history_appended_in_its_format_reads_back_as_its_normalized_payload(
    memory_api: Api, path: Path
) -> None:
    assert_corpus_round_trip(memory_api, path, URL)


def test_every_corpus_history_round_trips_over_http_on_sqlite_and_postgres(db_api: Api) -> None:
    for number, path in enumerate(FILES):
        assert_corpus_round_trip(db_api, path, f"/v1/buffers/user/corpus{number}")


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("path", [THINKING, WEB_SEARCH], ids=["anthropic-thinking", "responses-web-search"])
def test_a_read_in_another_format_is_sendable_and_reports_what_it_left_out(
    memory_api: Api, path: Path, target: str
) -> None:
    entry = load(path)
    provider = entry["provider"]
    assert memory_api.call("POST", URL, json=append_body(provider, entry["payload"])).status_code == 200
    answer = read_back(memory_api, target)
    expected: dict[str, int] = {}
    rows = read_document(provider, entry["payload"])
    assert written(target, answer) == write_document(target, rows, expected)
    assert answer["not_carried"] == expected
    assert_valid(target, written(target, answer))
    if target == provider:
        assert expected == {}
    elif provider == "anthropic":
        assert expected.get("reasoning", 0) >= 1  # thinking cannot go to OpenAI
    else:
        assert expected.get("web_search_call", 0) >= 1


def test_the_default_read_is_the_stored_rows_and_a_provider_read_drops_what_no_provider_takes(
    api: Api,
) -> None:
    rows = [
        {"role": "tool", "content": "orphan", "tool_call_id": "nobody"},
        {"role": "user", "content": "hi"},
    ]
    assert api.call("POST", URL, json={"messages": rows}).status_code == 200
    stored = api.call("GET", URL).json()
    assert [m["role"] for m in stored["messages"]] == ["tool", "user"]  # as appended
    assert "format" not in stored
    for fmt in FORMATS:
        answer = read_back(api, fmt)
        assert answer["dropped"] == 1 and answer["count"] == 2
        assert check_sendable(read_document(fmt, written(fmt, answer))) == []
    assert read_back(api, "openai")["messages"] == [{"role": "user", "content": "hi"}]


def test_a_page_in_a_provider_format_is_normalized_on_its_own(api: Api) -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]  # fmt: skip
    assert api.call("POST", URL, json={"format": "openai", "messages": messages}).status_code == 200
    newest = read_back(api, "openai", last=2)
    assert newest["messages"] == [messages[3]]  # the result's call is in the older page
    assert newest["dropped"] == 1 and newest["count"] == 4
    older = read_back(api, "openai", last=2, before=newest["next_before"])
    healed = {"role": "tool", "tool_call_id": "c1", "content": older["messages"][2]["content"]}
    assert older["messages"] == [*messages[:2], healed]  # its result is in the newer page
    assert older["next_before"] is None
    assert read_back(api, "openai")["messages"] == messages  # the whole buffer: as sent


def test_a_provider_append_stores_rows_with_parts_not_strings(api: Api) -> None:
    vision = {"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
    ]}  # fmt: skip
    response = api.call("POST", URL, json={"format": "openai", "messages": vision})
    assert response.status_code == 200, response.text
    assert response.json()["appended"] == 1
    row = api.call("GET", URL).json()["messages"][0]
    assert row["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "url": "https://example.com/cat.png", "detail": "low"},
    ]
    assert read_back(api, "openai")["messages"] == [vision]


def test_anthropic_system_is_appended_as_the_leading_system_row(api: Api) -> None:
    system = [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    body = {"format": "anthropic", "system": system, "messages": [{"role": "user", "content": "hi"}]}
    assert api.call("POST", URL, json=body).status_code == 200
    rows = api.call("GET", URL).json()["messages"]
    assert [r["role"] for r in rows] == ["system", "user"]
    answer = read_back(api, "anthropic")
    assert answer["system"] == system
    assert answer["messages"] == [{"role": "user", "content": "hi"}]


# --- refusals: 422 with a stable code, nothing written ------------------------------------

TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}  # fmt: skip

REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"format": "openai", "messages": [{"role": "user", "content": "ok"}, TOOL_USE]}, "format_mismatch"),
    ({"format": "responses", "messages": [TOOL_USE]}, "format_mismatch"),
    ({"format": "anthropic", "messages": [{"type": "function_call", "call_id": "c", "name": "f",
                                           "arguments": "{}"}]}, "format_mismatch"),
    ({"format": "anthropic", "messages": [{"role": "user", "content": "ok"},
                                          {"role": "assistant", "content": [{"type": "tool_use", "name": "f",
                                                                             "input": {}}]}]}, "invalid_message"),
    ({"format": "anthropic", "messages": [{"role": "user", "content": [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]}, "unsupported_content"),
    ({"format": "openai", "messages": [{"role": "user", "content": "ok"}, {"role": "wizard", "content": "x"}]},
     "unknown_role"),
    ({"format": "openai", "messages": [{"role": "user", "content": {"type": "text"}}]}, "invalid_message"),
    ({"format": "openai", "messages": ["not an object"]}, "invalid_input"),
    ({"format": "openai", "system": "only anthropic has this", "messages": []}, "invalid_input"),
    ({"format": "cohere", "messages": []}, "invalid_input"),
    ({"messages": [TOOL_USE]}, "invalid_input"),  # rows (the default) with a provider's blocks
]  # fmt: skip


@pytest.mark.parametrize(("body", "code"), REFUSED, ids=[f"{c}-{n}" for n, (_, c) in enumerate(REFUSED)])
def test_invalid_provider_input_is_refused_with_a_stable_code_and_nothing_written(
    api: Api, body: dict[str, Any], code: str
) -> None:
    assert api.call("POST", URL, json={"messages": {"role": "user", "content": "first"}}).status_code == 200
    before = api.call("GET", URL).json()
    response = api.call("POST", URL, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert api.call("GET", URL).json() == before


def test_a_provider_format_read_is_refused_on_an_unknown_format(api: Api) -> None:
    response = api.call("GET", URL, params={"format": "cohere"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


# --- check and normalize: detected, converted, never corrupt ------------------------------


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_check_detects_each_provider_payload(module_stateless_api: Api, path: Path) -> None:
    entry = load(path)
    payload = entry["payload"]
    answer = module_stateless_api.call("POST", "/v1/check", json=payload).json()
    assert answer["format"] == detect_format(payload)
    assert answer["format"] in (entry["provider"], "rows")
    assert [v["code"] for v in answer["violations"]] == entry["violations"]
    assert answer["sendable"] is entry["sendable"]
    given = module_stateless_api.call("POST", "/v1/check", params={"format": entry["provider"]}, json=payload)
    assert given.json()["format"] == entry["provider"]
    assert [v["code"] for v in given.json()["violations"]] == entry["violations"]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_normalize_detects_each_provider_payload_and_answers_it_normalized(
    module_stateless_api: Api, path: Path
) -> None:
    entry = load(path)
    provider, payload = entry["provider"], entry["payload"]
    response = module_stateless_api.call("POST", "/v1/normalize", params={"format": provider}, json=payload)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["format"], answer["to"], answer["not_carried"]) == (provider, provider, {})
    got = written(provider, answer)
    expected = history(payload, provider) if entry["sendable"] else normalized_payload(provider, payload)
    assert got == expected
    detected = module_stateless_api.call("POST", "/v1/normalize", json=payload).json()
    assert detected["format"] == detect_format(payload)


def test_the_three_providers_are_detected_from_bare_message_lists(module_stateless_api: Api) -> None:
    bodies = {
        "anthropic": [{"role": "user", "content": "hi"}, TOOL_USE],
        "responses": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "openai": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}],
    }  # fmt: skip
    for fmt, body in bodies.items():
        assert module_stateless_api.call("POST", "/v1/check", json=body).json()["format"] == fmt
        assert module_stateless_api.call("POST", "/v1/normalize", json=body).json()["format"] == fmt


def test_normalize_to_another_format_reports_what_it_left_out(module_stateless_api: Api) -> None:
    payload = load(THINKING)["payload"]
    answer = module_stateless_api.call("POST", "/v1/normalize", params={"to": "openai"}, json=payload).json()
    assert (answer["format"], answer["to"]) == ("anthropic", "openai")
    assert answer["not_carried"]["reasoning"] >= 1
    assert "system" not in answer or answer["system"] is None
    rows = module_stateless_api.call("POST", "/v1/normalize", params={"to": "rows"}, json=payload).json()
    assert rows["to"] == "rows" and rows["not_carried"] == {}
    assert any(isinstance(m["content"], list) for m in rows["messages"])  # parts kept


@pytest.mark.parametrize("route", ["/v1/check", "/v1/normalize"])
@pytest.mark.parametrize("fmt", ["rows", "openai", "responses"])
def test_a_payload_read_as_a_format_it_plainly_is_not_is_refused(
    module_stateless_api: Api, route: str, fmt: str
) -> None:
    payload = load(THINKING)["payload"]  # an Anthropic request body
    response = module_stateless_api.call("POST", route, params={"format": fmt}, json=payload)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "format_mismatch"


def test_an_ambiguous_payload_is_read_in_the_format_given(module_stateless_api: Api) -> None:
    """A developer message fits OpenAI Chat and Responses: either may be asked for."""
    payload = [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]
    for fmt in ("openai", "responses"):
        response = module_stateless_api.call("POST", "/v1/normalize", params={"format": fmt}, json=payload)
        assert response.status_code == 200, response.text
        assert response.json()["messages"] == payload


def test_check_reports_each_violation_at_its_own_position_in_the_payload(module_stateless_api: Api) -> None:
    """Issue 24 §5: a Responses ``call_y`` at item 5 was reported at index 4 (a flowmem row)."""
    items = [
        {"role": "user", "content": "Weather in Lisbon?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_x", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_x", "output": "18C"},
        {"role": "user", "content": "And Porto?"},
        {"type": "function_call_output", "call_id": "call_y", "output": "stray"},
    ]
    answer = module_stateless_api.call("POST", "/v1/check", params={"format": "responses"}, json=items).json()
    assert [(v["index"], v["code"]) for v in answer["violations"]] == [(5, "orphan_result")]
    anthropic = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}]},
        ],
    }
    answer = module_stateless_api.call("POST", "/v1/check", json=anthropic).json()
    assert (answer["format"], [(v["index"], v["code"]) for v in answer["violations"]]) == (
        "anthropic",
        [(1, "unanswered_call")],
    )


def test_check_judges_a_mid_conversation_system_message_as_each_provider_does(module_stateless_api: Api) -> None:
    late = [
        {"role": "user", "content": "Weather?"},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Et demain ?"},
    ]
    for fmt in ("openai", "responses"):
        answer = module_stateless_api.call("POST", "/v1/check", params={"format": fmt}, json=late).json()
        assert answer["sendable"] is True, (fmt, answer)
    rows = module_stateless_api.call("POST", "/v1/check", params={"format": "rows"}, json=late).json()
    assert [(v["index"], v["code"]) for v in rows["violations"]] == [(1, "system_after_non_system")]
    anthropic = module_stateless_api.call("POST", "/v1/check", params={"format": "anthropic"}, json=late).json()
    assert [(v["index"], v["code"]) for v in anthropic["violations"]] == [(1, "misplaced_system_message")]
