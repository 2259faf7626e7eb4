"""``flowmem import claude-code``: a transcript file or a Claude Code hook's JSON on stdin (issue 41 §4)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flowmem.cli import imports
from flowmem.client import Client
from flowmem.formats import to_anthropic
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store
from tests.cli.conftest import RunCli
from tests.client.conftest import in_process
from tests.importers.helpers import (
    BEFORE_COMPACTION,
    DATA,
    FIXTURE,
    KEY,
    LIVE,
    SESSION,
    lines_until,
)


def _sent(url: str, session: str = SESSION, user: str | None = None) -> list[dict[str, object]]:
    store = open_store(url)
    try:
        rows = MemoryService(store).load(
            "session", KEY, ExecutionContext(session_id=session, user_id=user), include_archived=True
        ).messages
    finally:
        store.close()
    return to_anthropic(rows)[1]


def _hook(path: Path | str, session: str = SESSION, event: str = "Stop") -> str:
    return json.dumps(
        {"session_id": session, "transcript_path": str(path), "cwd": "/home/dev/calc", "hook_event_name": event}
    )


def test_import_stores_the_transcript_and_says_what_it_stored(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    ran = run_cli("import", "claude-code", str(FIXTURE), "--database", url)
    assert ran.code == 0, ran.err
    assert ran.out.startswith(f"session {SESSION} buffer claude_code: 21 new lines, 18 rows stored, 1 compactions")
    assert "sidechain 2" in ran.out
    assert _sent(url) == BEFORE_COMPACTION + LIVE


def test_import_twice_stores_nothing_the_second_time(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    run_cli("import", "claude-code", str(FIXTURE), "--database", url)
    again = run_cli("import", "claude-code", str(FIXTURE), "--database", url, "--json")
    assert again.code == 0, again.err
    answer = json.loads(again.out)
    assert (answer["lines_new"], answer["rows_stored"], answer["count"]) == (0, 0, 7)
    assert _sent(url) == BEFORE_COMPACTION + LIVE


def test_a_truncated_transcript_exits_2_naming_the_line_and_stores_nothing(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(lines_until("a-0004")[:-40])
    ran = run_cli("import", "claude-code", str(cut), "--database", url)
    assert ran.code == 2
    assert ran.err.startswith("error: line 8: truncated")
    assert _sent(url) == []


def test_a_missing_transcript_is_a_usage_error(run_cli: RunCli, tmp_path: Path) -> None:
    ran = run_cli("import", "claude-code", str(tmp_path / "nope.jsonl"), "--database", f"sqlite:///{tmp_path / 'f.db'}")
    assert ran.code == 2 and "cannot read" in ran.err
    assert run_cli("import", "claude-code").code == 2


def test_another_owners_session_exits_4(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    assert run_cli("import", "claude-code", str(FIXTURE), "--user", "alice", "--database", url).code == 0
    ran = run_cli("import", "claude-code", str(FIXTURE), "--user", "bob", "--database", url)
    assert ran.code == 4, ran.err


def test_hook_mode_keeps_the_session_in_step_silently(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(lines_until("a-0008"))  # PreCompact: the conversation before its compaction
    ran = run_cli("import", "claude-code", "--hook", "--database", url, stdin=_hook(transcript, event="PreCompact"))
    assert (ran.code, ran.out, ran.err) == (0, "", "")
    assert _sent(url) == BEFORE_COMPACTION
    transcript.write_bytes(DATA)  # the session went on, compacted, and ended
    ran = run_cli("import", "claude-code", "--hook", "--database", url, stdin=_hook(transcript, event="SessionEnd"))
    assert (ran.code, ran.out, ran.err) == (0, "", "")
    assert _sent(url) == BEFORE_COMPACTION + LIVE


def test_hook_mode_imports_into_the_hooks_session_unless_one_is_named(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    run_cli("import", "claude-code", "--hook", "--database", url, stdin=_hook(FIXTURE, session="from-hook"))
    assert _sent(url, "from-hook") == BEFORE_COMPACTION + LIVE
    run_cli("import", "claude-code", "--hook", "--session", "named", "--database", url, stdin=_hook(FIXTURE))
    assert _sent(url, "named") == BEFORE_COMPACTION + LIVE


def test_hook_mode_failures_exit_1_on_stderr_so_claude_code_does_not_block(run_cli: RunCli, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(lines_until("a-0004")[:-40])
    for stdin, said in [
        ("not json", "--hook reads the hook's JSON on stdin"),
        (json.dumps({"session_id": SESSION}), "no 'transcript_path'"),
        (_hook(tmp_path / "gone.jsonl"), "cannot read"),
        (_hook(cut), "line 8: truncated"),
    ]:
        ran = run_cli("import", "claude-code", "--hook", "--database", url, stdin=stdin)
        assert ran.code == 1, (stdin, ran.err)
        assert ran.err.startswith("flowmem import: error: ") and said in ran.err
        assert ran.out == ""
    assert _sent(url) == []


def test_hook_mode_misused_exits_1_too(run_cli: RunCli, tmp_path: Path) -> None:
    ran = run_cli("import", "claude-code", str(FIXTURE), "--hook", stdin=_hook(FIXTURE))
    assert ran.code == 1 and "leave out TRANSCRIPT" in ran.err
    both = run_cli("import", "claude-code", "--hook", "--url", "http://x", "--database", "memory://", stdin=_hook(FIXTURE))
    assert both.code == 1 and "not both" in both.err


def test_import_goes_to_the_server_of_flowmem_url_when_no_database_is_named(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'served.db'}", create=True)
    reached: list[str] = []
    try:
        with contextmanager(in_process)(store) as server:

            def client(url: str) -> Client:
                reached.append(url)
                return server.client("alice")

            monkeypatch.setattr("flowmem.cli.imports._client", client)
            monkeypatch.delenv("FLOWMEM_DATABASE_URL", raising=False)
            monkeypatch.setenv("FLOWMEM_URL", "http://flowmem.example:8765")
            ran = run_cli("import", "claude-code", str(FIXTURE), "--json")
            assert ran.code == 0, ran.err
            assert json.loads(ran.out)["rows_stored"] == 18
            hooked = run_cli("import", "claude-code", "--hook", stdin=_hook(FIXTURE))
            assert (hooked.code, hooked.err) == (0, "")
            assert run_cli("import", "claude-code", str(FIXTURE), "--user", "bob").code == 2  # the token's user owns
            with server.client("alice") as alice:
                rows = alice.load("session", KEY, ExecutionContext(session_id=SESSION), include_archived=True).messages
            assert to_anthropic(rows)[1] == BEFORE_COMPACTION + LIVE
    finally:
        store.close()
    assert reached == ["http://flowmem.example:8765"] * 2
    assert not (tmp_path / "flowmem.db").exists()


def test_database_and_url_together_are_a_usage_error(run_cli: RunCli, tmp_path: Path) -> None:
    ran = run_cli("import", "claude-code", str(FIXTURE), "--url", "http://x", "--database", "memory://")
    assert ran.code == 2 and "not both" in ran.err



def test_overlapping_imports_of_one_session_take_turns_and_store_each_row_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    reading: list[int] = []  # the imports between their buffer read and its second's end
    overlapped = threading.Event()
    other = threading.Event()

    class SlowToRead(MemoryService):
        """A service whose buffer read waits (up to a second) for another import's read."""

        def load(self, *args: Any, **kwargs: Any) -> Any:
            read = super().load(*args, **kwargs)
            if reading:
                overlapped.set()
                other.set()
            reading.append(1)
            other.wait(timeout=1.0)
            reading.pop()
            return read

    monkeypatch.setattr(imports, "MemoryService", SlowToRead)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            imports._import(DATA, SESSION, None, KEY, (url, False))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures
    assert _sent(url) == BEFORE_COMPACTION + LIVE  # without turns, both would store the new rows
    assert not overlapped.is_set()  # the second read came after the first import, not beside it


def test_a_lock_file_planted_as_a_link_is_refused_and_nothing_is_imported(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'flowmem.db'}"
    monkeypatch.setattr(imports.tempfile, "gettempdir", lambda: str(tmp_path))
    victim = tmp_path / "victim"
    name = hashlib.sha256(f"{os.getuid()}\0{url}\0{SESSION}".encode()).hexdigest()[:24]
    (tmp_path / f"flowmem-import-{name}.lock").symlink_to(victim)
    ran = run_cli("import", "claude-code", str(FIXTURE), "--session", SESSION, "--database", url)
    assert ran.code == 6 and "lock file" in ran.err
    assert not victim.exists()
    assert _sent(url) == []
