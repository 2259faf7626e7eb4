"""Smoke test of ``bench/http.py --quick`` on SQLite: a real ``flowmem serve``, three phases, JSON.

No timing is asserted (1 s phases on a shared machine); what must hold even then is
asserted: no error, every acknowledged append stored once, the durability stated.
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.smoke import assert_common, assert_wal_full, run_bench


def test_quick_run_on_sqlite_writes_every_phase_and_the_durability(tmp_path: Path) -> None:
    found, printed = run_bench("http", tmp_path / "http.json", "--backend", "sqlite")

    assert_common(found, "http", printed)
    ((label, entry),) = found["durability"].items()
    assert label.startswith("SQLite (synchronous=full)")
    assert_wal_full(entry)
    (backend,) = found["backends"]
    assert [p["name"] for p in backend["phases"]] == ["ceiling", "append", "mixed"]
    append = backend["phases"][1]["kinds"]["append"]
    assert append["requests"] > 0 and append["latency_ms"]["0.99"] > 0
    assert backend["verify"]["acknowledged"] > 0
    assert backend["verify"]["lost"] == backend["verify"]["duplicated"] == 0
    errors = next(t for t in found["targets"] if t["label"].endswith(": errors"))
    assert errors["met"] is True
