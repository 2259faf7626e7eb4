"""Smoke test of ``bench/store.py --quick``: every SQLite system's durability as its file reports it.

No timing is asserted. With PostgreSQL (the session's server, required in CI) the run
adds flowmem on it and the PostgreSQL peers' process; that server runs with ``fsync``
off, so the JSON must say NON-DURABLE: the durability is what the server reports,
not what the bench assumes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import (
    assert_common,
    assert_wal_full,
    postgres_or_none,
    run_bench,
)

SQLITE_SYSTEMS = {
    "flowmem SqliteStore",
    "flowmem service",
    "flowmem service +messages",
    "agents SQLiteSession",
    "LangChain SQLChatMessageHistory",
    "LangGraph SqliteSaver",
}


def test_quick_run_states_each_databases_durability(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = postgres_or_none(request)
    options = ["--postgres", url] if url is not None else []
    found, printed = run_bench("store", tmp_path / "store.json", *options)

    assert_common(found, "store", printed)
    durability = found["durability"]
    for name in SQLITE_SYSTEMS:
        assert_wal_full(durability[name], name)
    assert "group commit" in durability["flowmem SqliteStore"]["note"]
    assert durability["agents SQLiteSession"]["synchronous_source"].startswith("PRAGMA")
    assert found["appends_per_s"]["flowmem SqliteStore"]["200"]
    assert found["normalization"]["best_s"]["normalize"]["1000"]
    # each single append in order, which changed the WAL's size, and the calling thread's
    # scheduler counts (decision 0178)
    times = found["append_s"]["flowmem service"]["200"]
    (run,) = times  # --quick: one run
    assert len(run) == found["plan"]["rounds"] and all(t > 0 for t in run)
    (grew_at,) = found["wal_size_changed_at"]["flowmem service"]["200"]
    assert len(grew_at) == found["wal_size_changes"]["flowmem service"]["200"][0]
    assert all(0 <= i < len(run) for i in grew_at)
    (sched,) = found["append_sched_ns"]["flowmem service"]["200"]
    assert len(sched) == len(run)
    for (on_cpu, waiting), seconds in zip(sched, run, strict=True):
        assert on_cpu >= 0 and waiting >= 0
        assert on_cpu / 1e9 <= seconds + 0.01  # read outside the timed span: a little more
    if url is None:
        return
    for name in ("flowmem PostgresStore", "peers: PostgreSQL"):
        entry = durability[name]
        assert entry["fsync"] == "off" and entry["durable"] is False, name
        assert "NON-DURABLE" in entry["label"], name
    assert found["all_durable"] is False
    assert found["postgres_peers"]["bench"] == "peers_postgres"
    assert (tmp_path / "store-peers_postgres.json").exists()
