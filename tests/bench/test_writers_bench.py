"""Smoke test of ``bench/writers.py --quick``: the phases run, the JSON states the file's durability.

No timing is asserted: the quick phases are far too short to judge the tail.
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.smoke import assert_common, assert_wal_full, run_bench


def test_quick_run_writes_every_phase_at_flowmems_default_durability(tmp_path: Path) -> None:
    found, printed = run_bench("writers", tmp_path / "writers.json")

    assert_common(found, "writers", printed)
    (entry,) = found["durability"].values()
    assert_wal_full(entry)
    assert found["all_durable"] is True
    assert set(found["runs"]) == {"after"}  # --quick measures the code under test only
    for phase in ("single", "4 threads", "4 processes"):
        (run,) = found["runs"]["after"][phase]
        assert run["rate"] > 0 and run["p99"] > 0, phase
    labels = {t["label"] for t in found["targets"]}
    assert "4 processes: p99 / single-writer p99" in labels
