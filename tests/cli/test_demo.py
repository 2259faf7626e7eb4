"""``flowmem demo`` runs and shows healing, replacement and normalization."""

from __future__ import annotations

import gc
import warnings

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


def test_the_demo_leaves_no_file_of_its_killed_child_open(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        result = run_cli("demo")
        gc.collect()
    assert result.code == 0, result.err
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
