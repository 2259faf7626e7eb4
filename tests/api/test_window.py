"""``GET /v1/buffers/...?max_tokens=N`` (issue 28 §1): a token window over HTTP, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core.tokens import estimate_tokens
from tests.api.helpers import Api

SYSTEM = {"role": "system", "content": "You are terse."}


def _turns(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n} " * 10},
        {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", "name": "f"}]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "result " * 20},
        {"role": "assistant", "content": f"answer {n} " * 8},
    ]


@pytest.fixture
def chat(any_api: Api) -> Api:
    """The app over each backend, with a buffer of a system prompt and eight tool turns."""
    rows = [SYSTEM] + [m for n in range(8) for m in _turns(n)]
    assert any_api.call("POST", "/v1/buffers/user/chat", json={"messages": rows}).status_code == 200
    return any_api


def test_a_window_answers_the_rows_that_fit_and_what_was_cut(chat: Api) -> None:
    whole = chat.call("GET", "/v1/buffers/user/chat").json()["messages"]
    answer = chat.call("GET", "/v1/buffers/user/chat", params={"max_tokens": 300})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    kept = body["messages"]
    assert kept[0] == whole[0] and kept[1:] == whole[len(whole) - len(kept) + 1 :]
    assert kept[1]["role"] != "tool"  # never a leading tool result
    tokens = sum(map(estimate_tokens, kept))
    assert body["window"] == {
        "budget": 300,
        "tokens": tokens,
        "start": len(whole) - len(kept) + 1,
        "cut_messages": len(whole) - len(kept),
        "cut_tokens": sum(map(estimate_tokens, whole)) - tokens,
    }
    assert body["count"] == len(whole) and body["next_before"] is None


def test_an_anthropic_window_starts_on_a_user_turn_and_sends_the_system_apart(chat: Api) -> None:
    answer = chat.call(
        "GET", "/v1/buffers/user/chat", params={"max_tokens": 150, "format": "anthropic"}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["format"] == "anthropic" and body["system"] == "You are terse."
    assert body["messages"][0]["role"] == "user"
    assert body["window"]["tokens"] <= 150


def test_a_budget_below_the_newest_turn_is_422_window_too_small_naming_what_it_needs(
    chat: Api,
) -> None:
    answer = chat.call("GET", "/v1/buffers/user/chat", params={"max_tokens": 20})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "window_too_small"
    needed = error["details"][0]["needed"]
    assert error["details"][0]["field"] == "max_tokens" and needed > 20
    fits = chat.call("GET", "/v1/buffers/user/chat", params={"max_tokens": needed})
    assert fits.status_code == 200 and fits.json()["window"]["tokens"] == needed


def test_max_tokens_with_last_is_refused(chat: Api) -> None:
    answer = chat.call("GET", "/v1/buffers/user/chat", params={"max_tokens": 500, "last": 2})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_input"


def test_a_refused_scope_answers_the_neutral_window_with_its_refusal(chat: Api) -> None:
    answer = chat.call("GET", "/v1/buffers/session/chat", params={"max_tokens": 500})
    assert answer.status_code == 200
    assert answer.json()["messages"] == [] and answer.headers["X-Flowmem-Refused"]
