"""Smoke test of ``bench/wal_pages.py --quick``: the counts, where they go, and the model layouts.

Counts of pages, not timings: every number is exact for one SQLite version, so the
test checks what must hold whatever the version (the model's ``today`` writes what the
store wrote; every table's interior pages and rebalanced appends are within its pages).
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.smoke import assert_common, assert_wal_full, run_bench

SYSTEMS = ("flowmem store", "flowmem service", "agents SQLiteSession")


def test_quick_run_counts_pages_by_table_and_level_and_models_the_layouts(tmp_path: Path) -> None:
    found, printed = run_bench("wal_pages", tmp_path / "wal_pages.json", "--layouts")

    assert_common(found, "wal_pages", printed)
    for name in SYSTEMS:
        assert_wal_full(found["durability"][name])
        entry = found["systems"][name]
        for kind, pages in entry["pages"].items():
            assert pages and all(p >= 1 for p in pages), (name, kind)
            written = entry["tables"][kind]
            assert sum(written.values()) == sum(pages), (name, kind)
            for table, inner in entry["interior"][kind].items():
                assert 0 < inner <= written[table], (name, kind, table)
            for table, moved in entry["rebalanced"][kind].items():
                assert 0 < moved <= len(pages), (name, kind, table)
    layouts = found["plan"]["layouts"]
    assert set(layouts) == {
        "today",
        "header in the rows' tree",
        "declarations indexed when declared (before decision 0180)",
        "rowid rows",
    }
    store = found["systems"]["flowmem store"]["summary"]
    for kind in ("user", "tool call", "tool result", "answer"):  # the model's check
        assert layouts["today"][kind] == store[kind]["mean"], kind
    assert "Model layouts (--layouts)" in printed
