"""Content parts over HTTP (decision 0021): kept as given, never stored as a string."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.api.messages import PART_KINDS
from tests.api.helpers import Api

URL = "/v1/buffers/user/chat"

PARTS: list[dict[str, Any]] = [
    {"type": "text", "text": "what is this?", "extra": {"anthropic": {"cache_control": {"type": "ephemeral"}}}},
    {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png", "detail": "high"},
    {"type": "audio", "data": "UklGRg==", "format": "wav"},
    {"type": "file", "file_id": "file-1", "filename": "a.pdf", "unmodeled": [1, 2]},
    {"type": "reasoning", "text": "hm", "signature": "sig==", "provider": "anthropic"},
    {"type": "provider", "provider": "anthropic",
     "block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}},
]  # fmt: skip


def test_an_append_keeps_parts_is_error_extra_and_call_kinds(api: Api) -> None:
    messages = [
        {"role": "user", "content": PARTS, "extra": {"openai": {"name": "ann"}}},
        {
            "role": "assistant",
            "content": [PARTS[4]],
            "tool_calls": [{"id": "c1", "name": "click", "args": {}, "kind": "computer"}],
        },
        {"role": "tool", "content": [PARTS[1]], "tool_call_id": "c1", "is_error": True},
    ]
    response = api.call("POST", URL, json={"messages": messages})
    assert response.status_code == 200, response.text
    rows = api.call("GET", URL).json()["messages"]
    assert [row["content"] for row in rows] == [PARTS, [PARTS[4]], [PARTS[1]]]
    assert rows[0]["metadata"] == {"extra": {"openai": {"name": "ann"}}}
    assert rows[1]["metadata"]["tool_calls"][0]["kind"] == "computer"
    assert rows[2]["metadata"]["is_error"] is True


@pytest.mark.parametrize(
    "content",
    [
        {"type": "text", "text": "an object, not a list"},
        [{"type": "image_url", "image_url": {"url": "https://x"}}],  # a provider's spelling
        [{"type": "text"}],
        [{"type": "provider", "block": {}}],  # no provider name
        ["plain strings are not parts"],
        [1, 2],
    ],
    ids=repr,
)
def test_structured_content_that_is_not_parts_is_refused_and_nothing_written(
    api: Api, content: Any
) -> None:
    response = api.call("POST", URL, json={"messages": [{"role": "user", "content": "first"},
                                                        {"role": "user", "content": content}]})  # fmt: skip
    assert response.status_code == 422
    assert "list of parts" in response.text
    assert api.call("GET", URL).json()["count"] == 0


@pytest.mark.parametrize("flag", ["yes", 1])
def test_is_error_must_be_a_boolean(api: Api, flag: Any) -> None:
    message = {"role": "tool", "content": "r", "tool_call_id": "c", "is_error": flag}
    assert api.call("POST", URL, json={"messages": message}).status_code == 422


def test_scalars_are_still_coerced_to_text(api: Api) -> None:
    api.call("POST", URL, json={"messages": [{"role": "user", "content": 42}]})
    assert api.call("GET", URL).json()["messages"][0]["content"] == "42"


def test_a_transcript_message_edited_with_parts_comes_back_as_parts(api: Api) -> None:
    sid = api.session()
    api.call("POST", f"/v1/sessions/{sid}/turns", json={"content": "original"})
    edited = api.call(
        "PATCH", f"/v1/sessions/{sid}/messages/1", "admin", json={"role": "user", "content": PARTS}
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["content"] == PARTS
    page = api.call("GET", f"/v1/sessions/{sid}/messages").json()["data"]
    assert page[0]["content"] == PARTS


def test_openapi_describes_every_part_kind(memory_api: Api) -> None:
    schema = memory_api.client.get("/openapi.json").json()
    rows = schema["components"]["schemas"]["BufferAppend"]["oneOf"][0]  # format rows
    content = rows["properties"]["messages"]["anyOf"][0]
    parts = content["properties"]["content"]["anyOf"][1]["items"]["oneOf"]
    kinds = [part["properties"]["type"]["const"] for part in parts]
    assert kinds == list(PART_KINDS)
    assert all(part["additionalProperties"] is True for part in parts)
