"""``flowmem serve``'s metrics directory: new, private, handed to the workers, removed at the end."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flowmem.api.metrics import METRICS_ENV, MULTIPROC_ENV
from flowmem.cli.metricsdir import metrics_directory


def test_each_server_gets_a_new_private_directory_removed_when_it_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(METRICS_ENV, raising=False)
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    with metrics_directory(True) as first:
        assert first is not None
        path = Path(first)
        assert list(path.iterdir()) == []
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
        assert os.environ[MULTIPROC_ENV] == first
        assert os.environ[METRICS_ENV] == "1"
        (path / "counter_1.db").write_bytes(b"left by a worker")
    assert not path.exists()
    assert MULTIPROC_ENV not in os.environ
    assert METRICS_ENV not in os.environ  # as before the server
    with metrics_directory(True) as second:
        assert second != first  # nothing of an earlier run is ever added in


def test_without_metrics_no_directory_and_the_workers_are_told(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(METRICS_ENV, "1")
    monkeypatch.setenv(MULTIPROC_ENV, "/somewhere/else")
    with metrics_directory(False) as directory:
        assert directory is None
        assert os.environ[METRICS_ENV] == "0"
        assert MULTIPROC_ENV not in os.environ
    assert os.environ[MULTIPROC_ENV] == "/somewhere/else"
