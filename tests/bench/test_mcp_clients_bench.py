"""Smoke test of ``bench/mcp_clients.py --quick``: flowmem mcp's clients run, nothing lost, the JSON is whole.

The reference server is not run here (it needs ``npx``); docs/mcp.md has its figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.smoke import assert_common, assert_wal_full, run_bench
from tests.mcp.forked import ForkServer

pytest.importorskip("mcp", reason="the mcp extra is not installed")


def test_quick_run_counts_flowmem_mcps_writes_and_loses_none(tmp_path: Path) -> None:
    # its four flowmem mcp processes forked from a server that imported the SDK once
    # (tests/mcp/forked.py, decision 0200), not four interpreters importing it (decision 0203)
    forks = ForkServer(tmp_path)
    try:
        command = json.dumps(forks.command("mcp", "--user", "bench"))
        found, printed = run_bench(
            "mcp_clients", tmp_path / "mcp_clients.json", "--flowmem-command", command
        )
    finally:
        forks.close()

    assert_common(found, "mcp_clients", printed)
    assert_wal_full(found["durability"]["flowmem mcp (SQLite)"])
    ours = found["flowmem mcp (SQLite)"]
    assert ours["writes"] == ours["answered"] == 12 and ours["errors"] == 0
    assert (
        ours["lost"] == {"observations": 0, "entities": 0, "relations": 0}
        and ours["duplicates"] == 0
    )
    assert "skipped" in found["reference (server-memory)"]
    assert {t["label"] for t in found["targets"]} >= {"flowmem mcp: writes lost"}
