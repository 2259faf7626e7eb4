"""``flowmem chat`` and ``flowmem demo`` (the CLI of the runtime)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowmem.cli import cli
from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.store import open_store
from flowmem.store.base import Address, SessionRecord
from tests.runtime.fake_provider import FakeProvider, calls, text


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def test_chat_with_a_provider_shows_tool_calls_and_results(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/chat.db"
    fake_provider.script(
        calls(("c1", "remember", {"key": "tea", "value": "green"})), text("Noted.")
    )
    result = CliRunner().invoke(
        cli,
        [
            "chat",
            "--database",
            url,
            "--model",
            "fake-model",
            "--base-url",
            fake_provider.base_url,
            "--api-key",
            "sk-test",
            "--user",
            "alice",
        ],
        input="I like green tea\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert 'remember({"key": "tea", "value": "green"})' in result.output
    assert '{"remembered": true, "key": "tea"}' in result.output
    assert "assistant> Noted." in result.output
    store = open_store(url)
    assert store.get_record(Address("user", "alice", "note:tea"), time.time()) == (True, "green")
    assert fake_provider.rejected() == [] and len(fake_provider.accepted()) == 2


def test_chat_resumes_a_session_and_shows_the_healed_call(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/chat.db"
    store = open_store(url)
    now = time.time()
    session = store.create_session(
        SessionRecord(str(uuid.uuid4()), "old", "alice", "failed", "assistant", {}, now, now)
    )
    address = Address("session", session.id, "chat_history")
    store.append(
        address,
        [
            {"role": "user", "content": "weather?", "metadata": {}},
            {
                "role": "assistant",
                "content": "",
                "metadata": {
                    "tool_calls": [{"tool_call_id": "lost", "name": "recall", "args": {"key": "x"}}]
                },
            },
        ],
    )
    fake_provider.script(text("Back again."))
    result = CliRunner().invoke(
        cli,
        [
            "chat",
            "--database",
            url,
            "--session",
            session.id,
            "--model",
            "m",
            "--base-url",
            fake_provider.base_url,
        ],
        input="hello?\n/history\n",
    )
    assert result.exit_code == 0, result.output
    assert "1 tool call(s) of an interrupted turn have no result" in result.output
    assert "healed: call lost had no result" in result.output
    assert HEALED_CONTENT in result.output
    rows = store.load(address)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "user", "assistant"]
    assert check_sendable(rows) == []
    assert fake_provider.rejected() == []


def test_chat_scripted_needs_no_provider(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["chat", "--scripted", "--database", "memory://"],
        input="remember color = blue\nrecall color\nhi\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert '"value": "blue"' in result.output
    assert "You said: hi" in result.output


def test_chat_scripted_says_which_phrases_call_which_tool_when_it_starts() -> None:
    from flowmem.runtime.scripted import PHRASES, respond

    result = CliRunner().invoke(cli, ["chat", "--scripted", "--database", "memory://"], input="/quit\n")
    assert result.exit_code == 0, result.output
    banner = result.output.split("you>")[0]
    for phrase, tool in PHRASES:
        assert f"'{phrase}' → {tool}" in banner, banner
        reply = respond([{"role": "user", "content": phrase}], [])
        assert [call.name for call in reply.tool_calls] == [tool], phrase


def test_chat_unknown_session_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["chat", "--scripted", "--database", f"sqlite:///{tmp_path}/x.db", "--session", "nope"]
    )
    assert result.exit_code != 0


@pytest.mark.slow
def test_mem_3_demo_kills_a_child_and_heals_the_history() -> None:
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "with SIGKILL while forecast (call_2) was running: exit -9" in out
    assert "a provider would reject it: unanswered_call at index 1" in out
    assert '{"tool_call_id": "call_2", "healed": true}' in out
    assert "appended=0 (MEM-2)" in out
    assert "forecast ran 1 time, weather 1 time" in out
    assert out.count("check_sendable: sendable (no violations)") == 2
    assert "session status: completed" in out


def test_chat_refuses_an_unusable_owner() -> None:
    result = CliRunner().invoke(
        cli, ["chat", "--scripted", "--database", "memory://", "--user", "a b"]
    )
    assert result.exit_code == 2
    assert "not a usable user id" in result.output
