"""``flowmem serve``'s metrics directory: new, private, handed to the workers, removed at the end."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.api.metrics import METRICS_ENV, MULTIPROC_ENV
from flowmem.cli.metricsdir import OWNER, metrics_directory, remove_abandoned

SERVER = """
import time
from flowmem.cli.metricsdir import metrics_directory
with metrics_directory(True) as directory:
    open(directory + "/counter_1.db", "wb").close()
    print(directory, flush=True)
    time.sleep(120)
"""


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


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``tempfile``'s directory (this process's and a server's) is the test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(METRICS_ENV, raising=False)
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    yield tmp_path


def _server(parent: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process holding a metrics directory in ``parent``, as ``flowmem serve`` does; it and its directory."""
    env = {**os.environ, "TMPDIR": str(parent)}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, env=env
    )
    assert server.stdout is not None
    with server.stdout:
        return server, Path(server.stdout.readline().strip())


def test_a_killed_servers_directory_is_removed_by_the_next_server(own_tmp: Path) -> None:
    server, left = _server(own_tmp)
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    assert (left / "counter_1.db").exists()  # SIGKILL: no cleanup ran
    with metrics_directory(True) as new:
        assert new is not None and Path(new).exists()
        assert not left.exists()
        assert not Path(str(left) + OWNER).exists()
    assert sorted(own_tmp.iterdir()) == []  # and its own is gone at its stop


def test_a_running_servers_directory_is_kept(own_tmp: Path) -> None:
    server, running = _server(own_tmp)
    try:
        assert remove_abandoned(str(own_tmp)) == []
        with metrics_directory(True):
            assert (running / "counter_1.db").exists()
    finally:
        server.kill()
        server.wait()
    assert remove_abandoned(str(own_tmp)) == [str(running)]


def test_directories_without_an_owner_file_and_links_are_left_alone(own_tmp: Path) -> None:
    older = own_tmp / "flowmem-metrics-older"  # an older flowmem's, or one being made
    older.mkdir()
    elsewhere = own_tmp / "elsewhere"
    elsewhere.mkdir()
    (own_tmp / ("flowmem-metrics-link" + OWNER)).symlink_to(elsewhere / "x")
    assert remove_abandoned(str(own_tmp)) == []
    assert older.exists() and elsewhere.exists()
