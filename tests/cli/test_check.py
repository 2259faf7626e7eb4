"""``flowmem check`` and ``flowmem normalize``: exit codes, output, stdin and files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from flowmem.core import normalize
from tests.cli.conftest import RunCli

SENDABLE: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "weather"}]},
    {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
]

BROKEN: list[Any] = [
    {"role": "tool", "content": "stray", "tool_call_id": "zz"},
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}, {"id": "c1"}]},
    {"role": "system", "content": "late system"},
    "not a message",
]

# OpenAI chat completions format: assistant content null, tool_calls[].id, function.
OPENAI_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc123",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_abc123", "content": '{"temp": 21}'},
    {"role": "assistant", "content": "It is 21°C."},
]


def lines(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if line]


# --- check -------------------------------------------------------------------------------


def test_check_exits_0_on_a_sendable_file(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(SENDABLE), encoding="utf-8")
    result = run_cli("check", str(path))
    assert result.code == 0
    assert result.out == ""
    assert "no violations" in result.err


def test_check_exits_1_listing_index_and_code(run_cli: RunCli) -> None:
    result = run_cli("check", "-", stdin=json.dumps(BROKEN))
    assert result.code == 1
    found = [(int(index), code) for index, code, _ in lines(result.out)]
    assert found == [
        (0, "tool_leading"),
        (2, "duplicate_call_id"),
        (2, "unanswered_call"),
        (3, "system_after_non_system"),
        (4, "invalid_message"),
    ]
    assert "5 violation(s)" in result.err


def test_check_reads_stdin_by_default(run_cli: RunCli) -> None:
    result = run_cli("check", stdin=json.dumps([{"role": "tool", "content": "x"}]))
    assert result.code == 1
    assert lines(result.out)[0][:2] == ["0", "tool_leading"]


def test_check_openai_chat_format_is_sendable(run_cli: RunCli) -> None:
    result = run_cli("check", "-", stdin=json.dumps(OPENAI_CHAT))
    assert result.code == 0, result.out


def test_check_openai_chat_format_missing_result(run_cli: RunCli) -> None:
    crashed = [m for m in OPENAI_CHAT if m["role"] != "tool"]
    result = run_cli("check", "-", stdin=json.dumps(crashed))
    assert result.code == 1
    assert [row[:2] for row in lines(result.out)] == [["2", "unanswered_call"]]
    assert "call_abc123" in result.out


RESPONSES_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Lisbon?"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "call_x", "name": "weather", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_x", "output": "18C"},
    {"role": "user", "content": "And Porto?"},
    {"type": "function_call_output", "call_id": "call_y", "output": "stray"},
]


def test_check_reports_a_responses_item_at_its_own_index(run_cli: RunCli) -> None:
    """Issue 24 §5: ``call_y`` at item 5 was reported at index 4 (a flowmem row)."""
    result = run_cli("check", "--from", "responses", "-", stdin=json.dumps(RESPONSES_ITEMS))
    assert result.code == 1
    assert [row[:2] for row in lines(result.out)] == [["5", "orphan_result"]]
    detected = run_cli("check", "-", stdin=json.dumps({"input": RESPONSES_ITEMS}))
    assert [row[:2] for row in lines(detected.out)] == [["5", "orphan_result"]]


def test_check_reports_an_anthropic_message_at_its_own_index(run_cli: RunCli) -> None:
    body = {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}]},
            {"role": "user", "content": "never mind"},
        ],
    }
    result = run_cli("check", "-", stdin=json.dumps(body))
    assert "format: anthropic (detected)" in result.err
    assert [row[:2] for row in lines(result.out)] == [["1", "unanswered_call"]]


def test_check_from_openai_accepts_a_system_message_mid_conversation(run_cli: RunCli) -> None:
    """Chat Completions takes system messages anywhere: no violation there, as there is none."""
    late = [*OPENAI_CHAT, {"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Et demain ?"}]
    result = run_cli("check", "--from", "openai", "-", stdin=json.dumps(late))
    assert (result.code, result.out) == (0, ""), result.out
    as_rows = run_cli("check", "--from", "rows", "-", stdin=json.dumps([late[0], late[1], late[-2]]))
    assert [row[:2] for row in lines(as_rows.out)] == [["2", "system_after_non_system"]]


def test_check_accepts_stored_rows_and_a_messages_object(run_cli: RunCli) -> None:
    stored = [
        {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c1"}]}},
        {"role": "tool", "content": "x", "metadata": {"tool_call_id": "c1", "healed": True}},
    ]
    assert run_cli("check", "-", stdin=json.dumps({"messages": stored})).code == 0


def test_check_exits_2_on_invalid_json(run_cli: RunCli) -> None:
    result = run_cli("check", "-", stdin="{not json")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("error: ")
    assert len(result.err.strip().splitlines()) == 1


def test_check_exits_2_on_a_missing_file(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("check", str(tmp_path / "absent.json"))
    assert result.code == 2
    assert result.err.startswith("error: cannot read")
    assert len(result.err.strip().splitlines()) == 1


def test_check_exits_2_when_the_document_is_not_a_list(run_cli: RunCli) -> None:
    for document in ('{"role": "user"}', '"text"', "42", "null"):
        result = run_cli("check", "-", stdin=document)
        assert result.code == 2, document
        assert len(result.err.strip().splitlines()) == 1


def test_check_exits_2_on_bytes_that_are_not_utf8(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    assert run_cli("check", str(path)).code == 2


# --- normalize ------------------------------------------------------------------------------


def test_normalize_prints_json_and_dropped_on_stderr(run_cli: RunCli) -> None:
    result = run_cli("normalize", "-", stdin=json.dumps(BROKEN))
    assert result.code == 0
    printed = json.loads(result.out)
    expected = normalize(BROKEN)
    assert printed == expected.messages
    assert printed[0] == {"role": "system", "content": "late system"}
    assert result.err.strip() == f"dropped: {expected.dropped}"
    assert expected.dropped == 3  # the stray result, the duplicate call, the non-message


def test_normalize_output_passes_check(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(BROKEN), encoding="utf-8")
    normalized = run_cli("normalize", str(path))
    assert run_cli("check", "-", stdin=normalized.out).code == 0


def test_normalize_keeps_unicode_readable(run_cli: RunCli) -> None:
    result = run_cli("normalize", "-", stdin=json.dumps(OPENAI_CHAT))
    assert "21°C" in result.out
    assert result.err.splitlines() == ["format: openai (detected)", "dropped: 0"]


def test_normalize_exits_2_on_unreadable_input(run_cli: RunCli) -> None:
    result = run_cli("normalize", "-", stdin="[1, 2")
    assert result.code == 2
    assert result.out == ""


# --- the installed console script ------------------------------------------------------------


def test_console_script_exit_codes() -> None:
    script = Path(sys.executable).with_name("flowmem")
    command = (
        [str(script)]
        if script.exists()
        else [sys.executable, "-c", "from flowmem.cli import main; main()"]
    )
    broken = subprocess.run(
        [*command, "check", "-"],
        input=json.dumps(BROKEN),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broken.returncode == 1
    assert broken.stdout.startswith("0\ttool_leading\t")
    bad = subprocess.run(
        [*command, "check", "-"], input="oops", capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ")


def test_normalize_and_check_refuse_unstorable_text_with_exit_2(run_cli: RunCli) -> None:
    """A lone surrogate in the input is invalid_text (exit 2), never a traceback (issue 12)."""
    text = json.dumps([{"role": "user", "content": "\ud800"}])
    for command in ("check", "normalize"):
        result = run_cli(command, "-", stdin=text)
        assert result.code == 2, result
        assert "cannot be stored" in result.err and result.out == ""
