"""Crash recovery: a real child process is killed with SIGKILL at each step of a turn.

The child runs a turn on a SQLite file through the fake provider and kills itself
at the chosen point. The parent then sends the next user turn on the same file.
Every test checks: the provider accepted every request, nothing committed before
the crash is lost, and no tool ran twice (executions are counted in files).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.store import open_store
from flowmem.store.base import SessionRecord, Store
from tests.runtime.fake_provider import FakeProvider, calls, text
from tests.runtime.helpers import buffer, counting_tools, executions, make_runner, new_session

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_child(
    db: Path, session: SessionRecord, provider: FakeProvider, counts: Path, crash: str, content: str
) -> subprocess.CompletedProcess[str]:
    """Run one turn in a child process that crashes at ``crash``."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.runtime.crash_child",
            str(db),
            session.id,
            provider.base_url,
            str(counts),
            crash,
            content,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def crash_then_recover(
    tmp_path: Path,
    provider: FakeProvider,
    crash: str,
    child_script: list[dict[str, Any]],
    parent_script: list[dict[str, Any]],
) -> tuple[Store, SessionRecord, dict[str, Any]]:
    """Crash a turn in a child, then run the next user turn in this process."""
    db = tmp_path / "flowmem.db"
    store = open_store(f"sqlite:///{db}")
    session = new_session(store, owner="alice")
    provider.script(*child_script)
    child = run_child(db, session, provider, tmp_path, crash, "What's the weather in Lisbon?")
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert store.get_session(session.id).status == "running"  # type: ignore[union-attr]

    # A later process: the dead child's lease has expired by its clock.
    later = make_runner(
        store, provider.base_url, counting_tools(tmp_path), clock=lambda: time.time() + 3600
    )
    provider.script(*parent_script)
    result = later.start_turn(session, "Are you still there?", wait=True)
    assert result["status"] == "completed", result
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]
    assert provider.rejected() == []
    assert all(r.status == 200 for r in provider.requests)
    rows = buffer(store, session)
    assert check_sendable(rows) == []
    users = [r["content"] for r in rows if r["role"] == "user"]
    assert users == ["What's the weather in Lisbon?", "Are you still there?"]
    return store, session, result


def roles(rows: list[dict[str, Any]]) -> list[str]:
    return [r["role"] for r in rows]


def test_crash_before_the_assistant_append(fake_provider: FakeProvider, tmp_path: Path) -> None:
    store, session, _ = crash_then_recover(
        tmp_path,
        fake_provider,
        "model_reply",
        [calls(("a1", "weather", {"city": "Lisbon"}))],
        [text("Yes, sorry. Ask me again?")],
    )
    assert roles(buffer(store, session)) == ["user", "user", "assistant"]
    assert executions(tmp_path, "weather") == 0
    assert len(fake_provider.accepted()) == 2


def test_mem_3_crash_after_the_assistant_append_before_the_tool_started(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store, session, _ = crash_then_recover(
        tmp_path,
        fake_provider,
        "assistant",
        [calls(("a1", "weather", {"city": "Lisbon"}))],
        [text("The weather call was interrupted.")],
    )
    rows = buffer(store, session)
    assert roles(rows) == ["user", "assistant", "tool", "user", "assistant"]
    assert rows[2]["content"] == HEALED_CONTENT and rows[2]["metadata"]["healed"] is True
    assert executions(tmp_path, "weather") == 0
    last = fake_provider.accepted()[-1].body["messages"]
    assert {"role": "tool", "tool_call_id": "a1", "content": HEALED_CONTENT} in last


def test_mem_10_a_retried_call_that_never_started_runs_once_and_replaces_the_placeholder(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store, session, _ = crash_then_recover(
        tmp_path,
        fake_provider,
        "assistant",
        [calls(("a1", "weather", {"city": "Lisbon"}))],
        [calls(("a1", "weather", {"city": "Lisbon"})), text("18C and sunny.")],
    )
    rows = buffer(store, session)
    assert roles(rows) == ["user", "assistant", "tool", "user", "assistant"]
    assert rows[2]["content"] == "18C and sunny in Lisbon"
    assert "healed" not in rows[2]["metadata"]
    assert executions(tmp_path, "weather") == 1


def test_mem_3_crash_in_the_middle_of_a_tool_call_never_runs_it_twice(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store, session, _ = crash_then_recover(
        tmp_path,
        fake_provider,
        "in_tool:weather",
        [calls(("a1", "weather", {"city": "Lisbon"}))],
        # the model retries the very same call: it started before the crash, so it is not re-run
        [calls(("a1", "weather", {"city": "Lisbon"})), text("I could not get the weather.")],
    )
    rows = buffer(store, session)
    assert roles(rows) == ["user", "assistant", "tool", "user", "assistant"]
    assert rows[2]["metadata"] == {"tool_call_id": "a1", "healed": True}
    assert executions(tmp_path, "weather") == 1


def test_mem_3_crash_between_two_results_of_parallel_calls(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store, session, _ = crash_then_recover(
        tmp_path,
        fake_provider,
        "in_tool:weather",
        [calls(("p1", "add", {"a": 1, "b": 2}), ("p2", "weather", {"city": "Lisbon"}))],
        [text("1 + 2 = 3; the weather is unknown.")],
    )
    rows = buffer(store, session)
    assert roles(rows) == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert (rows[2]["metadata"]["tool_call_id"], rows[2]["content"]) == ("p1", "3")
    assert rows[3]["metadata"] == {"tool_call_id": "p2", "healed": True}
    assert executions(tmp_path, "add") == 1 and executions(tmp_path, "weather") == 1
    sent = fake_provider.accepted()[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]


def test_mem_10_a_late_real_result_replaces_the_placeholder_after_healing(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store, session, _ = crash_then_recover(
        tmp_path,
        fake_provider,
        "tool_returned:weather",
        [calls(("a1", "weather", {"city": "Lisbon"}))],
        [text("It is 18C and sunny in Lisbon.")],
    )
    rows = buffer(store, session)
    assert roles(rows) == ["user", "assistant", "tool", "user", "assistant"]
    assert rows[2]["content"] == "18C and sunny in Lisbon"
    assert rows[2]["metadata"]["tool_call_id"] == "a1"
    assert "healed" not in rows[2]["metadata"]
    assert executions(tmp_path, "weather") == 1
    sent = fake_provider.accepted()[-1].body["messages"]
    assert {"role": "tool", "tool_call_id": "a1", "content": "18C and sunny in Lisbon"} in sent
    transcript, _ = store.list_transcript(session.id, limit=100)
    contents = [t.row["content"] for t in transcript]
    assert HEALED_CONTENT in contents and "18C and sunny in Lisbon" in contents


def test_a_turn_without_a_crash_in_a_child_process(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    db = tmp_path / "flowmem.db"
    store = open_store(f"sqlite:///{db}")
    session = new_session(store)
    fake_provider.script(calls(("a1", "weather", {"city": "Lisbon"})), text("18C."))
    child = run_child(db, session, fake_provider, tmp_path, "none", "weather?")
    assert child.returncode == 0, child.stderr
    assert '"status": "completed"' in child.stdout
    assert roles(buffer(store, session)) == ["user", "assistant", "tool", "assistant"]
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]
