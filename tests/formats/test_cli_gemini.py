"""``flowmem check`` and ``flowmem normalize`` on Gemini contents and on payloads in no format (issue 27 §3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flowmem.cli import cli
from flowmem.cli.errors import exit_code_for
from flowmem.errors import FormatMismatchError, UnknownFormatError
from tests.formats.sdk import assert_gemini, assert_openai_chat
from tests.formats.test_unknown import LANGCHAIN, PYDANTIC_AI

HI = [{"role": "user", "parts": [{"text": "hi"}]}]
INTERRUPTED = {
    "model": "gemini-2.5-flash",
    "system_instruction": {"parts": [{"text": "Be brief."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Weather in Rome?"}]},
        {"role": "model", "parts": [
            {"text": "Checking.", "thought": True, "thought_signature": "c2ln"},
            {"function_call": {"name": "get_weather", "args": {"location": "Rome"}}}]},
        {"role": "user", "parts": [{"text": "Never mind."}]},
    ],
}  # fmt: skip


def _write(tmp_path: Path, document: object) -> str:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from flowmem.cli import main; main()", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_normalize_keeps_the_text_of_gemini_contents(tmp_path: Path) -> None:
    """Issue 27 §3: this printed ``{"role": "user", "content": ""}`` with exit 0."""
    done = _run("normalize", _write(tmp_path, HI))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"contents": HI}
    assert "format: gemini (detected)" in done.stderr
    rows = _run("normalize", "--to", "rows", _write(tmp_path, HI))
    assert json.loads(rows.stdout) == [{"role": "user", "content": "hi"}]


def test_check_reports_a_gemini_call_left_unanswered(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["check", _write(tmp_path, INTERRUPTED)])
    assert result.exit_code == 1, result.output
    assert "unanswered_call" in result.output and "format: gemini (detected)" in result.output
    named = CliRunner().invoke(cli, ["check", "--from", "gemini", _write(tmp_path, INTERRUPTED)])
    assert named.exit_code == 1


def test_normalize_heals_gemini_and_writes_it_in_any_format(tmp_path: Path) -> None:
    path = _write(tmp_path, INTERRUPTED)
    result = CliRunner().invoke(cli, ["normalize", path])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output[result.output.index("{") : result.output.rindex("}") + 1])
    assert_gemini(body["system_instruction"], body["contents"])
    assert body["system_instruction"] == INTERRUPTED["system_instruction"]
    healed = body["contents"][2]["parts"][0]["function_response"]
    assert healed["name"] == "get_weather" and "id" not in healed  # the call was sent without one
    other = CliRunner().invoke(cli, ["normalize", "--to", "openai", path])
    assert other.exit_code == 0, other.output
    assert_openai_chat(json.loads(other.output[other.output.index("[") : other.output.rindex("]") + 1]))
    assert "not carried by openai: reasoning=1" in other.output


@pytest.mark.parametrize("command", ["check", "normalize"])
@pytest.mark.parametrize(
    ("payload", "looks"),
    [(PYDANTIC_AI, "pydantic-ai"), (LANGCHAIN, "LangChain"), ([1, 2], None), ({"history": []}, None)],
    ids=["pydantic-ai", "langchain", "scalars", "unknown-body"],
)
def test_a_payload_in_no_known_format_exits_2_and_names_the_formats(
    tmp_path: Path, command: str, payload: object, looks: str | None
) -> None:
    """Issue 27 §3: a pydantic-ai dump printed ``[]`` with ``dropped: 4`` and exit 0."""
    done = _run(command, _write(tmp_path, payload))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""  # nothing written
    assert "no format flowmem reads" in done.stderr
    for name in ("rows", "openai", "responses", "anthropic", "gemini"):
        assert name in done.stderr
    if looks:
        assert looks in done.stderr
    for given in ("rows", "gemini"):
        result = CliRunner().invoke(cli, [command, "--from", given, _write(tmp_path, payload)])
        assert isinstance(result.exception, UnknownFormatError)
        assert exit_code_for(result.exception) == 2


@pytest.mark.parametrize("command", ["check", "normalize"])
def test_gemini_contents_read_as_rows_or_openai_are_refused(tmp_path: Path, command: str) -> None:
    for wrong in ("rows", "openai", "anthropic"):
        result = CliRunner().invoke(cli, [command, "--from", wrong, _write(tmp_path, INTERRUPTED)])
        assert isinstance(result.exception, FormatMismatchError), wrong
        assert "format 'gemini'" in str(result.exception)
        assert result.output == ""
