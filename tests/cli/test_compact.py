"""``flowmem compact``: a summarize command, or the two steps by hand (issue 28 §2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from flowmem.service import MemoryService
from flowmem.store import open_store
from tests.cli.conftest import RunCli
from tests.store.archive.test_archive import KEY, history

SUMMARIZER = f"{sys.executable} -c \"import json,sys; print('summary of', len(json.load(sys.stdin)), 'rows')\""


def _database(tmp_path: Path) -> tuple[str, list[dict[str, object]]]:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    store = open_store(url)
    service = MemoryService(store)
    service.append_raw("user", "alice", KEY, history(5))
    rows = service.load_raw("user", "alice", KEY).messages
    store.close()
    return url, rows


def _load(url: str, archived: bool = False) -> list[dict[str, object]]:
    store = open_store(url)
    try:
        return MemoryService(store).load_raw("user", "alice", KEY, include_archived=archived).messages
    finally:
        store.close()


def test_compact_with_a_summarize_command(run_cli: RunCli, tmp_path: Path) -> None:
    url, before = _database(tmp_path)
    ran = run_cli("compact", "user", "alice", KEY, "--keep-tokens", "150", "--summarize-with", SUMMARIZER, "--database", url)
    assert ran.code == 0, ran.err
    done = json.loads(ran.out)
    assert done["compacted"] and done["summary"]["content"] == f"summary of {done['archived']} rows"
    assert _load(url)[0] == done["summary"]
    assert _load(url, archived=True)[: done["archived"]] == before[: done["archived"]]


def test_plan_only_then_apply_the_plan_with_a_summary(run_cli: RunCli, tmp_path: Path) -> None:
    url, before = _database(tmp_path)
    planned = run_cli("compact", "user", "alice", KEY, "--keep-tokens", "150", "--plan-only", "--database", url)
    assert planned.code == 0, planned.err
    plan = json.loads(planned.out)
    assert plan["messages"] == before[: plan["archived"]] and _load(url) == before
    applied = run_cli("compact", "user", "alice", KEY, "--plan", plan["plan"], "--summary", "by hand", "--database", url)
    assert applied.code == 0, applied.err
    assert _load(url)[0]["content"] == "by hand"
    stale = run_cli("compact", "user", "alice", KEY, "--plan", plan["plan"], "--summary", "again", "--database", url)
    assert stale.code == 5 and "new plan" in stale.err


def test_refusals_say_what_to_do_and_change_nothing(run_cli: RunCli, tmp_path: Path) -> None:
    url, before = _database(tmp_path)
    for args in (
        ("--keep-tokens", "150"),  # no way to summarize
        ("--keep-tokens", "150", "--plan-only", "--summarize-with", "cat"),
        ("--plan", "nope", "--summary", "s"),
        ("--plan", f"1.{'0' * 64}"),  # no summary
    ):
        ran = run_cli("compact", "user", "alice", KEY, *args, "--database", url)
        assert ran.code == 2 and ran.err.startswith("error:"), (args, ran.err)
    failing = run_cli("compact", "user", "alice", KEY, "--keep-tokens", "150", "--summarize-with", "exit 3", "--database", url)
    assert failing.code == 6 and "nothing was compacted" in failing.err
    small = run_cli("compact", "user", "alice", KEY, "--keep-tokens", "3", "--plan-only", "--database", url)
    assert small.code == 2 and "window" in small.err
    assert _load(url, archived=True) == before
