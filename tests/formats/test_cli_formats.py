"""``flowmem check --format`` and ``flowmem normalize --to`` (the provider formats on the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowmem.cli import cli
from flowmem.cli.errors import exit_code_for
from flowmem.errors import InvalidInputError
from flowmem.formats import FORMATS, read_document
from tests.formats.sdk import assert_anthropic, assert_document

BROKEN_OPENAI = {
    "model": "gpt",
    "messages": [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "again"},
    ],
}
ROWS = [
    {"role": "user", "content": "hi", "metadata": {}},
    {
        "role": "assistant",
        "content": "",
        "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "f", "args": {}}]},
    },
    {"role": "user", "content": "again", "metadata": {}},
    {"role": "system", "content": "sys", "metadata": {}},
]


def _write(tmp_path: Path, document: object) -> str:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_check_format_openai_reports_the_unanswered_call(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["check", "--format", "openai", _write(tmp_path, BROKEN_OPENAI)]
    )
    assert result.exit_code == 1
    assert "unanswered_call" in result.output


@pytest.mark.parametrize("name", FORMATS)
def test_normalize_to_format_prints_a_valid_sendable_payload(tmp_path: Path, name: str) -> None:
    result = CliRunner().invoke(cli, ["normalize", "--to", name, _write(tmp_path, ROWS)])
    assert result.exit_code == 0, result.output
    body, _, _ = result.output.rpartition("dropped:")
    payload = json.loads(body)
    assert_document(name, payload)
    path = _write(tmp_path, payload)
    checked = CliRunner().invoke(cli, ["check", "--format", name, path])
    assert checked.exit_code == 0, checked.output
    assert read_document(name, payload)[0] == {"role": "system", "content": "sys"}


def test_check_format_with_unsupported_content_exits_2(tmp_path: Path) -> None:
    document = [{"role": "user", "content": [{"type": "image", "source": {}}]}]
    path = _write(tmp_path, document)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from flowmem.cli import main; main()",
            "check",
            "--format",
            "anthropic",
            path,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "error:" in done.stderr and "'image'" in done.stderr


def test_check_format_rejects_an_unknown_format(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["check", "--format", "cohere", _write(tmp_path, [])])
    assert result.exit_code == 2


def test_check_without_format_keeps_reading_flowmem_rows(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["check", _write(tmp_path, ROWS)])
    assert result.exit_code == 1
    assert "unanswered_call" in result.output


ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "call it", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
            ],
        },
        {"role": "user", "content": "hello?"},
    ],
}


def test_check_detects_an_anthropic_body_and_reports_the_unanswered_tool_use(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["check", _write(tmp_path, ANTHROPIC_BODY)])
    assert result.exit_code == 1
    assert "unanswered_call" in result.output
    assert "format: anthropic (detected)" in result.output


def test_normalize_detects_a_provider_payload_and_writes_it_back_healed(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["normalize", _write(tmp_path, ANTHROPIC_BODY)])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output[result.output.index("{") : result.output.rindex("}") + 1])
    assert_anthropic(body.get("system"), body["messages"])
    assert body["system"] == ANTHROPIC_BODY["system"]
    turn = body["messages"][1]["content"]
    assert turn[0] == {"type": "thinking", "thinking": "call it", "signature": "sig"}  # kept first
    results = body["messages"][2]["content"]
    assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == "toolu_1"


def test_normalize_to_another_format_says_what_it_did_not_carry(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["normalize", "--to", "openai", _write(tmp_path, ANTHROPIC_BODY)])
    assert result.exit_code == 0, result.output
    assert "not carried by openai: reasoning=1" in result.output


@pytest.mark.parametrize("command", ["check", "normalize"])
def test_a_provider_payload_read_as_another_format_is_refused(tmp_path: Path, command: str) -> None:
    path = _write(tmp_path, ANTHROPIC_BODY)
    for wrong in ("rows", "openai"):
        result = CliRunner().invoke(cli, [command, "--from", wrong, path])
        assert isinstance(result.exception, InvalidInputError)
        assert exit_code_for(result.exception) == 2
        assert "format 'anthropic'" in str(result.exception)
        assert result.output == ""  # nothing written


def test_normalize_keeps_content_parts_of_flowmem_rows(tmp_path: Path) -> None:
    rows = [
        {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image", "url": "https://e.com/a.png"}]},
        {"role": "assistant", "content": "a cat"},
    ]
    result = CliRunner().invoke(cli, ["normalize", _write(tmp_path, rows)])
    assert result.exit_code == 0
    assert json.loads(result.output[: result.output.rindex("]") + 1]) == rows
