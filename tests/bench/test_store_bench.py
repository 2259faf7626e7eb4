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
    if url is None:
        return
    for name in ("flowmem PostgresStore", "peers: PostgreSQL"):
        entry = durability[name]
        assert entry["fsync"] == "off" and entry["durable"] is False, name
        assert "NON-DURABLE" in entry["label"], name
    assert found["all_durable"] is False
    assert found["postgres_peers"]["bench"] == "peers_postgres"
    assert (tmp_path / "store-peers_postgres.json").exists()
