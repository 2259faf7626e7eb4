"""Smoke test of ``bench/peers_postgres.py --quick``: the throwaway server it starts is durable.

The one bench test that starts a PostgreSQL server of its own (the others use the
session's): what the server reports (``SHOW``) is in the JSON, and by default
``fsync``, ``synchronous_commit`` and ``full_page_writes`` are on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import assert_common, run_bench, server_binaries


def test_quick_run_starts_a_durable_server_and_says_so(tmp_path: Path) -> None:
    if not server_binaries():
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    only = "flowmem,langchain"
    found, printed = run_bench("peers_postgres", tmp_path / "peers.json", "--only", only)

    assert_common(found, "peers_postgres", printed)
    entry = found["durability"]["PostgreSQL"]
    assert (entry["fsync"], entry["synchronous_commit"], entry["full_page_writes"]) == (
        "on",
        "on",
        "on",
    )
    assert entry["durable"] is True and found["all_durable"] is True
    assert "NON-DURABLE" not in printed
    rates = found["appends_per_s"]
    assert set(rates) == {"flowmem PostgresStore", "langchain-postgres"}
    assert all(
        cell["samples"] and cell["median"] > 0 for cell in rates["langchain-postgres"].values()
    )
    label = "flowmem PostgresStore / langchain-postgres at {}: {}"
    assert [t["label"] for t in found["targets"]] == [
        label.format(n, judged)
        for n in (50, 200)
        for judged in ("appends/s (min of 1 runs)", "p50 of single appends (min of 1 runs)")
    ]
    assert found["fresh_database"] == "per run and per system (CREATE DATABASE)"
    ratio = found["ratios_to_langchain_postgres"]["flowmem PostgresStore"]["50"]
    assert set(ratio["rate"]) == {"min", "median", "max"} and ratio["p50"]["min"] > 0
    p50 = found["p50_append_s"]
    assert all(p50["langchain-postgres"][n] > 0 for n in ("50", "200"))
    assert found["wal_per_append"] == {}  # --quick counts no WAL
