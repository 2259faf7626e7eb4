"""Smoke test of ``bench/wal_postgres.py --quick``: WAL per append counted on a durable throwaway server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import assert_common, run_bench, server_binaries


def test_quick_run_counts_each_kind_of_append_on_a_durable_server(tmp_path: Path) -> None:
    if not server_binaries():
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    found, printed = run_bench(
        "wal_postgres", tmp_path / "wal.json", "--only", "flowmem store,langchain-postgres"
    )

    assert_common(found, "wal_postgres", printed)
    entry = found["durability"]["PostgreSQL"]
    assert (entry["fsync"], entry["synchronous_commit"], entry["full_page_writes"]) == (
        "on",
        "on",
        "on",
    )
    wal = found["wal_per_append"]
    assert set(wal) == {"flowmem store", "langchain-postgres"}
    kinds = ("user", "assistant call", "tool result", "assistant text", "heal", "conversation")
    for system in wal.values():
        assert set(system) == set(kinds)
        for kind in kinds:
            # every append commits: at least its row, its key and the commit record
            assert system[kind]["records"]["min"] >= 3, kind
            assert system[kind]["bytes"]["min"] > system[kind]["bytes_without_images"]["min"] * 0.5
    # a tool result writes its answer's row and key entry too (carrying its call's declaration,
    # which the call itself only lists in the header: decision 0190): more than a plain message
    ours = wal["flowmem store"]
    assert ours["tool result"]["records"]["min"] > ours["assistant text"]["records"]["max"]
    assert ours["assistant call"]["records"]["max"] < ours["tool result"]["records"]["min"]
    labels = [t["label"] for t in found["targets"]]
    assert "flowmem store conversation: WAL bytes / langchain-postgres's" in labels


def test_vacuumed_quick_run_gives_each_tables_full_page_image_bytes(tmp_path: Path) -> None:
    """``--vacuumed`` (a VACUUM before the checkpoint, peers_postgres' regime) and ``--setup`` (a
    schema variant on flowmem's databases) are recorded, and each kind's full-page image
    bytes by table add up to its bytes less those without images."""
    if not server_binaries():
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    found, printed = run_bench(
        "wal_postgres",
        tmp_path / "wal.json",
        "--only",
        "flowmem store,langchain-postgres",
        "--vacuumed",
        "--setup",
        "CREATE INDEX wal_probe ON buffer_rows (buffer_id, pos)",
    )

    assert_common(found, "wal_postgres", printed)
    assert found["vacuumed"] is True
    assert "a VACUUM before each checkpoint" in printed
    # the schema variant ran on flowmem's database: every row also writes the probe's entry
    assert found["setup"] == ["CREATE INDEX wal_probe ON buffer_rows (buffer_id, pos)"]
    parts = found["wal_per_append"]["flowmem store"]["assistant text"]["parts"]
    assert parts.get("Btree INSERT_LEAF wal_probe", 0) >= 0.9
    assert not any(
        "wal_probe" in p for p in found["wal_per_append"]["langchain-postgres"]["user"]["parts"]
    )
    for kind, entry in found["wal_per_append"]["flowmem store"].items():
        images = entry["bytes"]["min"] - entry["bytes_without_images"]["min"]  # one run
        assert sum(entry["part_image_bytes"].values()) == pytest.approx(images), kind
        assert set(entry["part_image_bytes"]) <= set(entry["parts"]), kind
    # the first append after the checkpoint images at least the header's page
    assert found["wal_per_append"]["flowmem store"]["conversation"]["fpi"]["min"] > 0
