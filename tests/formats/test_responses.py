"""OpenAI Responses / Agents SDK items ↔ flowmem rows: shapes, losses, typed errors."""

from __future__ import annotations

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.errors import (
    InvalidInputError,
    InvalidMessageError,
    UnknownRoleError,
    UnsupportedContentError,
)
from flowmem.formats import from_responses, to_responses
from tests.formats.sdk import assert_responses

# What the Agents SDK stores in a session after a turn (ids, statuses, annotations).
SDK_ITEMS = [
    {"content": "weather in Lisbon?", "role": "user"},
    {
        "id": "msg_1",
        "content": [
            {"annotations": [], "text": "Checking.", "type": "output_text", "logprobs": []}
        ],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    },
    {
        "arguments": '{"city": "Lisbon"}',
        "call_id": "call_1",
        "name": "weather",
        "type": "function_call",
        "id": "fc_1",
        "status": "completed",
    },
    {"call_id": "call_1", "output": "18C", "type": "function_call_output"},
    {
        "id": "msg_2",
        "content": [{"type": "output_text", "text": "18C.", "annotations": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    },
]


def test_from_responses_reads_agents_sdk_items_losslessly() -> None:
    rows = from_responses(SDK_ITEMS)
    assert rows == [
        {"role": "user", "content": "weather in Lisbon?"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Checking.", "extra": {"responses": {"logprobs": []}}}],
            "extra": {"responses": {"id": "msg_1", "status": "completed", "type": "message"}},
            "tool_calls": [
                {
                    "tool_call_id": "call_1",
                    "name": "weather",
                    "args": {"city": "Lisbon"},
                    "extra": {"responses": {"id": "fc_1", "status": "completed"}},
                }
            ],
        },
        {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "18C."}],
            "extra": {"responses": {"id": "msg_2", "status": "completed", "type": "message"}},
        },
    ]
    assert check_sendable(rows) == []
    out = to_responses(rows)
    assert_responses(out)
    assert out == SDK_ITEMS


def test_mem_5_to_responses_answers_a_call_without_output() -> None:
    items = to_responses(from_responses([*SDK_ITEMS[:3], {"role": "user", "content": "hello?"}]))
    assert_responses(items)
    assert items[3] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": HEALED_CONTENT,
    }
    assert items[4] == {"role": "user", "content": "hello?"}  # as given: no key added


def test_from_responses_keeps_reasoning_and_hosted_items_with_their_turn() -> None:
    items = [
        {"role": "user", "content": "search and compute"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": [{"type": "input_text", "text": "ok"}]},
    ]
    rows = from_responses(items)
    assert [row["role"] for row in rows] == ["user", "assistant", "tool"]
    assert rows[1]["content"][0] == {
        "type": "reasoning",
        "provider": "responses",
        "summary": [],
        "encrypted_content": "gAAA",
        "extra": {"responses": {"id": "rs_1"}},
    }
    assert rows[1]["content"][1] == {"type": "provider", "provider": "responses", "block": items[2]}
    assert to_responses(rows) == items
    assert from_responses(items, ignore_types={"reasoning"})[1]["content"] == [rows[1]["content"][1]]


def test_responses_documented_loss_call_only_turn_joins_the_text_turn_before() -> None:
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "thinking aloud"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"tool_call_id": "c", "name": "f", "args": {}}],
        },
        {"role": "tool", "content": "r", "tool_call_id": "c"},
    ]
    back = from_responses(to_responses(history))
    assert back[1] == {
        "role": "assistant",
        "content": "thinking aloud",
        "tool_calls": history[2]["tool_calls"],
    }
    assert check_sendable(back) == []


@pytest.mark.parametrize(
    ("items", "error"),
    [
        ({"input": []}, InvalidInputError),
        (["x"], InvalidMessageError),
        ([{"type": "message", "role": "tool", "content": "x"}], UnknownRoleError),
        ([{"role": "user", "content": [{"type": "input_text"}]}], UnsupportedContentError),
        ([{"role": "user", "content": [7]}], UnsupportedContentError),
        (
            [{"type": "function_call", "call_id": "a", "name": "f", "arguments": {}}],
            InvalidMessageError,
        ),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], InvalidMessageError),
        ([{"type": "function_call", "call_id": "a", "arguments": "{}"}], InvalidMessageError),
        ([{"type": "function_call_output", "call_id": "a", "output": 5}], InvalidMessageError),
    ],
)
def test_from_responses_rejects_malformed_input_with_typed_errors(
    items: object, error: type
) -> None:
    with pytest.raises(error):
        from_responses(items)
