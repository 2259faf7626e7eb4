"""Smoke test of ``bench/adk_sessions.py --quick``: both services' reads on SQLite, the ratios, the JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import assert_wal_full, run_bench

pytest.importorskip("google.adk")


def test_quick_run_times_both_services_reads_and_writes_the_ratios(tmp_path: Path) -> None:
    found, printed = run_bench("adk_sessions", tmp_path / "adk.json")
    assert found["bench"] == "adk_sessions" and found["quick"] is True
    assert_wal_full(found["durability"]["flowmem/sqlite"], "flowmem/sqlite")
    assert found["durability"]["adk_database/sqlite"]["synchronous"] == "FULL"
    (length,) = found["lengths"].values()
    assert len(length["runs"]) == 2
    for run in length["runs"]:
        assert set(run) == {"flowmem/sqlite", "adk_database/sqlite"}
        assert all(v["whole"] > 0 and v["recent"] > 0 for v in run.values())
    assert set(length["ratios"]) == {"whole/sqlite", "recent/sqlite"}
    for ratio in length["ratios"].values():
        assert ratio["min"] <= ratio["median"] <= ratio["max"]
    assert "ADK ÷ flowmem" in printed
