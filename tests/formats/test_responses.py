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
        "type": "message",
    },
]


def test_from_responses_reads_agents_sdk_items() -> None:
    rows = from_responses(SDK_ITEMS)
    assert rows == [
        {"role": "user", "content": "weather in Lisbon?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"tool_call_id": "call_1", "name": "weather", "args": {"city": "Lisbon"}}
            ],
        },
        {"role": "tool", "content": "18C", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "18C."},
    ]
    assert check_sendable(rows) == []
    out = to_responses(rows)
    assert_responses(out)
    assert out[1:3] == [
        {"type": "message", "role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city": "Lisbon"}',
        },
    ]


def test_mem_5_to_responses_answers_a_call_without_output() -> None:
    items = to_responses(from_responses([*SDK_ITEMS[:3], {"role": "user", "content": "hello?"}]))
    assert_responses(items)
    assert items[3] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": HEALED_CONTENT,
    }
    assert items[4] == {"type": "message", "role": "user", "content": "hello?"}


def test_from_responses_reads_output_parts_and_ignores_chosen_types() -> None:
    rows = from_responses(
        [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "rules"}],
            },
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "a",
                "output": [{"type": "input_text", "text": "ok"}],
            },
        ],
        ignore_types={"reasoning"},
    )
    assert rows == [
        {"role": "system", "content": "rules"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"tool_call_id": "a", "name": "f", "args": {}}],
        },
        {"role": "tool", "content": "ok", "tool_call_id": "a"},
    ]


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
        ([{"type": "reasoning", "id": "r", "summary": []}], UnsupportedContentError),
        ([{"type": "web_search_call", "id": "w"}], UnsupportedContentError),
        (
            [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}],
            UnsupportedContentError,
        ),
        (
            [{"type": "function_call", "call_id": "a", "name": "f", "arguments": {}}],
            InvalidMessageError,
        ),
        ([{"type": "function_call", "name": "f", "arguments": "{}"}], InvalidMessageError),
        ([{"type": "function_call", "call_id": "a", "arguments": "{}"}], InvalidMessageError),
        ([{"type": "function_call_output", "output": "x"}], InvalidMessageError),
        ([{"type": "function_call_output", "call_id": "a", "output": 5}], InvalidMessageError),
    ],
)
def test_from_responses_rejects_malformed_input_with_typed_errors(
    items: object, error: type
) -> None:
    with pytest.raises(error):
        from_responses(items)
