"""The shell commands the docs run on the shipped samples (``examples/``) run as written.

``tests/test_doc_samples.py`` runs the docs' python blocks; a shell block is not
run there. Every command of a ```sh block in README.md or docs/ that names a file
under ``examples/`` is run here from the checkout's root: ``flowmem …`` through
click's ``CliRunner``, ``curl …`` against the app in process (``TestClient``, a
user token for ``$TOKEN``). So a sample the docs name ships, and its command works.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from flowmem.api import create_app
from flowmem.cli import cli
from flowmem.store import open_store
from tests.api.helpers import make_tokens

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL = re.compile(r"^```(?:sh|bash|console)\n(.*?)^```", re.S | re.M)
SAMPLE = re.compile(r"examples/[\w.-]+")


def _commands(doc: Path) -> list[str]:
    """Every command of the doc's shell blocks (continued lines joined)."""
    commands: list[str] = []
    for block in SHELL.findall(doc.read_text(encoding="utf-8")):
        command = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                command += line.rstrip()[:-1] + " "
                continue
            commands.append(command + line)
            command = ""
    return commands


SAMPLE_COMMANDS = [
    (doc.relative_to(ROOT).as_posix(), command)
    for doc in DOCS
    for command in _commands(doc)
    if SAMPLE.search(command)
]


def test_the_docs_run_the_shipped_samples() -> None:
    named = {path for _, command in SAMPLE_COMMANDS for path in SAMPLE.findall(command)}
    assert {"examples/history.json", "examples/anthropic-request.json"} <= named
    assert {doc for doc, _ in SAMPLE_COMMANDS} >= {"README.md", "docs/api.md"}
    shipped = {path.relative_to(ROOT).as_posix() for path in (ROOT / "examples").iterdir()}
    assert named <= shipped, sorted(named - shipped)  # every sample the docs name ships
    assert shipped <= named, sorted(shipped - named)  # and every shipped sample is shown


@pytest.fixture
def http() -> Iterator[tuple[TestClient, str]]:
    store = open_store("memory://")
    tokens = make_tokens(store)
    with TestClient(create_app(store)) as client:
        yield client, tokens["alice"]
    store.close()


def _words(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def _flowmem(words: list[str]) -> tuple[int, str]:
    """Run ``flowmem ARGS`` through click's runner; return the exit code and stdout."""
    result = CliRunner().invoke(cli, words[1:], catch_exceptions=False)
    return result.exit_code, result.stdout


def _curl(words: list[str], client: TestClient, token: str) -> Any:
    """Send what a ``curl -s -X METHOD URL -H … -d …`` command sends; return the JSON answer."""
    method, url, headers, data = "GET", "", {}, None
    args = iter(words[1:])
    for word in args:
        if word == "-X":
            method = next(args)
        elif word == "-H":
            name, _, value = next(args).partition(":")
            headers[name.strip()] = value.strip().replace("$TOKEN", token)
        elif word == "-d":
            data = next(args)
        elif not word.startswith("-"):
            url = word
    if data is not None and data.startswith("@"):
        data = Path(data[1:]).read_text(encoding="utf-8")
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    response = client.request(method, path, headers=headers, content=data)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(("doc", "command"), SAMPLE_COMMANDS, ids=[c for _, c in SAMPLE_COMMANDS])
def test_a_documented_command_on_a_shipped_sample_runs(
    doc: str, command: str, http: tuple[TestClient, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    words = _words(command)
    program = Path(words[0]).name
    if program == "flowmem":
        code, out = _flowmem(words)
        if words[1] == "check":
            assert code in (0, 1)
            assert all(re.fullmatch(r"\d+\t\w+\t.+", line) for line in out.splitlines()), out
        else:
            assert code == 0
            json.loads(out)
    elif program == "curl":
        answer = _curl(words, *http)
        assert "format" in answer
    else:
        pytest.fail(f"{doc}: no runner for {program!r} ({command})")


def test_the_readme_check_reports_the_unanswered_call_and_normalize_heals_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    code, out = _flowmem(["flowmem", "check", "examples/history.json"])
    assert code == 1
    assert [line.split("\t")[:2] for line in out.splitlines()] == [["2", "unanswered_call"]]
    code, out = _flowmem(["flowmem", "normalize", "--to", "anthropic", "examples/history.json"])
    body = json.loads(out)
    assert code == 0 and body["system"] == "You are a weather assistant. Be brief."
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "call_lisbon"


def test_the_api_samples_answer_as_documented(http: tuple[TestClient, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    client, token = http
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = (ROOT / "examples" / "anthropic-request.json").read_bytes()
    normalized = client.post("/v1/normalize?to=openai", headers=auth, content=request).json()
    assert (normalized["format"], normalized["to"], normalized["dropped"]) == ("anthropic", "openai", 0)
    assert [m["role"] for m in normalized["messages"]] == ["system", "user", "assistant", "tool", "user"]
    history = (ROOT / "examples" / "history.json").read_bytes()
    checked = client.post("/v1/check", headers=auth, content=history).json()
    assert checked["format"] == "openai"
    assert [(v["index"], v["code"]) for v in checked["violations"]] == [(2, "unanswered_call")]
