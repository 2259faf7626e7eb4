"""Smoke test of ``bench/pa_conversations.py --quick``: each system's turns and loads, the ratios, the JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench

pytest.importorskip("pydantic_ai.conversation_store")


def test_quick_run_times_each_system_s_turns_and_writes_the_ratios(tmp_path: Path) -> None:
    found, printed = run_bench("pa_conversations", tmp_path / "pa.json")
    assert found["bench"] == "pa_conversations" and found["quick"] is True
    assert found["durability"]["flowmem"]["durable"] is True
    assert found["durability"]["json_sqlite_row"]["synchronous"] == "FULL"
    (length,) = found["lengths"].values()
    assert len(length["runs"]) == 2
    for run in length["runs"]:
        assert set(run) == {"flowmem", "json_file", "json_sqlite_row"}
        assert all(run[name]["turn"] > 0 and run[name]["load"] > 0 for name in run)
    for ratio in length["ratios"].values():
        assert len(ratio["per_run"]) == 2 and ratio["min"] <= ratio["median"] <= ratio["max"]
    assert "turn_vs_json_file" in printed
