"""Gemini over HTTP and ``unknown_format`` (issue 27 §3): appends, ``?format=gemini``, check, normalize."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.helpers import Api
from tests.formats.sdk import assert_gemini
from tests.formats.test_unknown import LANGCHAIN, PYDANTIC_AI

URL = "/v1/buffers/user/chat"
INSTRUCTION = {"parts": [{"text": "Be brief."}]}
CONTENTS: list[dict[str, Any]] = [
    {"role": "user", "parts": [{"text": "Weather in Lisbon?"},
                               {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "model", "parts": [{"text": "Look it up.", "thought": True, "thought_signature": "c2ln"},
                                {"function_call": {"name": "weather", "args": {"city": "Lisbon"}}}]},
    {"role": "user", "parts": [{"function_response": {"name": "weather", "response": {"output": "18°C"}}}]},
    {"role": "model", "parts": [{"text": "18°C."}]},
]  # fmt: skip
UNREADABLE = {"pydantic-ai": PYDANTIC_AI, "langchain": LANGCHAIN, "scalars": [1, 2], "unknown-body": {"history": []}}


def test_a_gemini_append_reads_back_as_sent_and_in_the_other_formats(api: Api) -> None:
    body = {"format": "gemini", "system_instruction": INSTRUCTION, "messages": CONTENTS}
    response = api.call("POST", URL, json=body)
    assert response.status_code == 200, response.text
    assert response.json()["appended"] == 5
    rows = api.call("GET", URL).json()["messages"]
    assert [r["role"] for r in rows] == ["system", "user", "assistant", "tool", "assistant"]
    assert isinstance(rows[1]["content"], list)  # parts stay parts
    read = api.call("GET", URL, params={"format": "gemini"}).json()
    assert (read["format"], read["system_instruction"], read["messages"]) == ("gemini", INSTRUCTION, CONTENTS)
    assert (read["dropped"], read["not_carried"]) == (0, {})
    assert_gemini(read["system_instruction"], read["messages"])
    chat = api.call("GET", URL, params={"format": "openai"}).json()
    assert chat["not_carried"] == {"reasoning": 1}
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}


def test_mem_1_mem_2_an_id_less_payload_sent_again_adds_no_second_call_or_result(api: Api) -> None:
    """The derived ids are the same for the same payload (decision 0055): the retry's call turn
    is a duplicate (MEM-2) and its result too (MEM-1); text turns, which have no id, are added."""
    body = {"format": "gemini", "messages": CONTENTS}
    assert api.call("POST", URL, json=body).status_code == 200
    again = api.call("POST", URL, json=body).json()
    assert (again["appended"], again["count"]) == (2, 6)
    rows = api.call("GET", URL).json()["messages"]
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_check_and_normalize_detect_gemini(module_stateless_api: Api) -> None:
    payload = {"model": "gemini-2.5-flash", "system_instruction": INSTRUCTION, "contents": CONTENTS}
    check = module_stateless_api.call("POST", "/v1/check", json=payload).json()
    assert (check["format"], check["sendable"]) == ("gemini", True)
    bare = module_stateless_api.call("POST", "/v1/check", json=[{"role": "user", "parts": [{"text": "hi"}]}]).json()
    assert bare["format"] == "gemini"
    answer = module_stateless_api.call("POST", "/v1/normalize", json=payload).json()
    assert (answer["format"], answer["to"], answer["dropped"]) == ("gemini", "gemini", 0)
    assert (answer["system_instruction"], answer["messages"]) == (INSTRUCTION, CONTENTS)
    rows = module_stateless_api.call("POST", "/v1/normalize", params={"to": "rows"}, json=payload).json()
    assert rows["messages"][1]["content"][0] == {"type": "text", "text": "Weather in Lisbon?"}
    anthropic = module_stateless_api.call("POST", "/v1/normalize", params={"to": "anthropic"}, json=payload).json()
    assert anthropic["system"] == "Be brief." and anthropic["not_carried"] == {"reasoning": 1}
    other = module_stateless_api.call("POST", "/v1/normalize", params={"to": "gemini"}, json=[
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]).json()  # fmt: skip
    assert other["messages"] == [{"role": "user", "parts": [{"text": "hi"}]},
                                 {"role": "model", "parts": [{"text": "hello"}]}]  # fmt: skip
    assert other["system_instruction"] is None


@pytest.mark.parametrize("route", ["/v1/check", "/v1/normalize"])
@pytest.mark.parametrize("payload", list(UNREADABLE.values()), ids=list(UNREADABLE))
@pytest.mark.parametrize("fmt", [None, "rows", "gemini", "responses"])
def test_a_payload_in_no_known_format_is_refused_unknown_format(
    module_stateless_api: Api, route: str, payload: object, fmt: str | None
) -> None:
    """Issue 27 §3: a pydantic-ai dump normalized to ``[]`` with 200."""
    params = {} if fmt is None else {"format": fmt}
    response = module_stateless_api.call("POST", route, params=params, json=payload)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unknown_format"
    assert all(name in error["message"] for name in ("rows", "openai", "responses", "anthropic", "gemini"))


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"messages": [{"role": "user", "parts": [{"text": "hi"}]}]}, "format_mismatch"),  # Gemini sent as rows
    ({"format": "gemini", "messages": [{"role": "user", "content": "hi"}]}, "format_mismatch"),
    ({"format": "gemini", "messages": PYDANTIC_AI}, "unknown_format"),
    ({"format": "gemini", "messages": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "unknown_role"),
    ({"format": "gemini", "messages": [{"role": "user", "parts": [
        {"function_response": {"name": "f", "response": {}}}]}]}, "invalid_message"),  # no call to answer
    ({"format": "gemini", "messages": [{"role": "user", "parts": [
        {"function_call": {"name": "f"}}]}]}, "unsupported_content"),
    ({"format": "gemini", "system_instruction": 5, "messages": []}, "invalid_input"),
    ({"format": "openai", "system_instruction": "x", "messages": []}, "invalid_input"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "code"), REFUSED, ids=[f"{c}-{n}" for n, (_, c) in enumerate(REFUSED)])
def test_an_invalid_gemini_append_is_refused_and_writes_nothing(api: Api, body: dict[str, Any], code: str) -> None:
    assert api.call("POST", URL, json={"messages": {"role": "user", "content": "first"}}).status_code == 200
    before = api.call("GET", URL).json()
    response = api.call("POST", URL, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code
    assert api.call("GET", URL).json() == before


def test_the_openapi_schema_offers_gemini(module_stateless_api: Api) -> None:
    schema = module_stateless_api.client.get("/openapi.json").json()
    append = schema["components"]["schemas"]["BufferAppend"]
    gemini = next(v for v in append["oneOf"] if v["properties"]["format"]["enum"] == ["gemini"])
    assert "system_instruction" in gemini["properties"]
    parameters = schema["paths"]["/v1/buffers/{scope}/{key}"]["get"]["parameters"]
    read = next(p for p in parameters if p["name"] == "format")
    assert "gemini" in str(read["schema"])
