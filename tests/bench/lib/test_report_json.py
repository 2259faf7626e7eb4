"""bench/lib/report_json.py: the durability read from a SQLite database, the JSON every bench writes."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import pytest

from tests.bench.smoke import BENCH, bench_lib

report_json = bench_lib("report_json")


def wal_file(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


@pytest.mark.parametrize(
    ("synchronous", "durable", "label"),
    [
        ("FULL", True, "SQLite: journal_mode=wal, synchronous=FULL"),
        ("EXTRA", True, "SQLite: journal_mode=wal, synchronous=EXTRA"),
        (
            "NORMAL",
            False,
            "SQLite: NOT DURABLE on power loss: journal_mode=wal, synchronous=NORMAL",
        ),
    ],
)
def test_sqlite_durability_is_read_from_the_connection(
    tmp_path: Path, synchronous: str, durable: bool, label: str
) -> None:
    conn = wal_file(tmp_path / "a.db", synchronous)
    try:
        entry = report_json.sqlite_durability(conn)
    finally:
        conn.close()

    assert (entry["journal_mode"], entry["synchronous"]) == ("wal", synchronous)
    assert entry["durable"] is durable and entry["label"] == label
    assert entry["synchronous_source"] == "PRAGMA on the system's connection"


def test_a_flowmem_file_reports_its_journal_and_the_setting_flowmem_uses(tmp_path: Path) -> None:
    wal_file(tmp_path / "f.db", "FULL").close()

    entry = report_json.flowmem_sqlite_durability(tmp_path / "f.db", "full")

    assert (entry["journal_mode"], entry["synchronous"], entry["durable"]) == ("wal", "FULL", True)
    assert "group commit" in entry["note"]


def test_the_default_json_path_is_bench_results() -> None:
    parser = argparse.ArgumentParser()
    report_json.add_arguments(parser, "store", "tiny")

    args = parser.parse_args([])
    assert args.json == BENCH / "results" / "store.json" and args.quick is False


def test_write_puts_the_shared_fields_beside_the_measurements(tmp_path: Path) -> None:
    targets = report_json.Targets()
    targets.check("ratio", 1.5, 1.0)
    targets.check("p99 ms", 120.0, 100, at_most=True)
    meta = report_json.environment(["pytest"])
    durability = {
        "db": {"backend": "sqlite", "durable": True, "label": "x"},
        "memory": report_json.no_database("none"),
    }
    out = tmp_path / "deep" / "b.json"

    report_json.write(out, "b", ["--x"], meta, durability, targets.items, {"rate": [1, 2]})

    found = json.loads(out.read_text())
    assert found["bench"] == "b" and found["command"] == "python bench/b.py --x"
    assert found["rate"] == [1, 2] and "pytest" in found["versions"]
    assert found["all_durable"] is True  # a system storing nothing does not count
    assert [t["met"] for t in found["targets"]] == [True, False]
    assert found["targets_met"] is False and targets.failed == ["p99 ms"]


def test_a_quick_run_records_its_targets_unjudged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    targets = report_json.Targets(quick=True)
    targets.check("ratio", 0.5, 1.0)
    out = tmp_path / "q.json"

    report_json.write(out, "q", [], report_json.environment(), {}, targets.items, {}, quick=True)

    found = json.loads(out.read_text())
    assert found["targets"][0]["met"] is False and found["targets_met"] is None
    assert "not judged" in capsys.readouterr().out
