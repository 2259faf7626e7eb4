"""Smoke test of ``bench/memory_engine.py --quick``: every call timed on the three engines.

No timing is asserted (timed tests flake on a shared machine); a full run judges the
targets, ``--quick`` never fails on them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.bench.smoke import assert_common, run_bench

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")


def test_quick_run_times_every_call_on_every_engine(tmp_path: Path) -> None:
    found, printed = run_bench("memory_engine", tmp_path / "memory_engine.json")

    assert_common(found, "memory_engine", printed)
    assert found["engines"] == ["memory://", "sqlite tmpfs", "sqlite memdb"]
    (run,) = found["runs"]["100"]
    for engine in found["engines"]:
        assert set(run[engine]) >= {
            "append user",
            "heal",
            "load all",
            "checkpoint put+get",
            "open+close",
        }
        assert all(seconds > 0 for seconds in run[engine].values()), engine
    assert "| heal |" in printed and "suite" not in found
