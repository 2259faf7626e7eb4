"""Every member of the SDKs' request unions round-trips; a new member fails the coverage test.

The generators (``tests/formats/members.py``) are keyed by SDK class. The coverage
test compares them with ``typing.get_args`` of the installed ``openai`` and
``anthropic`` unions, so an SDK upgrade that adds a message, item, part or block
kind fails here until the formats and the generators handle it.
"""

from __future__ import annotations

import typing
from typing import Any

from anthropic import types as A
from anthropic.types import message_content_param
from anthropic.types import tool_result_block_param as a_tool_result
from hypothesis import HealthCheck, given, settings
from openai.types import chat as C
from openai.types.chat import chat_completion_assistant_message_param as c_assistant
from openai.types.responses import ResponseInputContentParam, ResponseInputItemParam

from flowmem.core import check_sendable
from flowmem.formats import (
    FORMATS,
    from_anthropic,
    from_openai,
    from_responses,
    read_document,
    to_anthropic,
    to_openai,
    to_responses,
    write_document,
)
from flowmem.formats.check import check_rows
from tests.formats import members as M
from tests.formats.sdk import (
    assert_anthropic,
    assert_document,
    assert_openai_chat,
    assert_responses,
)

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _members(union: Any) -> set[Any]:
    return set(typing.get_args(union))


def test_generators_cover_every_member_of_the_sdk_unions() -> None:
    """Fails when the installed SDK has a union member no generator produces (or one it lost)."""
    assert _members(C.ChatCompletionMessageParam) == set(M.CHAT_MESSAGES)
    assert _members(C.ChatCompletionContentPartParam) == set(M.CHAT_PARTS)
    assert _members(c_assistant.ContentArrayOfContentPart) == set(M.CHAT_ASSISTANT_PARTS)
    assert _members(C.ChatCompletionMessageToolCallUnionParam) == set(M.CHAT_CALLS)

    outputs = {pair[1] for pair in M.RESPONSES_CALLS.values()}
    covered = set(M.RESPONSES_MESSAGES) | set(M.HOSTED) | set(M.RESPONSES_CALLS) | outputs
    assert _members(ResponseInputItemParam) == covered
    assert _members(ResponseInputContentParam) == set(M.RESPONSES_PARTS)

    blocks = set(M.USER_BLOCKS) | set(M.ASSISTANT_BLOCKS) | set(M.ANTHROPIC_CALL_BLOCKS)
    assert _members(A.ContentBlockParam) == blocks
    (_, listed) = typing.get_args(message_content_param.MessageContentParam)
    (inner,) = typing.get_args(listed)
    assert _members(inner) - {A.ContentBlock} == blocks  # message content: the same blocks
    assert _members(A.MessageParam) == set(M.ANTHROPIC_MESSAGES)
    assert _members(a_tool_result.Content) == set(M.TOOL_RESULT_CONTENT)


@PROPS
@given(M.chat_histories())
def test_openai_round_trip_is_the_identity_for_every_member(history: list[dict[str, Any]]) -> None:
    assert_openai_chat(history)
    rows = from_openai(history)
    assert check_sendable(rows) == []
    assert to_openai(rows) == history


@PROPS
@given(M.responses_histories())
def test_responses_round_trip_is_the_identity_for_every_member(history: list[dict[str, Any]]) -> None:
    assert_responses(history)
    rows = from_responses(history)
    assert check_sendable(rows) == []
    assert to_responses(rows) == history


@PROPS
@given(M.anthropic_histories())
def test_anthropic_round_trip_is_the_identity_for_every_member(body: dict[str, Any]) -> None:
    assert_anthropic(body.get("system"), body["messages"])
    rows = from_anthropic(body.get("system"), body["messages"])
    assert check_rows(rows, "anthropic") == []  # a mid-conversation system message is Anthropic's
    system, messages = to_anthropic(rows)
    assert {"messages": messages, **({"system": system} if system is not None else {})} == body


def _every_target(name: str, document: Any) -> None:
    rows = read_document(name, document)
    for target in FORMATS:
        dropped: dict[str, int] = {}
        written = write_document(target, rows, dropped)
        assert_document(target, written)
        assert check_rows(read_document(target, written), target) == []
        if target == name:
            assert dropped == {}


@PROPS
@given(M.chat_histories())
def test_openai_histories_convert_to_every_format(history: list[dict[str, Any]]) -> None:
    _every_target("openai", history)


@PROPS
@given(M.responses_histories())
def test_responses_histories_convert_to_every_format(history: list[dict[str, Any]]) -> None:
    _every_target("responses", history)


@PROPS
@given(M.anthropic_histories())
def test_anthropic_histories_convert_to_every_format(body: dict[str, Any]) -> None:
    _every_target("anthropic", body)
