"""Run the ``flowmem`` console entry point in-process, capturing exit code and streams."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from flowmem.cli import main


@dataclass
class CliRun:
    """What one CLI run produced."""

    code: int
    out: str
    err: str


RunCli = Callable[..., CliRun]


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Return a function running ``flowmem ARGS`` with STDIN, as the console script does."""

    def run(*args: str, stdin: str = "") -> CliRun:
        monkeypatch.setattr(sys, "argv", ["flowmem", *args])
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return run
