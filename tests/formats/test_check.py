"""``check_payload``: each format judged as its provider judges it, at the payload's own positions."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.formats import check_payload
from flowmem.formats.check import FORMAT_CODES

USER = {"role": "user", "content": "Weather in Lisbon?"}


def found(payload: Any, name: str | None = None) -> list[tuple[int, str]]:
    return [(v.index, v.code) for v in check_payload(payload, name)[1]]


# --- indexes: the payload's own positions ----------------------------------------------


RESPONSES_ITEMS: list[dict[str, Any]] = [
    USER,
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "call_x", "name": "weather", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_x", "output": "18C"},
    {"role": "user", "content": "And Porto?"},
    {"type": "function_call_output", "call_id": "call_y", "output": "stray"},
]


def test_a_responses_violation_is_reported_at_its_item() -> None:
    """The issue's case: ``call_y`` at item 5 was reported at index 4 (flowmem rows)."""
    assert found(RESPONSES_ITEMS, "responses") == [(5, "orphan_result")]
    # a request body: ``instructions`` is no item, ``input`` keeps its numbering
    assert found({"instructions": "Be brief.", "input": RESPONSES_ITEMS}) == [(5, "orphan_result")]


def test_a_responses_call_without_output_is_reported_at_its_own_item() -> None:
    items = [
        USER,
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_b", "name": "weather", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_a", "output": "18C"},
    ]
    # one model turn (items 1 to 4) is one flowmem row: each call is named by its item
    assert found(items, "responses") == [(3, "unanswered_call"), (4, "duplicate_call_id")]


def test_an_anthropic_violation_is_reported_at_its_message() -> None:
    body = {
        "system": "Be brief.",  # a row of its own, no message
        "messages": [
            USER,
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
                    {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}},
                ],
            },
            {  # one message, three rows: the tool results and the text between them
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {"type": "text", "text": "and"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "19C"},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "?"}]},
        ],
    }
    assert found(body) == [(1, "unanswered_call"), (2, "orphan_result"), (3, "orphan_result")]


def test_a_chat_completions_violation_is_reported_at_its_message() -> None:
    body = {
        "model": "gpt-4.1",
        "messages": [
            {"role": "developer", "content": "Be brief."},
            USER,
            {"role": "tool", "tool_call_id": "call_9", "content": "stray"},
        ],
    }
    assert found(body, "openai") == [(2, "orphan_result")]


# --- system messages: what each provider accepts -----------------------------------------

LATE_SYSTEM = [
    USER,
    {"role": "assistant", "content": "Sunny."},
    {"role": "system", "content": "Answer in French from now on."},
    {"role": "user", "content": "Et demain ?"},
]


@pytest.mark.parametrize("name", ["openai", "responses"])
def test_a_system_message_mid_conversation_is_accepted_by_openai_apis(name: str) -> None:
    """Chat Completions and Responses take system and developer messages anywhere."""
    assert found(LATE_SYSTEM, name) == []
    developer = [*LATE_SYSTEM[:2], {"role": "developer", "content": "Be brief."}]
    assert found(developer, name) == []


def test_flowmem_rows_are_checked_against_mem_5_system_first() -> None:
    assert found(LATE_SYSTEM, "rows") == [(2, "system_after_non_system")]
    assert found(LATE_SYSTEM) == [(2, "system_after_non_system")]  # plain text is detected as rows


def _anthropic(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"system": "Be brief.", "messages": list(messages)}


SYSTEM = {"role": "system", "content": "Answer in French."}
ASSISTANT = {"role": "assistant", "content": "Sunny."}


def test_an_anthropic_system_message_after_a_user_turn_is_well_placed() -> None:
    """A mid-conversation system message: after a user turn, last or before an assistant turn."""
    assert found(_anthropic(USER, SYSTEM)) == []
    assert found(_anthropic(USER, SYSTEM, ASSISTANT)) == []


@pytest.mark.parametrize(
    ("messages", "index", "reason"),
    [
        ([SYSTEM, USER], 0, "first message"),
        ([USER, ASSISTANT, SYSTEM], 2, "follows an assistant turn"),
        ([USER, SYSTEM, {"role": "user", "content": "hi"}], 1, "a user message follows it"),
        ([USER, SYSTEM, SYSTEM, ASSISTANT], 2, "follows another system message"),
    ],
    ids=["first", "after-assistant", "before-user", "consecutive"],
)
def test_an_anthropic_system_message_placed_where_the_api_refuses_it_is_reported(
    messages: list[dict[str, Any]], index: int, reason: str
) -> None:
    (fmt, violations) = check_payload(_anthropic(*messages))
    misplaced = [v for v in violations if v.code == "misplaced_system_message"]
    assert fmt == "anthropic"
    assert misplaced[-1].index == index
    assert reason in misplaced[-1].message
    assert misplaced[-1].message.startswith(FORMAT_CODES["misplaced_system_message"])
    assert "top-level system parameter" in misplaced[-1].message  # what to do


def test_an_anthropic_system_message_after_a_server_tool_use_is_well_placed() -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}
    assert found(_anthropic(USER, {"role": "assistant", "content": [search]}, SYSTEM)) == []


def test_rows_keep_their_own_indexes() -> None:
    rows = [USER, {"role": "tool", "content": "x", "tool_call_id": "c1"}]
    assert check_payload(rows, "rows") == check_payload({"messages": rows}, "rows")
    assert found(rows, "rows") == [(1, "orphan_result")]
