"""Round-trip properties of the provider formats, validated against the SDKs' own types."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings

from flowmem.core import check_sendable, normalize
from flowmem.formats import (
    from_anthropic,
    from_openai,
    from_responses,
    to_anthropic,
    to_openai,
    to_responses,
)
from tests.formats.sdk import assert_anthropic, assert_openai_chat, assert_responses
from tests.formats.strategies import histories, messy_histories


def as_text(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with a content of text parts only spelled as the string those parts hold."""
    out = []
    for row in rows:
        content = row["content"]
        if isinstance(content, list) and all(part["type"] == "text" for part in content):
            row = {**row, "content": "".join(part["text"] for part in content)}
        out.append(row)
    return out


def merged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive user rows, or assistant rows after one without calls, joined (one message)."""
    out: list[dict[str, Any]] = []
    for row in rows:
        last = out[-1] if out else None
        if (
            last is not None
            and row["role"] in ("user", "assistant")
            and last["role"] == row["role"]
            and not last.get("tool_calls")
        ):
            out[-1] = {**row, "content": last["content"] + row["content"]}
        else:
            out.append(row)
    return out


FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(histories(carrier="openai"))
def test_mem_5_openai_round_trip_equals_normalized_history(history: list[dict[str, Any]]) -> None:
    out = to_openai(history)
    assert_openai_chat(out)
    back = from_openai(out)
    assert back == normalize(history).messages
    assert check_sendable(back) == []


@FAST
@given(histories(carrier="responses"))
def test_mem_5_responses_round_trip_equals_normalized_history(
    history: list[dict[str, Any]],
) -> None:
    items = to_responses(history)
    assert_responses(items)
    back = from_responses(items)
    assert back == normalize(history).messages
    assert check_sendable(back) == []


@FAST
@given(histories(carrier="anthropic"))
def test_mem_5_anthropic_round_trip_equals_normalized_history(
    history: list[dict[str, Any]],
) -> None:
    system, messages = to_anthropic(history)
    assert_anthropic(system, messages)
    back = from_anthropic(system, messages)
    # a turn's text becomes a text block once calls or results share its message
    assert as_text(back) == merged(normalize(history).messages)
    assert check_sendable(back) == []


def _alternates(messages: list[dict[str, Any]]) -> bool:
    return all(a["role"] != b["role"] for a, b in itertools.pairwise(messages))


@FAST
@given(messy_histories())
def test_mem_5_any_history_becomes_sdk_valid_and_sendable(history: list[Any]) -> None:
    """Whatever a caller hands ``to_X`` (bad ids, orphans, odd content), the output is valid."""
    chat = to_openai(history)
    assert_openai_chat(chat)
    assert check_sendable(from_openai(chat)) == []
    items = to_responses(history)
    assert_responses(items)
    assert check_sendable(from_responses(items)) == []
    system, messages = to_anthropic(history)
    assert_anthropic(system, messages)
    assert _alternates(messages)
    assert check_sendable(from_anthropic(system, messages)) == []


@FAST
@given(messy_histories())
def test_formats_are_stable_after_one_pass(history: list[Any]) -> None:
    """Writing what was read back gives the same provider payload (a fixed point)."""
    chat = to_openai(history)
    assert to_openai(from_openai(chat)) == chat
    items = to_responses(history)
    assert to_responses(from_responses(items)) == items
    payload = to_anthropic(history)
    assert to_anthropic(from_anthropic(*payload)) == payload
