"""Smoke test of ``bench/vectors.py --quick --no-sqlite-vec``: it runs, and its JSON has every store and round.

flowmem's SQL stores are reported twice: with their vector cache and with it off
(``-scan``), from the same fill.

No timing is asserted (timed tests flake on a shared machine). ``--no-sqlite-vec``
keeps the test from making the private venv that LangGraph's ``SqliteStore`` +
sqlite-vec runs under (a registry download): the run says so and goes on without it.
With PostgreSQL (the session's throwaway server, required in CI) the run includes
flowmem on PostgreSQL; without it, memory and SQLite only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench

FLOWMEM = ("flowmem-memory", "flowmem-sqlite")


def test_quick_run_reports_every_store_round_and_the_skipped_sqlite_vec(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    try:
        url: str | None = request.getfixturevalue("postgres_url")
    except pytest.skip.Exception:
        url = None  # no server binaries outside CI: memory and SQLite only
    only = ",".join((*FLOWMEM, "inmemory", "sqlitestore", *(("flowmem-postgres",) if url else ())))
    options = ["--no-sqlite-vec", "--only", only, *(("--postgres", url) if url else ())]
    found, printed = run_bench("vectors", tmp_path / "vectors.json", *options)
    assert found["bench"] == "vectors" and found["quick"] is True
    assert found["not_run"] == {"sqlitestore": "not run: --no-sqlite-vec"}
    assert "| sqlitestore | — | — | not run: --no-sqlite-vec | — | — |" in printed
    assert "sqlitestore_venv" not in found
    stores = set(found["results"])
    sql = ("flowmem-sqlite", *(("flowmem-postgres",) if url else ()))
    scans = {f"{name}-scan" for name in sql}  # the same fill searched with the cache off
    assert stores == {*FLOWMEM, "inmemory", *sql, *scans}
    for name, by_size in found["results"].items():
        entry = by_size["200"]
        assert entry["rounds"] == 2 and len(entry["puts_per_s_rounds"]) == 2, name
        assert len(entry["search_ms_runs"]) == 2 * 3, name
        assert entry["search_ms_min"] <= entry["search_ms_median"], name
        assert len(entry["first_search_ms_rounds"]) == 2, name  # each round's first search, on its own
    assert found["durability"]["sqlite"]["durable"] is True
    for target in found["targets"]:
        assert target["met"] is None and target["bound"] is None  # nothing to judge against
    assert {t["label"].split(" ")[0] for t in found["targets"]} == stores - {"inmemory"}
