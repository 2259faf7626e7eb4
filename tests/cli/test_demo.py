"""``flowmem demo`` runs and shows healing, replacement and normalization."""

from __future__ import annotations

import pytest

from flowmem.core import HEALED_CONTENT
from tests.cli.conftest import RunCli


def test_demo_runs_and_ends_sendable(run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one table row per line
    result = run_cli("demo")
    assert result.code == 0, result.err
    assert HEALED_CONTENT in result.out
    assert '"healed": true' in result.out
    assert "appended=0 (MEM-2)" in result.out
    assert "unanswered_call" in result.out
    assert "18°C, sunny" in result.out
    assert "check_sendable: sendable" in result.out
    assert "NOT sendable" not in result.out
