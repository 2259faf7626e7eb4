"""The turn loop end to end, in process, through the fake provider.

Most tests run on MemoryStore; the core turns (a tool-calling turn, a stop healed
by the next turn, a retried call) run on SQLite and a real PostgreSQL too
(``any_store``), so the runtime's writes are proven where production keeps them.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.errors import AccessDeniedError, ConflictError, InvalidInputError
from flowmem.runtime.agent import MemorySpec
from flowmem.runtime.loop import TurnEvent, turn_context
from flowmem.scope import ExecutionContext
from flowmem.sessions import memory_context
from flowmem.store import MemoryStore, Store
from flowmem.store.base import Address
from tests.runtime.fake_provider import FakeProvider, calls, failure, text
from tests.runtime.helpers import (
    SYSTEM,
    buffer,
    counting_tools,
    executions,
    make_runner,
    new_session,
)
from tests.store.conftest import BACKENDS, open_backend


def stored(store: MemoryStore, count: str) -> int:
    """A COUNT query on a memory:// store's private SQLite file (what it holds, read directly)."""
    with sqlite3.connect(store.path) as conn:
        return int(conn.execute(count).fetchone()[0])


@pytest.fixture(params=BACKENDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend kind: memory, SQLite, PostgreSQL."""
    store = open_backend(request.param, request, tmp_path / "db")
    try:
        yield store
    finally:
        store.close()


def test_a_normal_tool_calling_turn(
    any_store: Store, fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = any_store
    events: list[TurnEvent] = []
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path), events=events)
    session = new_session(store)
    fake_provider.script(calls(("c1", "add", {"a": 2, "b": 3})), text("2 + 3 = 5"))

    result = runner.start_turn(session, "What is 2 + 3?", wait=True)

    assert result["status"] == "completed" and result["reason"] == "answered"
    assert result["reply"] == "2 + 3 = 5" and result["steps"] == 2
    rows = buffer(store, session)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "What is 2 + 3?"),
        ("assistant", ""),
        ("tool", "5"),
        ("assistant", "2 + 3 = 5"),
    ]
    assert rows[1]["metadata"]["tool_calls"] == [
        {"tool_call_id": "c1", "name": "add", "args": {"a": 2, "b": 3}}
    ]
    assert rows[2]["metadata"]["tool_call_id"] == "c1"
    assert check_sendable(rows) == []
    assert executions(tmp_path, "add") == 1
    sent = [r.body for r in fake_provider.accepted()]
    assert len(sent) == 2 and fake_provider.rejected() == []
    assert sent[0]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert {t["function"]["name"] for t in sent[0]["tools"]} >= {"add", "weather"}
    assert sent[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]
    transcript, _ = store.list_transcript(session.id, limit=100)
    assert [t.row["role"] for t in transcript] == ["user", "assistant", "tool", "assistant"]
    kinds = [e.kind for e in events]
    assert kinds[:3] == ["user", "model_request", "model_reply"]
    assert kinds[-1] == "done"
    for event in events:
        if event.kind == "model_request":
            assert check_sendable(event.data["messages"]) == []


def test_turn_in_background_thread_returns_running_then_completes(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(text("hello"))
    started = runner.start_turn(session, "hi", wait=False)
    assert started["status"] == "running"
    finished = runner.wait(started["turn_id"], timeout=20)
    assert finished["status"] == "completed" and finished["reply"] == "hello"
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]


def test_tool_failures_become_error_results_not_crashed_turns(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    tools = counting_tools(tmp_path)

    def broken() -> str:
        raise RuntimeError("tool exploded")

    tools.register("broken", broken)
    runner = make_runner(store, fake_provider.base_url, tools)
    session = new_session(store)
    fake_provider.script(
        calls(("u1", "no_such_tool", {}), ("b1", "add", {"a": "x"}), ("r1", "broken", {})),
        text("sorry"),
    )
    result = runner.start_turn(session, "go", wait=True)
    assert result["status"] == "completed"
    results = {
        r["metadata"]["tool_call_id"]: r for r in buffer(store, session) if r["role"] == "tool"
    }
    assert "unknown tool 'no_such_tool'" in results["u1"]["content"]
    assert results["u1"]["metadata"]["error"] == "tool_error"
    assert "invalid arguments" in results["b1"]["content"]
    assert "tool exploded" in results["r1"]["content"]
    assert results["r1"]["metadata"]["error"] == "tool_failed"
    assert executions(tmp_path, "add") == 0
    assert fake_provider.rejected() == []


def test_a_provider_error_fails_the_turn_and_the_next_turn_works(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(failure(400, "context length exceeded"), text("better now"))
    first = runner.start_turn(session, "one", wait=True)
    assert first["status"] == "failed" and first["error"]["code"] == "model_error"
    assert "context length exceeded" in first["error"]["message"]
    assert store.get_session(session.id).status == "failed"  # type: ignore[union-attr]
    second = runner.start_turn(session, "two", wait=True)
    assert second["status"] == "completed"
    assert [r["content"] for r in buffer(store, session)] == ["one", "two", "better now"]


def test_step_limit_ends_the_turn_with_every_call_answered(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path), max_steps=2)
    session = new_session(store)
    fake_provider.script(calls(("s1", "clock", {})), calls(("s2", "clock", {})))
    result = runner.start_turn(session, "loop forever", wait=True)
    assert result["status"] == "completed" and result["reason"] == "step_limit"
    assert result["steps"] == 2
    assert executions(tmp_path, "clock") == 2
    assert check_sendable(buffer(store, session)) == []


def test_mem_3_stop_mid_turn_leaves_the_unanswered_call_for_healing(
    any_store: Store, fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = any_store
    session = new_session(store)
    holder: dict[str, object] = {}
    tools = counting_tools(tmp_path, {"add": lambda: holder["runner"].stop(session)})  # type: ignore[attr-defined]
    runner = make_runner(store, fake_provider.base_url, tools)
    holder["runner"] = runner
    fake_provider.script(
        calls(("p1", "add", {"a": 1, "b": 1}), ("p2", "weather", {"city": "Oslo"}))
    )

    result = runner.start_turn(session, "two things", wait=True)

    assert result["status"] == "completed" and result["reason"] == "stopped"
    assert executions(tmp_path, "add") == 1 and executions(tmp_path, "weather") == 0
    rows = buffer(store, session)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool"]  # p2 is left unanswered
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]

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
    assert rows[3]["metadata"] == {"tool_call_id": "p2", "healed": True}
    assert check_sendable(rows) == []
    assert fake_provider.rejected() == [] and len(fake_provider.accepted()) == 2
    assert executions(tmp_path, "weather") == 0
    transcript, _ = store.list_transcript(session.id, limit=100)
    assert any(t.row["metadata"].get("healed") for t in transcript)


def test_a_second_turn_on_a_running_session_is_refused_before_anything_is_recorded(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    entered, release = threading.Event(), threading.Event()

    def block() -> None:
        entered.set()
        release.wait(20)

    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path, {"clock": block}))
    session = new_session(store)
    fake_provider.script(calls(("k1", "clock", {})), text("done"))
    started = runner.start_turn(session, "first", wait=False)
    assert entered.wait(20)
    before = buffer(store, session)
    transcript_before, _ = store.list_transcript(session.id, limit=100)
    try:
        with pytest.raises(ConflictError):
            runner.start_turn(session, "second", wait=True)
        # another runner on the same store (another process) is refused by the status CAS
        other = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
        with pytest.raises(ConflictError):
            other.start_turn(session, "third", wait=True)
        assert buffer(store, session) == before
        assert store.list_transcript(session.id, limit=100)[0] == transcript_before
    finally:
        release.set()
    assert runner.wait(started["turn_id"], 20)["status"] == "completed"
    assert [r["content"] for r in buffer(store, session) if r["role"] == "user"] == ["first"]


def test_a_session_left_running_by_a_dead_process_is_released_after_the_stale_time(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    now = [1_000_000.0]
    runner = make_runner(
        store,
        fake_provider.base_url,
        counting_tools(tmp_path),
        clock=lambda: now[0],
        stale_after=60,
    )
    session = new_session(store)
    # a process claimed the session, then died: its lease is never renewed
    runner.state.beat(session.id, "dead-turn")
    assert store.set_session_status(session.id, "running", frozenset({"idle"}))
    now[0] += 30
    with pytest.raises(ConflictError):
        runner.start_turn(session, "too early", wait=True)
    assert runner.release_stale() == []
    now[0] += 31
    assert runner.release_stale() == [session.id]
    assert store.get_session(session.id).status == "failed"  # type: ignore[union-attr]

    # released on the next access too
    runner.state.beat(session.id, "dead-again")
    assert store.set_session_status(session.id, "running", frozenset({"failed"}))
    now[0] += 61
    fake_provider.script(text("back"))
    assert runner.start_turn(session, "hello again", wait=True)["status"] == "completed"


def test_an_agent_whose_conversation_scope_refuses_is_refused_before_recording(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(
        store, fake_provider.base_url, counting_tools(tmp_path), memory=MemorySpec(scope="user")
    )
    session = new_session(store, owner=None)
    with pytest.raises(AccessDeniedError):
        runner.start_turn(session, "hi", wait=True)
    assert store.get_session(session.id).status == "idle"  # type: ignore[union-attr]
    assert fake_provider.requests == []
    with pytest.raises(InvalidInputError):
        runner.start_turn(new_session(store), "   ", wait=True)


def test_a_windowed_agent_memory_stays_sendable(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(
        store,
        fake_provider.base_url,
        counting_tools(tmp_path),
        memory=MemorySpec(key="short", max_messages=3),
    )
    session = new_session(store)
    for n in range(3):
        fake_provider.script(calls((f"w{n}", "add", {"a": n, "b": n})), text(f"{2 * n}"))
        assert runner.start_turn(session, f"double {n}", wait=True)["status"] == "completed"
    rows = buffer(store, session, "short")
    assert len(rows) <= 3
    assert check_sendable(rows) == []
    assert fake_provider.rejected() == []


def test_mem_1_a_retried_call_reuses_the_stored_result_and_adds_nothing(
    any_store: Store, fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = any_store
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(
        calls(("r1", "add", {"a": 20, "b": 22})),
        calls(("r1", "add", {"a": 20, "b": 22})),  # the model retries the same call id
        text("42"),
    )
    events: list[TurnEvent] = []
    runner.on_event = events.append
    assert runner.start_turn(session, "add them", wait=True)["status"] == "completed"
    assert executions(tmp_path, "add") == 1
    rows = buffer(store, session)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    results = [e for e in events if e.kind == "tool_result"]
    assert [(e.data["appended"], e.data["reused"]) for e in results] == [(1, False), (0, True)]
    assert [e.data["appended"] for e in events if e.kind == "assistant"] == [1, 0, 1]
    assert fake_provider.rejected() == []


def test_mem_8_turn_reads_and_writes_the_owners_user_memory_never_the_callers(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store, owner="alice")
    store.put_record(Address("user", "admin", "fact"), "the admin's secret", None)
    fake_provider.script(
        calls(("m1", "remember", {"fact": "likes tea"})),
        calls(("m2", "recall", {})),
        text("noted"),
    )
    runner.start_turn(session, "remember that I like tea", wait=True)
    assert store.get_record(Address("user", "alice", "fact"), 0) == (True, "likes tea")
    assert store.get_record(Address("user", "admin", "fact"), 0) == (True, "the admin's secret")
    results = {
        r["metadata"]["tool_call_id"]: r["content"]
        for r in buffer(store, session)
        if r["role"] == "tool"
    }
    assert '"scope_id": "alice"' in results["m1"] and '"success": true' in results["m1"]
    assert '"value": "likes tea"' in results["m2"]


@pytest.mark.parametrize("owner", ["alice", None, "0", " "])
def test_mem_8_turn_context_is_the_sessions_memory_context_for_the_turn(
    owner: str | None, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, "http://127.0.0.1:9", counting_tools(tmp_path))
    session = new_session(store, owner=owner)
    context = turn_context(runner.agent_for(session), session, "t1")
    assert context == ExecutionContext(
        workflow_id="agent:helper",
        execution_id="t1",
        session_id=session.id,
        user_id=memory_context(session).user_id,
        metadata={"agent": "helper", "turn_id": "t1"},
    )
    assert context.user_id == ("alice" if owner == "alice" else None)


def test_mem_8_on_an_unowned_session_the_user_scope_refuses(
    fake_provider: FakeProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store, owner=None)
    fake_provider.script(
        calls(("n1", "remember", {"fact": "x"})), calls(("n2", "recall", {})), text("cannot")
    )
    with caplog.at_level("WARNING", logger="flowmem"):
        assert runner.start_turn(session, "remember x", wait=True)["status"] == "completed"
    results = {
        r["metadata"]["tool_call_id"]: r["content"]
        for r in buffer(store, session)
        if r["role"] == "tool"
    }
    assert results["n1"] == '{"success": false, "scope_id": ""}'
    assert results["n2"] == '{"found": false, "value": null, "scope_id": ""}'
    assert stored(store, "SELECT COUNT(*) FROM records WHERE scope = 'user'") == 0
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 2


def test_mem_7_a_refusal_inside_a_turn_names_the_tool_it_ran_at(
    fake_provider: FakeProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store, owner=None)
    fake_provider.script(
        calls(("n1", "remember", {"fact": "x"})), calls(("n2", "recall", {})), text("cannot")
    )
    with caplog.at_level("WARNING", logger="flowmem"):
        assert runner.start_turn(session, "remember x", wait=True)["status"] == "completed"
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    nodes = [getattr(r, "flowmem_node", None) for r in refusals]
    assert nodes == ["tool:remember", "tool:recall"]
    for record, node in zip(refusals, nodes, strict=True):
        assert f"at node {node!r}" in record.getMessage()
        assert getattr(record, "flowmem_workflow", None) == "agent:helper"


def test_mem_7_a_buffer_refusal_inside_a_turn_names_the_buffer_node(
    fake_provider: FakeProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The loop alone (no up-front check by the runner): a refused buffer call names its node."""
    from flowmem.runtime.loop import TurnLoop

    store = MemoryStore()
    runner = make_runner(
        store, fake_provider.base_url, counting_tools(tmp_path), memory=MemorySpec(scope="user")
    )
    loop = TurnLoop(runner.agents["helper"], runner.service, store, runner.state)
    fake_provider.script(text("ok"))
    with caplog.at_level("WARNING", logger="flowmem"):
        assert loop.run(new_session(store, owner=None), "hi", "turn-1").status == "completed"
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert refusals
    assert {getattr(r, "flowmem_node", None) for r in refusals} == {"conversation_buffer"}
    assert all("at node 'conversation_buffer'" in r.getMessage() for r in refusals)
    assert stored(store, "SELECT COUNT(*) FROM buffers") == 0


def test_mem_4_the_model_gets_the_system_prompt_then_the_history_in_order(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(text("first answer"), text("second answer"))
    runner.start_turn(session, "first", wait=True)
    runner.start_turn(session, "second", wait=True)
    sent = fake_provider.accepted()[-1].body["messages"]
    assert sent == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second"},
    ]


def test_mem_16_an_empty_system_prompt_sends_no_blank_system_message(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    runner.agents["helper"].system_prompt = ""
    session = new_session(store)
    fake_provider.script(text("ok"))
    runner.start_turn(session, "hello", wait=True)
    assert fake_provider.accepted()[0].body["messages"] == [{"role": "user", "content": "hello"}]
    assert buffer(store, session)[0] == {
        "role": "user",
        "content": "hello",
        "metadata": {},
        "timestamp": buffer(store, session)[0]["timestamp"],
    }


def test_mem_5_the_model_is_sent_the_normalized_buffer(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    events: list[TurnEvent] = []
    runner = make_runner(store, fake_provider.base_url, counting_tools(tmp_path), events=events)
    session = new_session(store)
    # another workflow wrote into the same buffer: a system row mid-history and an orphan result
    store.append(
        Address("session", session.id, "chat_history"),
        [
            {"role": "user", "content": "earlier", "metadata": {}},
            {"role": "system", "content": "Answer in French.", "metadata": {}},
            {"role": "tool", "content": "stray", "metadata": {"tool_call_id": "nobody"}},
            {"role": "assistant", "content": "d'accord", "metadata": {}},
        ],
    )
    fake_provider.script(text("bonjour"))
    assert runner.start_turn(session, "hello", wait=True)["status"] == "completed"
    sent = fake_provider.accepted()[0].body["messages"]
    assert sent == [
        {"role": "system", "content": SYSTEM},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "d'accord"},
        {"role": "user", "content": "hello"},
    ]
    request = next(e for e in events if e.kind == "model_request")
    assert request.data["messages"] == sent


def test_a_stalled_turn_released_as_stale_does_not_touch_the_next_turns_status(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    now = [1_000_000.0]
    gates = {name: (threading.Event(), threading.Event()) for name in ("clock", "weather")}

    def hook(name: str):  # type: ignore[no-untyped-def]
        def wait() -> None:
            gates[name][0].set()
            gates[name][1].wait(20)

        return wait

    tools = counting_tools(tmp_path, {"clock": hook("clock"), "weather": hook("weather")})
    stalled = make_runner(store, fake_provider.base_url, tools, clock=lambda: now[0])
    stalled.heartbeat = 1000.0  # its heartbeat never comes: the process is stalled
    other = make_runner(store, fake_provider.base_url, tools, clock=lambda: now[0])
    session = new_session(store)
    fake_provider.script(
        calls(("a1", "clock", {})),
        calls(("b1", "weather", {"city": "Oslo"})),
        text("A done"),
        text("B done"),
    )
    try:
        first = stalled.start_turn(session, "A", wait=False)
        assert gates["clock"][0].wait(20)
        now[0] += 31  # past stale_after (30 s) without a heartbeat
        second = other.start_turn(session, "B", wait=False)  # releases the stalled turn's session
        assert gates["weather"][0].wait(20)
        gates["clock"][1].set()
        assert stalled.wait(first["turn_id"], 20)["reply"] == "A done"
        assert store.get_session(session.id).status == "running"  # type: ignore[union-attr]
    finally:
        gates["clock"][1].set()
        gates["weather"][1].set()
    assert other.wait(second["turn_id"], 20)["reply"] == "B done"
    assert store.get_session(session.id).status == "completed"  # type: ignore[union-attr]
    assert fake_provider.rejected() == []


def test_stop_reaches_a_turn_running_in_another_process(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    store = MemoryStore()
    entered, release = threading.Event(), threading.Event()

    def block() -> None:
        entered.set()
        release.wait(20)

    worker = make_runner(store, fake_provider.base_url, counting_tools(tmp_path, {"clock": block}))
    other_worker = make_runner(store, fake_provider.base_url, counting_tools(tmp_path))
    session = new_session(store)
    fake_provider.script(calls(("k1", "clock", {}), ("k2", "add", {"a": 1, "b": 1})))
    started = worker.start_turn(session, "two calls", wait=False)
    try:
        assert entered.wait(20)
        assert other_worker.stop(session) is True
    finally:
        release.set()
    result = worker.wait(started["turn_id"], 20)
    assert result["reason"] == "stopped"
    assert executions(tmp_path, "add") == 0
    assert [r["role"] for r in buffer(store, session)] == ["user", "assistant", "tool"]
    assert other_worker.stop(session) is False  # nothing runs any more
    fake_provider.script(text("next"))
    assert worker.start_turn(session, "next", wait=True)["reason"] == "answered"
