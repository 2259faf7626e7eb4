"""Smoke test of ``bench/core.py --quick``: it runs and writes its JSON beside the table.

No timing is asserted (timed tests flake on a shared machine); a full run judges the
targets, ``--quick`` never fails on them.
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.smoke import assert_common, run_bench


def test_quick_run_writes_every_best_time_and_says_it_stores_nothing(tmp_path: Path) -> None:
    found, printed = run_bench("core", tmp_path / "core.json")

    assert_common(found, "core", printed)
    assert found["durability"] == {} and found["all_durable"] is None
    assert "durability: no database" in printed
    assert found["sizes"] == [100, 1000]
    for size in ("100", "1000"):
        assert found["best_s"][size]["normalize"] > 0
        assert len(found["samples_s"][size]["normalize"]) == found["repeats"]
        assert found["histories"][size]["violations_before"] > 0
    labels = [t["label"] for t in found["targets"]]
    assert any(label.startswith("linear normalize") for label in labels), labels
