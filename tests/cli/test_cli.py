"""Commands load on use; one whose extra is missing names the extra instead of crashing."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from flowmem.cli import COMMANDS, cli


def test_every_command_is_listed_and_loads() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output
        assert cli.get_command(None, name) is not None  # type: ignore[arg-type]


def test_a_command_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if flowmem[server] were not installed
    monkeypatch.delitem(sys.modules, "flowmem.cli.serve", raising=False)
    result = CliRunner().invoke(cli, ["serve"])
    assert result.exit_code == 2
    assert "pip install '<checkout>[server]'" in result.output
    listing = CliRunner().invoke(cli, ["--help"])
    assert listing.exit_code == 0 and "needs pip install '<checkout>[server]'" in listing.output


def test_a_command_without_its_extra_names_it_whatever_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """``flowmem chat --scripted`` on the base install names the extra, not the option (issue 43)."""
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    monkeypatch.delitem(sys.modules, "flowmem.cli.serve", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--port", "1", "--scripted", "extra-argument"])
    assert result.exit_code == 2
    assert "[server]" in result.output and "No such option" not in result.output
    helped = CliRunner().invoke(cli, ["serve", "--help"])
    assert helped.exit_code == 0 and "[server]" in helped.output


def test_check_works_whatever_extras_are_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("uvicorn", "fastapi", "httpx", "psycopg"):
        monkeypatch.setitem(sys.modules, module, None)
    result = CliRunner().invoke(cli, ["check", "-"], input="[]")
    assert result.exit_code == 0


@pytest.mark.parametrize("args", [["token", "list"], ["user", "erase", "nobody", "--yes"]])
def test_token_and_user_work_without_the_server_extra(
    monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    for module in ("uvicorn", "fastapi", "httpx"):
        monkeypatch.setitem(sys.modules, module, None)
    for loaded in ("flowmem.cli.serve", "flowmem.cli.token", "flowmem.cli.user"):
        monkeypatch.delitem(sys.modules, loaded, raising=False)
    result = CliRunner().invoke(cli, [*args, "--database", "memory://"])
    assert result.exit_code == 0, result.output


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["nope"])
    assert result.exit_code == 2
