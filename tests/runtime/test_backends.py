"""The turn loop on the durable backends: SQLite and a real PostgreSQL, not only memory.

The same turns as ``test_loop`` (a tool-calling turn, a stop mid-turn healed by
the next turn, a retried call), run against ``open_backend`` stores, so the
runtime's writes (transcript, buffer, call journal, status) are proven where
production keeps them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.store import Store
from tests.runtime.fake_provider import FakeProvider, calls, text
from tests.runtime.helpers import buffer, counting_tools, executions, make_runner, new_session
from tests.store.conftest import open_backend


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh SQLite file or PostgreSQL database."""
    store = open_backend(request.param, request, tmp_path)
    try:
        yield store
    finally:
        store.close()


def test_a_tool_calling_turn_is_stored_sendable(
    durable_store: Store, fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = durable_store
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(calls(("c1", "add", {"a": 2, "b": 3})), text("2 + 3 = 5"))

    result = runner.start_turn(session, "What is 2 + 3?", wait=True)

    assert result["status"] == "completed" and result["reply"] == "2 + 3 = 5"
    rows = buffer(store, session)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "What is 2 + 3?"),
        ("assistant", ""),
        ("tool", "5"),
        ("assistant", "2 + 3 = 5"),
    ]
    assert check_sendable(rows) == []
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]
    transcript, _ = store.list_transcript(session.id, limit=100)
    assert [t.row["role"] for t in transcript] == ["user", "assistant", "tool", "assistant"]


def test_mem_3_a_call_left_by_a_stop_is_healed_by_the_next_turn(
    durable_store: Store, fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = durable_store
    session = new_session(store)
    holder: dict[str, object] = {}
    tools = counting_tools(tmp_path, {"add": lambda: holder["runner"].stop(session)})  # type: ignore[attr-defined]
    runner = make_runner(store, fake_provider.base_url, tools)
    holder["runner"] = runner
    fake_provider.script(
        calls(("p1", "add", {"a": 1, "b": 1}), ("p2", "weather", {"city": "Oslo"}))
    )
    assert runner.start_turn(session, "two things", wait=True)["reason"] == "stopped"

    fake_provider.script(text("I was stopped before checking the weather."))
    runner.start_turn(session, "what happened?", wait=True)

    rows = buffer(store, session)
    assert [(r["role"], r["content"]) for r in rows[:5]] == [
        ("user", "two things"),
        ("assistant", ""),
        ("tool", "2"),
        ("tool", HEALED_CONTENT),
        ("user", "what happened?"),
    ]
    assert check_sendable(rows) == []
    assert fake_provider.rejected() == []
    assert executions(tmp_path, "weather") == 0


def test_mem_1_a_retried_call_runs_once_and_adds_nothing(
    durable_store: Store, fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = durable_store
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(
        calls(("r1", "add", {"a": 20, "b": 22})),
        calls(("r1", "add", {"a": 20, "b": 22})),  # the model retries the same call id
        text("42"),
    )
    assert runner.start_turn(session, "add them", wait=True)["status"] == "completed"
    assert executions(tmp_path, "add") == 1
    assert [r["role"] for r in buffer(store, session)] == ["user", "assistant", "tool", "assistant"]
