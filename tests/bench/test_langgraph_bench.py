"""Smoke test of ``bench/langgraph.py --quick``: it runs, and its JSON has every saver and length.

No timing is asserted (timed tests flake on a shared machine): the benchmark's targets
are judged by a full run, and ``--quick`` never fails on them. With PostgreSQL (the
session's throwaway server, required in CI) the run includes ``PostgresSaver`` and
``FlowmemSaver`` on PostgreSQL; without it, the SQLite savers only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.bench.smoke import assert_wal_full, run_script

GRAPH_ALONE = "graph alone (no checkpointer)"
NULL_SAVER = "null saver (LangGraph's checkpointing alone)"
SQLITE_SAVERS = {"FlowmemSaver SQLite", "InMemorySaver", "SqliteSaver"}
POSTGRES_SAVERS = {"FlowmemSaver PostgreSQL", "PostgresSaver"}
FLOWMEM_SAVERS = {"FlowmemSaver SQLite", "FlowmemSaver PostgreSQL"}
LENGTHS = ("100", "200")


def test_quick_run_reports_every_saver_and_length(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    try:
        url: str | None = request.getfixturevalue("postgres_url")
    except pytest.skip.Exception:
        url = None  # no server binaries outside CI: the SQLite savers only
    out = tmp_path / "langgraph.json"
    command = ["--quick", "--json", str(out)]
    if url is not None:
        command += ["--postgres", url]
    done = run_script("langgraph", *command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    found = json.loads(out.read_text())
    expected = SQLITE_SAVERS | (POSTGRES_SAVERS if url is not None else set())
    durability = found["durability"]  # each saver's storage, as it reports it
    assert set(durability) == expected | {GRAPH_ALONE, NULL_SAVER}
    for name in ("FlowmemSaver SQLite", "SqliteSaver"):
        assert_wal_full(durability[name], name)
    assert durability["InMemorySaver"]["backend"] == "none"
    for name in POSTGRES_SAVERS & set(durability):  # the session's server runs fsync=off
        assert durability[name]["fsync"] == "off" and "NON-DURABLE" in durability[name]["label"]
    for entry in durability.values():
        assert "durability: " in done.stdout and entry["label"] in done.stdout
    assert set(found["savers"]) == expected | {GRAPH_ALONE, NULL_SAVER}
    alone = found["savers"].pop(GRAPH_ALONE)  # the floor: a step time per length, nothing stored
    null = found["savers"].pop(NULL_SAVER)  # LangGraph's checkpointing alone: grown, nothing stored
    for length in LENGTHS:
        assert alone["lengths"][length]["how"] == "graph alone"
        assert alone["lengths"][length]["step_s_median"] > 0
        assert null["lengths"][length]["how"] == "grown"
        assert null["lengths"][length]["cpu_s_median"] > 0
    assert found["lengths"] == [100, 200]
    assert found["messages_json_bytes"] > 0
    for name, saver in found["savers"].items():
        assert set(saver["lengths"]) == set(LENGTHS), name
        for length in LENGTHS:
            cell = saver["lengths"][length]
            assert cell["how"] == "grown", (name, length, cell["how"])
            assert cell["step_s_median"] > 0, (name, length)
            assert cell["get_tuple_s_median"] > 0, (name, length)
            assert cell["get_state_s_median"] > 0, (name, length)
            if name in FLOWMEM_SAVERS:
                assert cell["get_tuple_cold_s_median"] > 0, (name, length)
            # the storage at every grown length, which bench/report.py plots
            assert cell["storage_bytes"] and all(b > 0 for b in cell["storage_bytes"]), name
        assert saver["storage_bytes"] and all(b > 0 for b in saver["storage_bytes"]), name
        assert saver["durability"], name
    labels = " ".join(t["label"] for t in found["targets"])
    for name in expected - {"InMemorySaver"}:
        assert f"{name} storage after" in labels, name
    table = done.stdout
    assert "## Step time" in table and "## Reading the latest checkpoint" in table
    assert "## Storage after 200 steps" in table and "×" in table


def test_prefix_check_times_both_ways_of_the_stored_prefix() -> None:
    """``--prefix-check`` times the ``is`` walk against the addresses (decision 0177), nothing stored."""
    done = run_script("langgraph", "--prefix-check", "--lengths", "10,100")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"addresses read: {sys.implementation.name == 'cpython'}" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| 10 |", "| 100 |"))]
    assert len(rows) == 2
    for row in rows:
        cells = [float(cell) for cell in row.strip("|").split("|")[1:]]
        assert len(cells) == 4 and all(cell > 0 for cell in cells)
