"""tests/conftest.py: the garbage collector off while a test process collects, its survivors frozen, on for the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFTEST = "from tests.conftest import pytest_configure, pytest_runtestloop  # noqa: F401\n"
SAMPLE = """
import gc
import weakref

COLLECTING = gc.isenabled()


class Node:
    pass


def test_collected_with_the_collector_off_run_with_it_on():
    assert COLLECTING is False
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # what the collection left is out of the collector's way
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    kept = []
    for _ in range(100_000):  # allocations alone run the collector when it is on
        kept.append([])
        if gone() is None:
            break
    assert gone() is None
"""


@pytest.mark.parametrize(
    "mode", [["-p", "no:xdist"], ["-n", "1"]], ids=["one process", "an xdist worker"]
)
def test_the_collector_is_off_while_collecting_and_on_for_the_tests(
    tmp_path: Path, mode: list[str]
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    outer = {
        k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")
    }  # an xdist worker's
    # the plugins the suite loads (pyproject.toml's addopts leave langsmith's out; -c os.devnull
    # reads no addopts, so it is named here): ~0.4 s of imports less in each process
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:randomly", *mode,
         "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, env={**outer, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
