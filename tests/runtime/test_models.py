"""Models: OpenAIChatModel against the fake provider, and ScriptedModel's script mechanics."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from flowmem.errors import ConfigurationError, ModelError
from flowmem.runtime.models import Crash, ModelReply, OpenAIChatModel, ScriptedModel, ToolCall
from tests.runtime.fake_provider import FakeProvider, calls, failure, provider_violations, text
from tests.runtime.helpers import opened

HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"tool_call_id": "c1", "name": "weather", "args": {"city": "Lisbon"}}],
    },
    {"role": "tool", "content": "18C", "tool_call_id": "c1"},
]


def model_for(provider: FakeProvider, **kwargs: object) -> tuple[OpenAIChatModel, list[float]]:
    delays: list[float] = []
    model = OpenAIChatModel(
        "fake-model",
        provider.base_url,
        "sk-test",
        sleep=delays.append,
        **kwargs,  # type: ignore[arg-type]
    )
    return opened(model), delays


def test_text_reply_and_request_shape(fake_provider: FakeProvider) -> None:
    fake_provider.script(text("It is 18C."))
    model, _ = model_for(fake_provider)
    reply = model.complete(HISTORY, [])
    assert reply == ModelReply("It is 18C.")
    sent = fake_provider.accepted()[0]
    assert sent.authorization == "Bearer sk-test"
    assert sent.body["model"] == "fake-model"
    assert sent.body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
            }
        ],
    }
    assert sent.body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "18C"}
    assert "tools" not in sent.body


def test_tool_calls_are_parsed(fake_provider: FakeProvider) -> None:
    fake_provider.script(calls(("a", "add", {"a": 1, "b": 2}), ("b", "raw", "not json")))
    model, _ = model_for(fake_provider)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    reply = model.complete(HISTORY[:2], tools)
    assert reply.tool_calls == (
        ToolCall("a", "add", {"a": 1, "b": 2}),
        ToolCall("b", "raw", "not json"),
    )
    assert fake_provider.accepted()[0].body["tools"] == tools
    assert reply.to_message()["tool_calls"][0] == {
        "tool_call_id": "a",
        "name": "add",
        "args": {"a": 1, "b": 2},
    }


def test_retries_429_and_5xx_with_bounded_exponential_backoff(fake_provider: FakeProvider) -> None:
    fake_provider.script(failure(429), failure(503), failure(500), text("finally"))
    model, delays = model_for(fake_provider, max_retries=3, backoff=0.5, max_backoff=1.5)
    assert model.complete(HISTORY[:2], []).content == "finally"
    assert delays == [0.5, 1.0, 1.5]
    assert model.attempts == 4


def test_retries_are_bounded_and_surface_the_provider_error(fake_provider: FakeProvider) -> None:
    fake_provider.script(
        failure(503, "overloaded"), failure(503, "overloaded"), failure(503, "still overloaded")
    )
    model, delays = model_for(fake_provider, max_retries=2)
    with pytest.raises(ModelError) as caught:
        model.complete(HISTORY[:2], [])
    assert caught.value.status == 503
    assert "still overloaded" in caught.value.message
    assert len(delays) == 2


def test_a_400_is_a_model_error_with_the_provider_message_and_not_retried(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.script(failure(400, "Invalid parameter: messages.[2].tool_calls"))
    model, delays = model_for(fake_provider)
    with pytest.raises(ModelError) as caught:
        model.complete(HISTORY, [])
    assert caught.value.status == 400
    assert "Invalid parameter: messages.[2].tool_calls" in caught.value.message
    assert caught.value.details["provider_message"] == "Invalid parameter: messages.[2].tool_calls"
    assert delays == []


def test_an_unsendable_history_is_normalized_before_it_is_sent(fake_provider: FakeProvider) -> None:
    fake_provider.script(text("ok"))
    model, _ = model_for(fake_provider)
    model.complete(HISTORY[:3], [])  # the call c1 has no result
    sent = fake_provider.accepted()[0].body["messages"]
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Tool call was interrupted; no result.",
    }
    assert fake_provider.rejected() == []


def test_unreachable_provider_is_a_model_error() -> None:
    delays: list[float] = []
    model = opened(
        OpenAIChatModel("m", "http://127.0.0.1:9/v1", sleep=delays.append, max_retries=1, timeout=2)
    )
    with pytest.raises(ModelError) as caught:
        model.complete(HISTORY[:2], [])
    assert caught.value.status is None
    assert len(delays) == 1


def test_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWMEM_MODEL", "env-model")
    monkeypatch.setenv("FLOWMEM_MODEL_BASE_URL", "http://127.0.0.1:1/v1/")
    monkeypatch.delenv("FLOWMEM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = opened(OpenAIChatModel())
    assert (model.model, model.base_url, model.api_key) == (
        "env-model",
        "http://127.0.0.1:1/v1",
        "sk-env",
    )
    monkeypatch.delenv("FLOWMEM_MODEL")
    with pytest.raises(ConfigurationError):
        OpenAIChatModel()


def test_fake_provider_checker_accepts_and_rejects() -> None:
    ok = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": "r"},
    ]
    assert provider_violations(ok) == []
    assert provider_violations(ok[:3])  # unanswered
    assert provider_violations([ok[1], ok[3]])  # orphan
    assert provider_violations([ok[1], ok[0]])  # system after user
    assert provider_violations([*ok, ok[2], ok[3]])  # duplicate id
    assert provider_violations([])


# --- ScriptedModel ------------------------------------------------------------------


def test_scripted_model_plays_its_script() -> None:
    model = ScriptedModel(
        [
            "hello",
            {"tool_calls": [{"id": "c1", "name": "t", "args": {}}]},
            lambda m, t: f"{len(m)} rows",
        ]
    )
    assert model.complete(HISTORY[:2], []).content == "hello"
    assert model.complete(HISTORY[:2], []).tool_calls == (ToolCall("c1", "t", {}),)
    assert model.complete(HISTORY, []).content == "4 rows"
    with pytest.raises(ModelError):
        model.complete(HISTORY, [])


def test_scripted_model_raises_scripted_errors_and_crashes() -> None:
    model = ScriptedModel([ModelError("boom", status=500), "after"], crash_at=3, crash_mode="raise")
    with pytest.raises(ModelError):
        model.complete(HISTORY[:2], [])
    assert model.complete(HISTORY[:2], []).content == "after"
    with pytest.raises(SystemExit):
        model.complete(HISTORY[:2], [])
    with pytest.raises(SystemExit):
        ScriptedModel([Crash("raise")]).complete(HISTORY[:2], [])


def test_scripted_model_checks_the_history_like_a_provider() -> None:
    with pytest.raises(ModelError) as caught:
        ScriptedModel(["x"]).complete(HISTORY[:3], [])
    assert caught.value.status == 400
    assert ScriptedModel(["x"], check=False).complete(HISTORY[:3], []).content == "x"


def test_scripted_model_fallback_and_bad_steps() -> None:
    model = ScriptedModel([], fallback="always")
    assert model.complete(HISTORY[:2], []).content == "always"
    with pytest.raises(ConfigurationError):
        ScriptedModel([42]).complete(HISTORY[:2], [])
    with pytest.raises(ConfigurationError):
        ScriptedModel([{"tool_calls": [{"name": "no id"}]}]).complete(HISTORY[:2], [])


@pytest.mark.slow
def test_scripted_crash_at_step_n_really_kills_the_process() -> None:
    code = (
        "from flowmem.runtime import ScriptedModel\n"
        "m = ScriptedModel(['one', 'two'], crash_at=2)\n"
        "print(m.complete([{'role': 'user', 'content': 'hi'}], []).content, flush=True)\n"
        "m.complete([{'role': 'user', 'content': 'hi'}], [])\n"
        "print('survived')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == -signal.SIGKILL
    assert done.stdout == "one\n"
