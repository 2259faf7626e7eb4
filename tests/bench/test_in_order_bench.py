"""Smoke test of ``bench/in_order.py --quick``: each adapter before and after, timed and its thread hops counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import assert_wal_full, run_bench

pytest.importorskip("langgraph")
pytest.importorskip("google.adk")
pytest.importorskip("pydantic_ai")


def test_quick_run_times_each_adapter_before_and_after_and_counts_thread_hops(tmp_path: Path) -> None:
    found, printed = run_bench("in_order", tmp_path / "in_order.json")
    assert found["bench"] == "in_order" and found["quick"] is True
    assert_wal_full(found["durability"]["flowmem/sqlite"], "flowmem/sqlite")
    assert set(found["cases"]) == {
        "langgraph store, sequential",
        "langgraph store, five at once",
        "langgraph saver, a run (per run)",
        "langgraph saver, 4 runs at once",
        "adk append_event + get_session",
        "pydantic-ai load + save",
    }
    for case in found["cases"].values():
        for variant in ("before", "after"):
            assert 0 < case[variant]["min_us"] <= case[variant]["median_us"]
            assert case[variant]["hops_per_call"] > 0
        assert case["ratio_of_minimums"] > 0
    assert "hops b/a" in printed
