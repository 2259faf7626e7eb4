"""``flowmem repairs SCOPE SCOPE_ID KEY``: a buffer's repair log, newest first (issue 37 §2)."""

from __future__ import annotations

import json
from pathlib import Path

from flowmem.core import prepare
from flowmem.store import Address, open_store
from tests.cli.conftest import RunCli

CHAT = Address("user", "alice", "chat")


def _database(tmp_path: Path, heals: int) -> str:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    store = open_store(url)
    for i in range(heals):
        call = {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}"}]}
        store.append(CHAT, prepare([call, {"role": "user", "content": f"after {i}"}], 1))
    store.close()
    return url


def test_mem_3_repairs_prints_one_line_per_repair_newest_first(run_cli: RunCli, tmp_path: Path) -> None:
    url = _database(tmp_path, 3)
    ran = run_cli("repairs", "user", "alice", "chat", "--limit", "2", "--database", url)
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert lines[0].startswith("#3  ") and "MEM-3" in lines[0] and "calls c2" in lines[0]
    assert lines[1].startswith("#2  ") and "calls c1" in lines[1] and "rows 4" in lines[1]
    assert lines[2] == "older: --before 2"
    older = run_cli("repairs", "user", "alice", "chat", "--before", "2", "--database", url)
    assert older.out.splitlines()[0].startswith("#1  ")


def test_mem_3_repairs_json_is_the_apis_page(run_cli: RunCli, tmp_path: Path) -> None:
    url = _database(tmp_path, 1)
    ran = run_cli("repairs", "user", "alice", "chat", "--json", "--database", url)
    page = json.loads(ran.out)
    assert [(e["seq"], e["rule"], e["call_ids"], e["count"]) for e in page["repairs"]] == [
        (1, "MEM-3", ["c0"], 1)
    ]
    assert page["next_before"] is None and page["resolved_scope_id"] == "alice"


def test_repairs_of_a_buffer_never_repaired_says_so(run_cli: RunCli, tmp_path: Path) -> None:
    url = _database(tmp_path, 0)
    ran = run_cli("repairs", "user", "alice", "other", "--database", url)
    assert (ran.code, ran.out.strip()) == (0, "no repairs")


def test_repairs_of_a_missing_database_creates_nothing(run_cli: RunCli, tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    ran = run_cli("repairs", "user", "alice", "chat", "--database", f"sqlite:///{missing}")
    assert ran.code == 3 and not missing.exists()
