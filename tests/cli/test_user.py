"""``flowmem user erase``: everything stored for a user goes, or nothing does."""

from __future__ import annotations

import json
from pathlib import Path

from flowmem.store import Address, SessionRecord, Store, TokenRecord, open_store
from tests.cli.conftest import RunCli

SID = "00000000-0000-0000-0000-000000000001"


def _filled(url: str) -> Store:
    store = open_store(url)
    store.create_session(SessionRecord(id=SID, name="n", owner="alice"))
    store.append(Address("session", SID, "chat_history"), [{"role": "user", "content": "hi"}])
    store.put_record(Address("user", "alice", "k"), 1, None)
    store.create_token(TokenRecord("t1", "h1", "alice", frozenset(), 1.0))
    return store


def test_user_erase_deletes_and_reports(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    _filled(url).close()
    result = run_cli("user", "erase", "alice", "--yes", "--database", url)
    assert result.code == 0, result.err
    assert json.loads(result.out) == {
        "user_id": "alice",
        "sessions": 1,
        "buffers": 1,
        "records": 1,
        "tokens": 1,
    }
    store = open_store(url)
    assert store.get_session(SID) is None
    assert store.get_record(Address("user", "alice", "k"), 0.0) == (False, None)
    assert store.list_tokens() == []
    store.close()


def test_user_erase_refusals_change_nothing(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    store = _filled(url)
    declined = run_cli("user", "erase", "alice", "--database", url, stdin="n\n")
    assert declined.code == 130 and "aborted" in declined.err
    unusable = run_cli("user", "erase", "0", "--yes", "--database", url)
    assert unusable.code != 0 and "usable identity" in unusable.err
    store.set_session_status(SID, "running")
    running = run_cli("user", "erase", "alice", "--yes", "--database", url)
    assert running.code != 0 and "running" in running.err
    assert store.get_session(SID) is not None
    assert store.count(Address("session", SID, "chat_history")) == 1
    assert store.get_record(Address("user", "alice", "k"), 0.0) == (True, 1)
    assert len(store.list_tokens()) == 1
    store.close()
