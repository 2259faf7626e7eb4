"""Gemini ``contents`` ↔ rows (issue 27 §3): parts, calls and their ids, losses across providers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flowmem.core import append, check_sendable, normalize
from flowmem.errors import InvalidMessageError, UnknownRoleError, UnsupportedContentError
from flowmem.formats import (
    detect_format,
    from_anthropic,
    from_gemini,
    from_openai,
    from_responses,
    read_document,
    to_anthropic,
    to_gemini,
    to_openai,
    to_responses,
    write_document,
)
from tests.formats.sdk import assert_gemini

WEATHER = [
    {"role": "user", "parts": [{"text": "Weather in Lisbon?"}]},
    {"role": "model", "parts": [{"function_call": {"name": "weather", "args": {"city": "Lisbon"}}}]},
    {"role": "user", "parts": [{"function_response": {"name": "weather", "response": {"output": "18°C, sunny"}}}]},
    {"role": "model", "parts": [{"text": "18°C and sunny."}]},
]


def _call_ids(rows: list[dict[str, Any]]) -> list[str]:
    return [c["tool_call_id"] for r in rows if r["role"] == "assistant" for c in r.get("tool_calls") or []]


def _result_ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["tool_call_id"] for r in rows if r["role"] == "tool"]


# --- the payloads -------------------------------------------------------------------


def test_a_gemini_user_text_keeps_its_text() -> None:
    """Issue 27 §3: ``{"role": "user", "parts": [{"text": "hi"}]}`` came out as empty content."""
    contents = [{"role": "user", "parts": [{"text": "hi"}]}]
    assert detect_format(contents) == "gemini"
    assert from_gemini(None, contents) == [{"role": "user", "content": "hi"}]
    assert to_gemini(from_gemini(None, contents)) == (None, contents)


def test_a_history_reads_as_rows_and_back_validated_by_the_sdk() -> None:
    rows = from_gemini({"parts": [{"text": "Be brief."}]}, WEATHER)
    assert [r["role"] for r in rows] == ["system", "user", "assistant", "tool", "assistant"]
    assert rows[0]["content"] == "Be brief."
    assert rows[3]["content"] == "18°C, sunny"
    assert check_sendable(rows) == []
    system, contents = to_gemini(rows)
    assert system == {"parts": [{"text": "Be brief."}]}
    assert contents == WEATHER
    assert_gemini(system, contents)


def test_request_bodies_in_both_spellings_are_detected_and_read() -> None:
    body = {"model": "gemini-2.5-flash", "system_instruction": "Be brief.", "contents": WEATHER}
    assert detect_format(body) == "gemini"
    assert read_document("gemini", body)[0] == {
        "role": "system", "content": "Be brief.", "extra": {"gemini": {"_string": True}}
    }  # fmt: skip
    assert write_document("gemini", read_document("gemini", body)) == {
        "system_instruction": "Be brief.", "contents": WEATHER
    }  # fmt: skip
    camel = {"systemInstruction": {"parts": [{"text": "Be brief."}]}, "contents": [
        {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "f", "args": {"snake_key": 1}},
                                     "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"},
                                                         "willContinue": False}}]},
    ]}  # fmt: skip
    assert detect_format(camel) == "gemini"
    rows = read_document("gemini", camel)
    assert rows[1]["tool_calls"][0]["args"] == {"snake_key": 1}  # arguments are the caller's keys
    system, contents = to_gemini(rows)
    assert system == camel["systemInstruction"] and contents == camel["contents"]
    assert_gemini(system, contents)


# --- parts ------------------------------------------------------------------------------------


def test_each_part_kind_becomes_its_neutral_part() -> None:
    contents = [
        {"role": "user", "parts": [
            {"text": "see"},
            {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}},
            {"inline_data": {"mime_type": "audio/mpeg", "data": "AAAA"}},
            {"inline_data": {"mime_type": "application/pdf", "data": "JVBERi0xLjQ="}},
            {"file_data": {"file_uri": "https://example.com/cat.png", "mime_type": "image/png"}},
            {"file_data": {"file_uri": "gs://bucket/talk.mp4", "mime_type": "video/mp4"},
             "video_metadata": {"start_offset": "1s", "end_offset": "4s"}},
        ]},
        {"role": "model", "parts": [
            {"text": "Planning.", "thought": True, "thought_signature": "c2ln"},
            {"executable_code": {"code": "print(1)", "language": "PYTHON"}},
            {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "1\n"}},
            {"text": "Done.", "thought_signature": "c2lnMg=="},
        ]},
    ]  # fmt: skip
    user, model = from_gemini(None, contents)
    assert user["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
        {"type": "audio", "data": "AAAA", "media_type": "audio/mpeg", "format": "mp3"},
        {"type": "file", "data": "JVBERi0xLjQ=", "media_type": "application/pdf"},
        {"type": "image", "url": "https://example.com/cat.png", "media_type": "image/png"},
        {"type": "file", "url": "gs://bucket/talk.mp4", "media_type": "video/mp4",
         "extra": {"gemini": {"video_metadata": {"start_offset": "1s", "end_offset": "4s"}}}},
    ]  # fmt: skip
    assert model["content"] == [
        {"type": "reasoning", "provider": "gemini", "text": "Planning.", "signature": "c2ln"},
        {"type": "provider", "provider": "gemini", "block": contents[1]["parts"][1]},
        {"type": "provider", "provider": "gemini", "block": contents[1]["parts"][2]},
        {"type": "text", "text": "Done.", "extra": {"gemini": {"thought_signature": "c2lnMg=="}}},
    ]
    assert to_gemini([user, model]) == (None, contents)
    assert_gemini(None, contents)


def test_a_call_keeps_its_thought_signature_and_fields() -> None:
    part = {"function_call": {"id": "c1", "name": "f", "args": {"a": [1, None]}, "will_continue": False},
            "thought_signature": "c2ln"}  # fmt: skip
    contents = [
        {"role": "model", "parts": [part]},
        {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "f", "response": {"output": "x"}}}]},
    ]
    rows = from_gemini(None, contents)
    assert rows[0]["tool_calls"] == [{
        "tool_call_id": "c1", "name": "f", "args": {"a": [1, None]},
        "extra": {"gemini": {"thought_signature": "c2ln", "function_call": {"will_continue": False}}},
    }]  # fmt: skip
    assert to_gemini(rows) == (None, contents)


@pytest.mark.parametrize(
    ("response", "content", "is_error"),
    [
        ({"output": "18°C"}, "18°C", False),
        ({"result": "18°C"}, "18°C", False),
        ({"error": "no such city"}, "no such city", True),
        ({"result": {"temp": 18}}, '{"result": {"temp": 18}}', False),
        ({"output": 18}, '{"output": 18}', False),
    ],
    ids=["output", "result", "error", "object", "non-text-output"],
)
def test_a_function_response_becomes_a_tool_row(response: dict[str, Any], content: str, is_error: bool) -> None:
    contents = [
        {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "weather", "args": {}}}]},
        {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "weather", "response": response}}]},
    ]
    tool = from_gemini(None, contents)[1]
    assert (tool["role"], tool["tool_call_id"], tool["content"]) == ("tool", "c1", content)
    assert tool.get("is_error", False) is is_error
    assert to_gemini(from_gemini(None, contents)) == (None, contents)


def test_a_function_response_with_media_parts_carries_them_as_content_parts() -> None:
    response = {"id": "c1", "name": "shot", "response": {"output": "here"},
                "parts": [{"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}]}  # fmt: skip
    contents = [
        {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "shot", "args": {}}}]},
        {"role": "user", "parts": [{"function_response": response}]},
    ]
    tool = from_gemini(None, contents)[1]
    assert tool["content"] == [
        {"type": "text", "text": "here"},
        {"type": "image", "data": "iVBORw0KGgo=", "media_type": "image/png"},
    ]
    assert to_gemini(from_gemini(None, contents)) == (None, contents)
    _, messages = to_anthropic(from_gemini(None, contents))
    assert messages[1]["content"][0]["content"][1]["type"] == "image"  # Anthropic carries it too


# --- ids (decision 0055) -----------------------------------------------------------------------


def test_mem_11_calls_without_ids_get_ids_derived_from_the_history() -> None:
    rows = from_gemini(None, WEATHER)
    (cid,) = _call_ids(rows)
    assert cid.startswith("gemini_") and len(cid) == len("gemini_") + 24
    assert _result_ids(rows) == [cid]  # the response found its call by name
    assert from_gemini(None, copy.deepcopy(WEATHER)) == rows  # deterministic
    longer = [*WEATHER, {"role": "user", "parts": [{"text": "and tomorrow?"}]}, *WEATHER[1:]]
    first, second = _call_ids(from_gemini(None, longer))
    assert first == cid  # a history sent again with more turns keeps its ids
    assert second != cid  # the same call in a later turn is another call
    assert check_sendable(from_gemini(None, longer)) == []


def test_a_derived_id_is_not_sent_back() -> None:
    rows = from_gemini(None, WEATHER)
    assert to_gemini(rows) == (None, WEATHER)
    assert to_openai(rows)[1]["tool_calls"][0]["id"] == _call_ids(rows)[0]  # other formats need one


def test_mem_1_and_mem_2_an_id_less_call_and_result_appended_again_are_stored_once() -> None:
    rows = from_gemini(None, WEATHER)
    once = append([], rows).messages
    again = append(once, from_gemini(None, WEATHER)[1:3]).messages  # the call turn and its result again
    assert again == once  # MEM-2 drops the turn, MEM-1 the result


def test_mem_3_a_derived_call_left_unanswered_is_healed_and_written_without_an_id() -> None:
    rows = from_gemini(None, WEATHER[:2])
    healed = append([], [*rows, {"role": "user", "content": "hello?"}]).messages
    _, contents = to_gemini(healed)
    assert_gemini(None, contents)
    answer = contents[2]["parts"][0]["function_response"]
    assert "id" not in answer and answer["name"] == "weather"
    assert check_sendable(from_gemini(None, contents)) == []


def test_responses_without_ids_pair_by_name_then_order() -> None:
    contents = [
        {"role": "model", "parts": [
            {"function_call": {"name": "a", "args": {"n": 1}}},
            {"function_call": {"name": "b", "args": {}}},
            {"function_call": {"name": "a", "args": {"n": 2}}},
        ]},
        {"role": "user", "parts": [
            {"function_response": {"name": "b", "response": {"output": "B"}}},
            {"function_response": {"name": "a", "response": {"output": "A1"}}},
            {"function_response": {"name": "a", "response": {"output": "A2"}}},
        ]},
    ]  # fmt: skip
    rows = from_gemini(None, contents)
    a1, b, a2 = _call_ids(rows)
    assert len({a1, b, a2}) == 3
    assert {r["tool_call_id"]: r["content"] for r in rows if r["role"] == "tool"} == {b: "B", a1: "A1", a2: "A2"}
    assert to_gemini(rows) == (None, contents)


def test_a_response_with_an_id_pairs_by_id_in_any_order() -> None:
    contents = [
        {"role": "model", "parts": [
            {"function_call": {"id": "x", "name": "f", "args": {}}},
            {"function_call": {"id": "y", "name": "f", "args": {}}},
        ]},
        {"role": "user", "parts": [
            {"function_response": {"id": "y", "name": "f", "response": {"output": "Y"}}},
            {"function_response": {"id": "x", "name": "f", "response": {"output": "X"}}},
        ]},
    ]  # fmt: skip
    rows = from_gemini(None, contents)
    assert _result_ids(rows) == ["y", "x"]
    assert check_sendable(rows) == []
    assert to_gemini(rows) == (None, contents)


def test_a_response_without_an_id_and_no_call_before_it_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="same payload"):
        from_gemini(None, WEATHER[2:])


# --- contents, roles and grouping ---------------------------------------------------------


def test_contents_group_as_they_came() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "one"}]},
        {"role": "user", "parts": [{"text": "two"}, {"text": "three"}]},
        {"parts": [{"text": "no role"}]},
        {"role": "model", "parts": [{"function_call": {"id": "c1", "name": "f", "args": {}}},
                                    {"function_call": {"id": "c2", "name": "f", "args": {}}}]},
        {"role": "tool", "parts": [{"function_response": {"id": "c1", "name": "f", "response": {"output": "1"}}},
                                   {"function_response": {"id": "c2", "name": "f", "response": {"output": "2"}}}]},
        {"role": "model", "parts": [{"text": "a"}]},
        {"role": "model", "parts": [{"text": "b"}]},
    ]  # fmt: skip
    rows = from_gemini(None, contents)
    assert [r["role"] for r in rows] == ["user", "user", "user", "assistant", "tool", "tool", "assistant", "assistant"]
    assert to_gemini(rows) == (None, contents)


def test_other_providers_rows_share_a_content_per_side() -> None:
    rows = [
        {"role": "system", "content": "s1"},
        {"role": "system", "content": [{"type": "text", "text": "s2"}]},
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "there"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"tool_call_id": "c1", "name": "f", "args": {}}, {"tool_call_id": "c2", "name": "g", "args": [1]}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two", "is_error": True},
        {"role": "user", "content": "thanks"},
    ]  # fmt: skip
    system, contents = to_gemini(rows)
    assert system == {"parts": [{"text": "s1"}, {"text": "s2"}]}
    assert contents == [
        {"role": "user", "parts": [{"text": "hi"}, {"text": "there"}]},
        {"role": "model", "parts": [
            {"function_call": {"id": "c1", "name": "f", "args": {}}},
            {"function_call": {"id": "c2", "name": "g", "args": {"value": [1]}}}]},
        {"role": "user", "parts": [
            {"function_response": {"id": "c1", "name": "f", "response": {"output": "one"}}},
            {"function_response": {"id": "c2", "name": "g", "response": {"error": "two"}}},
            {"text": "thanks"}]},
    ]  # fmt: skip
    assert_gemini(system, contents)


# --- what Gemini and the others cannot carry -------------------------------------------------

MIXED = [
    {"role": "user", "parts": [
        {"text": "What is in these?"},
        {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}},
        {"inline_data": {"mime_type": "audio/ogg", "data": "AAAA"}},
        {"file_data": {"file_uri": "gs://b/report.pdf", "mime_type": "application/pdf"}},
    ]},
    {"role": "model", "parts": [
        {"text": "Let me compute.", "thought": True, "thought_signature": "c2ln"},
        {"executable_code": {"code": "print(6 * 7)", "language": "PYTHON"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "42\n"}},
        {"function_call": {"name": "lookup", "args": {"q": "x"}}},
    ]},
    {"role": "user", "parts": [{"function_response": {"name": "lookup", "response": {"error": "not found"}}}]},
    {"role": "model", "parts": [{"text": "42."}]},
]  # fmt: skip


def test_gemini_to_the_other_formats_counts_what_they_cannot_carry() -> None:
    rows = from_gemini("Be brief.", MIXED)
    gemini_only = {"reasoning": 1, "executable_code": 1, "code_execution_result": 1, "audio": 1}
    expected = {
        "openai": {**gemini_only, "file": 1, "is_error": 1},  # Chat takes no file by URL, no error flag
        "responses": {**gemini_only, "is_error": 1},
        "anthropic": gemini_only,
        "gemini": {},
    }
    for target, counts in expected.items():
        dropped: dict[str, int] = {}
        write_document(target, rows, dropped)
        assert dropped == counts, target


def test_the_other_formats_to_gemini_count_what_it_cannot_carry() -> None:
    anthropic = from_anthropic(None, [
        {"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}},
                                     {"type": "text", "text": "and?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "text", "text": "found"}]},
    ])  # fmt: skip
    dropped: dict[str, int] = {}
    to_gemini(anthropic, dropped)
    assert dropped == {"image": 1, "reasoning": 1, "server_tool_use": 1}

    openai = from_openai([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "refusal": "no", "tool_calls": [
            {"id": "c1", "type": "custom", "custom": {"name": "sql", "input": "select 1"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
    ])  # fmt: skip
    dropped = {}
    system, contents = to_gemini(openai, dropped)
    assert dropped == {"refusal": 1, "custom": 1, "custom_result": 1, "audio": 1}
    assert contents == [{"role": "user", "parts": [{"text": "go"}]}]

    responses = from_responses([
        {"role": "user", "content": "search"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ])  # fmt: skip
    dropped = {}
    system, contents = to_gemini(responses, dropped)
    assert dropped == {"web_search_call": 1, "reasoning": 1}
    assert_gemini(system, contents)
    assert to_responses(responses) == to_responses(from_responses(to_responses(responses)))


def test_a_system_part_gemini_cannot_take_is_counted() -> None:
    rows = [{"role": "system", "content": [{"type": "text", "text": "s"},
                                           {"type": "image", "url": "https://e.com/a.png"}]},
            {"role": "user", "content": "hi"}]  # fmt: skip
    dropped: dict[str, int] = {}
    system, _ = to_gemini(rows, dropped)
    assert system == {"parts": [{"text": "s"}]}
    assert dropped == {"system_part": 1}


def test_normalization_runs_first() -> None:
    rows = [{"role": "tool", "tool_call_id": "ghost", "content": "x"}, {"role": "user", "content": "hi"}]
    assert to_gemini(rows) == (None, [{"role": "user", "parts": [{"text": "hi"}]}])
    assert normalize(rows).dropped == 1


# --- invalid Gemini input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("contents", "error"),
    [
        ([{"role": "assistant", "parts": [{"text": "x"}]}], UnknownRoleError),
        ([{"role": "user", "content": "x"}], InvalidMessageError),
        ([{"role": "user", "parts": "x"}], InvalidMessageError),
        ([{"role": "user", "parts": ["x"]}], UnsupportedContentError),
        ([{"role": "user", "parts": [{"text": 5}]}], UnsupportedContentError),
        ([{"role": "user", "parts": [{"function_call": {"name": "f"}}]}], UnsupportedContentError),
        ([{"role": "model", "parts": [{"function_response": {"name": "f", "response": {}}}]}], UnsupportedContentError),
        ([{"role": "model", "parts": [{"function_call": {"args": {}}}]}], InvalidMessageError),
        ([{"role": "model", "parts": [{"function_call": {"name": "f", "args": [1]}}]}], InvalidMessageError),
        ([{"role": "model", "parts": [{"function_call": {"id": "0", "name": "f"}}]}], InvalidMessageError),
        (["not a content"], InvalidMessageError),
    ],
    ids=["unknown-role", "content-key", "parts-not-list", "part-not-object", "text-not-string",
         "call-in-user", "response-in-model", "call-without-name", "args-not-object", "unusable-id",
         "not-an-object"],
)  # fmt: skip
def test_invalid_gemini_input_raises_a_typed_error(contents: list[Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        from_gemini(None, contents)


def test_a_model_image_goes_to_responses_as_valid_items_and_is_counted() -> None:
    """Gemini models send images in model turns; a Responses assistant message cannot hold one."""
    rows = from_gemini(None, [{"role": "model", "parts": [
        {"text": "Here it is."}, {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}]}])  # fmt: skip
    dropped: dict[str, int] = {}
    items = to_responses(rows, dropped)
    assert items == [{"role": "assistant", "content": "Here it is."}]
    assert dropped == {"image": 1}
    assert to_responses(from_gemini(None, [{"role": "model", "parts": [
        {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}]}])) == []  # fmt: skip
