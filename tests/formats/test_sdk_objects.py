"""The SDKs' own objects (pydantic models) read as the SDK itself sends them back."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message, TextBlock, ToolUseBlock
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.responses import Response

from flowmem.errors import InvalidInputError, InvalidMessageError, UnsupportedContentError
from flowmem.formats import from_anthropic, from_openai, from_responses, to_anthropic, to_openai

CLAUDE_REPLY: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Let me look.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Lisbon"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 7},
}
CHAT_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1755000000,
    "model": "gpt-4.1",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "annotations": [],
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Lisbon"}'}}
                ],
            },
        }
    ],
}
RESPONSE: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1755000000,
    "model": "gpt-4.1",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
        },
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"},
    ],
}
USER = {"role": "user", "content": "Weather in Lisbon?"}


def test_anthropic_blocks_of_a_reply_are_read_as_the_sdk_sends_them() -> None:
    """The issue's case: ``TextBlock`` was refused as "a content part must be an object"."""
    reply = Message.model_validate(CLAUDE_REPLY)
    blocks = [dict(b) for b in CLAUDE_REPLY["content"]]
    expected = from_anthropic(None, [USER, {"role": "assistant", "content": blocks}])
    assert from_anthropic(None, [USER, {"role": "assistant", "content": reply.content}]) == expected
    assert from_anthropic(None, [USER, reply]) == expected  # the whole Message, as a message
    assert isinstance(reply.content[0], TextBlock) and isinstance(reply.content[1], ToolUseBlock)
    _, messages = to_anthropic([*expected, {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"}])
    assert messages[1]["content"] == blocks


def test_an_openai_chat_completion_message_is_read_as_the_sdk_sends_it() -> None:
    """The issue's case: ``ChatCompletionMessage`` was refused as "must be an object"."""
    message = ChatCompletion.model_validate(CHAT_COMPLETION).choices[0].message
    assert isinstance(message, ChatCompletionMessage)
    rows = from_openai([USER, message])
    assert rows == from_openai([USER, CHAT_COMPLETION["choices"][0]["message"]])
    assert rows[1]["tool_calls"][0]["tool_call_id"] == "call_1"
    sent = to_openai([*rows, {"role": "tool", "tool_call_id": "call_1", "content": "18C"}])
    assert sent[1] == CHAT_COMPLETION["choices"][0]["message"]  # what the SDK itself would send


def test_responses_output_items_are_read_as_the_sdk_sends_them() -> None:
    output = Response.model_validate(RESPONSE).output
    assert from_responses([USER, *output]) == from_responses([USER, *RESPONSE["output"]])


class _NotAModel:
    """An object with no JSON form."""


@pytest.mark.parametrize(
    ("read", "error"),
    [
        (lambda: from_openai([_NotAModel()]), InvalidMessageError),
        (lambda: from_anthropic(None, [{"role": "user", "content": [_NotAModel()]}]), UnsupportedContentError),
        (lambda: from_responses([_NotAModel()]), InvalidMessageError),
    ],
    ids=["openai", "anthropic", "responses"],
)
def test_an_object_that_is_no_map_is_refused_saying_what_to_pass(read: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"_NotAModel; pass a dict"):
        read()


def test_one_sdk_object_where_a_list_belongs_says_to_pass_a_list() -> None:
    with pytest.raises(InvalidInputError, match=r"got Message \(one SDK object: pass a list of them"):
        from_anthropic(None, Message.model_validate(CLAUDE_REPLY))
