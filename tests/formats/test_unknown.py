"""A payload in no format flowmem reads is an error, never a silent success (issue 27 §3)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict

from flowmem.errors import FormatMismatchError, UnknownFormatError
from flowmem.formats import DETECTED, check_format, detect_format, format_candidates, read_payload

# ``ModelMessagesTypeAdapter.dump_python(messages, mode="json")`` of pydantic-ai 2.66: a user
# prompt, a tool call, its return and the answer (pydantic-ai is not a dependency of flowmem).
PYDANTIC_AI: list[dict[str, Any]] = [
    {"parts": [{"content": "hi", "timestamp": "2026-01-02T03:54:57.493716Z", "part_kind": "user-prompt"}],
     "timestamp": None, "instructions": None, "kind": "request", "run_id": None,
     "conversation_id": None, "metadata": None, "state": "complete"},
    {"parts": [{"tool_name": "w", "args": {"c": "x"}, "tool_call_id": "c1", "tool_kind": None, "id": None,
                "provider_name": None, "provider_details": None, "part_kind": "tool-call"}],
     "usage": {"input_tokens": 0, "output_tokens": 0}, "model_name": None, "timestamp": "2026-01-02T03:54:57Z",
     "kind": "response", "provider_name": None, "provider_details": None, "provider_response_id": None,
     "finish_reason": None, "run_id": None, "conversation_id": None, "metadata": None, "state": "complete"},
    {"parts": [{"tool_name": "w", "content": "ok", "tool_call_id": "c1", "metadata": None,
                "timestamp": "2026-01-02T03:54:57Z", "part_kind": "tool-return"}],
     "timestamp": None, "instructions": None, "kind": "request", "run_id": None,
     "conversation_id": None, "metadata": None, "state": "complete"},
    {"parts": [{"content": "done", "id": None, "provider_name": None, "provider_details": None,
                "part_kind": "text"}],
     "usage": {"input_tokens": 0, "output_tokens": 0}, "model_name": None, "timestamp": "2026-01-02T03:54:57Z",
     "kind": "response", "provider_name": None, "provider_details": None, "provider_response_id": None,
     "finish_reason": None, "run_id": None, "conversation_id": None, "metadata": None, "state": "complete"},
]  # fmt: skip

LANGCHAIN = messages_to_dict([HumanMessage("hi"), AIMessage("yo"), ToolMessage("42", tool_call_id="c1")])

UNKNOWN: dict[str, object] = {
    "pydantic-ai": PYDANTIC_AI,
    "langchain": LANGCHAIN,
    "scalars": [1, "two", None],
    "unknown-roles": [{"role": "bot", "content": "hi"}, {"speaker": "me", "text": "x"}],
    "unknown-items": [{"type": "human_message", "body": "hi"}],
    "a-string": "hi",
    "a-number": 42,
    "an-unknown-body": {"history": [{"role": "user", "content": "hi"}]},
    "one-pydantic-ai-message": PYDANTIC_AI[0],
}


@pytest.mark.parametrize("payload", list(UNKNOWN.values()), ids=list(UNKNOWN))
def test_a_payload_no_format_reads_is_unknown_format(payload: object) -> None:
    assert format_candidates(payload) == frozenset()
    with pytest.raises(UnknownFormatError) as raised:
        detect_format(payload)
    assert raised.value.code == "unknown_format"
    for name in DETECTED:
        assert name in str(raised.value)  # the message names every format flowmem reads
        with pytest.raises(UnknownFormatError):
            read_payload(payload, name)  # named or detected, it is refused
    with pytest.raises(UnknownFormatError):
        read_payload(payload)


def test_the_refusal_says_what_the_payload_looks_like() -> None:
    with pytest.raises(UnknownFormatError, match="pydantic-ai message history"):
        read_payload(PYDANTIC_AI, None, "history.json")
    with pytest.raises(UnknownFormatError, match=r"history\.json is in no format"):
        read_payload(PYDANTIC_AI, None, "history.json")
    with pytest.raises(UnknownFormatError, match="LangChain messages_to_dict dump"):
        read_payload(LANGCHAIN)


def test_mem_5_a_rows_payload_with_some_unreadable_entries_is_still_rows() -> None:
    """MEM-5 step 1 drops what it cannot read; only a payload of nothing readable is refused."""
    payload = [1, {"role": "bot"}, {"role": "user", "content": "hi"}]
    assert read_payload(payload) == ("rows", payload)
    assert read_payload([]) == ("rows", [])


def test_gemini_contents_are_not_rows() -> None:
    contents = [{"role": "user", "parts": [{"text": "hi"}]}]
    with pytest.raises(FormatMismatchError, match="'gemini'"):
        check_format(contents, "rows")
    assert read_payload(contents) == ("gemini", [{"role": "user", "content": "hi"}])
    assert "gemini" not in format_candidates([{"role": "user", "content": "hi"}])
