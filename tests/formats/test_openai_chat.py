"""OpenAI Chat Completions ↔ flowmem rows: shapes, documented losses, typed errors."""

from __future__ import annotations

import pytest

from flowmem.core import HEALED_CONTENT
from flowmem.errors import (
    InvalidInputError,
    InvalidMessageError,
    UnknownRoleError,
    UnsupportedContentError,
)
from flowmem.formats import from_openai, to_anthropic, to_openai
from tests.formats.sdk import assert_openai_chat

STORED = [
    {"role": "user", "content": "weather?", "metadata": {}, "timestamp": 1},
    {
        "role": "assistant",
        "content": "",
        "metadata": {
            "tool_calls": [{"tool_call_id": "c1", "name": "weather", "args": {"city": "Lisbon"}}]
        },
        "timestamp": 2,
    },
    {"role": "user", "content": "hello?", "metadata": {}, "timestamp": 3},
]


def test_mem_5_to_openai_heals_a_dangling_call_next_to_its_turn() -> None:
    out = to_openai(STORED)
    assert_openai_chat(out)
    assert out == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": HEALED_CONTENT},
        {"role": "user", "content": "hello?"},
    ]


def test_mem_11_to_openai_reads_the_provider_flat_spelling_too() -> None:
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "on it",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": "done"},
    ]
    out = to_openai(history)
    assert out[1]["tool_calls"] == history[1]["tool_calls"]
    assert from_openai(out)[1]["tool_calls"] == [
        {"tool_call_id": "c9", "name": "f", "args": {"x": 1}}
    ]


def test_mem_5_to_openai_moves_system_first_and_drops_orphans() -> None:
    out = to_openai(
        [
            {"role": "tool", "content": "orphan", "tool_call_id": "zz"},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "be brief"},
        ]
    )
    assert out == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_from_openai_reads_parts_developer_and_refusal_losslessly() -> None:
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "refusal": "I can't"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]
    rows = from_openai(messages)
    assert rows == [
        {
            "role": "system",
            "content": [{"type": "text", "text": "rules"}],
            "extra": {"openai": {"role": "developer"}},
        },
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": [{"type": "provider", "provider": "openai", "block": {"refusal": "I can't"}}],
            "extra": {"openai": {"_content": "null"}},
        },
        {
            "role": "assistant",
            "content": [
                {"type": "provider", "provider": "openai", "block": {"type": "refusal", "refusal": "no"}}
            ],
        },
    ]
    assert to_openai(rows) == messages


def test_an_assistant_turn_with_only_audio_is_kept() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "audio": {"id": "audio_1"}}]
    rows = from_openai(messages)
    assert rows[1]["content"] == [{"type": "audio", "id": "audio_1"}]
    assert to_openai(rows) == messages
    dropped: dict[str, int] = {}
    assert to_anthropic(rows, dropped) == (None, [{"role": "user", "content": "hi"}])
    assert dropped == {"audio": 1}


def test_from_openai_keeps_unparseable_arguments_as_text() -> None:
    rows = from_openai(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{oops"},
                    },
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": ""}},
                ],
            }
        ]
    )
    assert [c["args"] for c in rows[0]["tool_calls"]] == ["{oops", {}]
    out = to_openai([{"role": "user", "content": "x"}, *rows])
    assert out[1]["tool_calls"][0]["function"]["arguments"] == "{oops"
    assert out[1]["tool_calls"][1]["function"]["arguments"] == ""  # kept as the model sent it


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ("nope", InvalidInputError),
        ([42], InvalidMessageError),
        ([{"role": "robot", "content": "x"}], UnknownRoleError),
        ([{"role": "tool", "content": "x"}], InvalidMessageError),
        ([{"role": "tool", "content": "x", "tool_call_id": "  "}], InvalidMessageError),
        ([{"role": "user", "content": {"a": 1}}], InvalidMessageError),
        ([{"role": "user", "content": [{"type": "image_url"}]}], UnsupportedContentError),
        ([{"role": "user", "content": [{"type": "text"}]}], UnsupportedContentError),
        ([{"role": "user", "content": ["text"]}], UnsupportedContentError),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "type": "custom", "custom": {}}]}],
            InvalidMessageError,
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "type": "mystery"}]}],
            InvalidMessageError,
        ),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]}],
            InvalidMessageError,
        ),
        (
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
            InvalidMessageError,
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}],
                }
            ],
            InvalidMessageError,
        ),
    ],
)
def test_from_openai_rejects_malformed_input_with_typed_errors(
    messages: object, error: type
) -> None:
    with pytest.raises(error) as caught:
        from_openai(messages)
    assert caught.value.code


def test_to_openai_rejects_a_non_list() -> None:
    with pytest.raises(InvalidInputError):
        to_openai({"role": "user", "content": "x"})


def test_from_openai_trims_ids() -> None:
    rows = from_openai(
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": " c1 ", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": 7, "content": "x"},
        ]
    )
    assert rows[0]["tool_calls"][0]["tool_call_id"] == "c1"
    assert rows[1]["tool_call_id"] == "7"
