"""Smoke test of ``bench/read_memory.py --quick``: it runs and writes its JSON with the run's environment."""

from __future__ import annotations

from pathlib import Path

from tests.bench.smoke import assert_wal_full, run_bench


def test_quick_run_writes_its_json_with_the_machine_and_the_durability(tmp_path: Path) -> None:
    found, printed = run_bench("read_memory", tmp_path / "read_memory.json")
    assert found["bench"] == "read_memory" and found["quick"] is True
    assert found["command"].startswith("python bench/read_memory.py --quick")
    for key in ("date", "commit", "machine", "python", "sqlite"):
        assert found[key], key
    assert found["buffer_mib"] == 2 and found["readers"] == 4
    assert found["identical"] is True
    (rows,) = found["paths"]  # --quick reads the plain rows only (--paths all: every read path)
    assert rows["path"] == "rows" and rows["errors"] == []
    assert rows["rss_peak_mib"] >= rows["rss_before_mib"] > 0
    assert rows["health_ms"]["n"] >= 1
    assert_wal_full(found["durability"]["flowmem"], "flowmem")
    assert '"rss_peak_mib"' in printed
