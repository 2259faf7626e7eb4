"""Anthropic Messages ↔ flowmem rows: merging, splitting, losses, typed errors."""

from __future__ import annotations

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable, normalize
from flowmem.errors import (
    InvalidInputError,
    InvalidMessageError,
    UnknownRoleError,
    UnsupportedContentError,
)
from flowmem.formats import check_payload, from_anthropic, to_anthropic, write_document
from tests.formats.sdk import assert_anthropic

CALLS = [
    {"tool_call_id": "t1", "name": "search", "args": {"q": "a"}},
    {"tool_call_id": "t2", "name": "search", "args": {"q": "b"}},
]


def test_mem_5_to_anthropic_merges_results_and_heals_into_one_user_message() -> None:
    history = [
        {"role": "user", "content": "find a and b"},
        {"role": "system", "content": "be brief"},
        {"role": "assistant", "content": "Searching.", "tool_calls": CALLS},
        {"role": "tool", "content": "A", "tool_call_id": "t1"},
        {"role": "user", "content": "still there?"},
    ]
    system, messages = to_anthropic(history)
    assert_anthropic(system, messages)
    assert system == "be brief"
    assert messages == [
        {"role": "user", "content": "find a and b"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "a"}},
                {"type": "tool_use", "id": "t2", "name": "search", "input": {"q": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                {"type": "tool_result", "tool_use_id": "t2", "content": HEALED_CONTENT},
                {"type": "text", "text": "still there?"},
            ],
        },
    ]
    rows = from_anthropic(system, messages)
    assert rows == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "find a and b"},
        {"role": "assistant", "content": [{"type": "text", "text": "Searching."}], "tool_calls": CALLS},
        {"role": "tool", "content": "A", "tool_call_id": "t1"},
        {"role": "tool", "content": HEALED_CONTENT, "tool_call_id": "t2"},
        {"role": "user", "content": [{"type": "text", "text": "still there?"}]},
    ]
    assert to_anthropic(rows) == (system, messages)


def test_to_anthropic_merges_consecutive_same_role_turns_into_one_message() -> None:
    history = [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    system, messages = to_anthropic(history)
    assert system is None
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    # read back, each message is one row holding both texts as parts (a documented loss)
    assert [row["content"] for row in from_anthropic(system, messages)] == [
        messages[0]["content"],
        messages[1]["content"],
    ]


def test_anthropic_documented_losses() -> None:
    history = [
        {"role": "system", "content": "s1"},
        {"role": "system", "content": "s2"},
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"tool_call_id": "x", "name": "f", "args": [1, 2]}],
        },
        {"role": "tool", "content": "", "tool_call_id": "x"},
    ]
    system, messages = to_anthropic(history)
    assert_anthropic(system, messages)
    assert system == "s1\n\ns2"  # several system rows become one string
    assert messages[0] == {"role": "user", "content": "hi"}  # the empty user turn is left out
    assert messages[1]["content"][0]["input"] == {"value": [1, 2]}  # input must be an object
    assert messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "x"}]
    assert check_sendable(from_anthropic(system, messages)) == []


def test_from_anthropic_keeps_the_order_of_text_after_tool_use() -> None:
    system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "tool_use", "id": "u", "name": "f", "input": {}},
                {"type": "text", "text": "after"},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "u", "content": [{"type": "text", "text": "r"}], "is_error": True}
            ],
        },
    ]
    rows = from_anthropic(system, messages)
    assert rows == [
        {"role": "system", "content": [{"type": "text", "text": "sys", "extra": {"anthropic": {"cache_control": {"type": "ephemeral"}}}}]},
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "provider": "anthropic", "text": "hmm", "signature": "sig"},
                {"type": "text", "text": "after"},
            ],
            "tool_calls": [{"tool_call_id": "u", "name": "f", "args": {}}],
            "extra": {"anthropic": {"_order": "pcp"}},
        },
        {"role": "tool", "content": [{"type": "text", "text": "r"}], "tool_call_id": "u", "is_error": True},
    ]
    assert check_sendable(rows) == []
    assert to_anthropic(rows) == (system, messages)


@pytest.mark.parametrize(
    ("system", "messages", "error"),
    [
        (None, "x", InvalidInputError),
        (None, [1], InvalidMessageError),
        (None, [{"role": "robot", "content": "x"}], UnknownRoleError),
        (None, [{"role": "user", "content": 5}], InvalidMessageError),
        (
            None,
            [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            UnsupportedContentError,
        ),
        (
            None,
            [{"role": "assistant", "content": [{"type": "thinking", "thinking": ""}]}],
            UnsupportedContentError,
        ),
        (
            None,
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
                }
            ],
            UnsupportedContentError,
        ),
        (
            None,
            [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]}],
            UnsupportedContentError,
        ),
        (
            None,
            [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
            InvalidMessageError,
        ),
        (None, [{"role": "user", "content": [{"type": "tool_result"}]}], InvalidMessageError),
        (None, [{"role": "user", "content": [{"type": "text"}]}], UnsupportedContentError),
        (5, [], InvalidMessageError),
    ],
)
def test_from_anthropic_rejects_malformed_input_with_typed_errors(
    system: object, messages: object, error: type
) -> None:
    with pytest.raises(error):
        from_anthropic(system, messages)


def test_a_system_message_leading_the_messages_goes_to_the_top_level_system() -> None:
    """The API refuses a system message first in ``messages``: it is written as ``system``."""
    rows = from_anthropic(None, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    assert to_anthropic(rows) == ("Be brief.", [{"role": "user", "content": "hi"}])
    assert check_payload({"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]})[1] == []


def test_a_mid_conversation_system_message_stays_in_its_place() -> None:
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "system", "content": "Answer in French from now on."},
        {"role": "assistant", "content": "Il fait beau."},
    ]
    rows = from_anthropic("Be brief.", messages)
    assert to_anthropic(rows) == ("Be brief.", messages)
    # normalized for any provider (MEM-5), it joins the top-level system instead
    body = write_document("anthropic", normalize(rows, keep_content=True).messages)
    assert body["system"] == "Be brief.\n\nAnswer in French from now on."
    assert check_payload(body, "anthropic")[1] == []
