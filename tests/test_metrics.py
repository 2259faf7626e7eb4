"""The metrics seam (``flowmem.metrics``): what the service, stores and sessions report, and when."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem import metrics
from flowmem.access import Principal
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.sessions import SessionService
from flowmem.store import Address, open_store
from tests.store.test_concurrency import held_by_another_thread

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


class RecordingSink:
    """A sink that keeps what it is told: counters summed, observations listed."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        self.observed: list[tuple[str, float, dict[str, str]]] = []

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        self.counts[(name, tuple(sorted(labels.items())))] += amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        self.observed.append((name, value, labels))

    def count(self, name: str, **labels: str) -> float:
        return self.counts[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def sink() -> Iterator[RecordingSink]:
    recording = RecordingSink()
    metrics.install(recording)
    try:
        yield recording
    finally:
        metrics.install(None)


@pytest.fixture(params=["memory", "sqlite"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'm.db'}"
    store = open_store(url)
    yield MemoryService(store)
    store.close()


ALICE = ExecutionContext(user_id="alice")


def test_mem_3_mem_10_mem_1_an_append_reports_what_its_rules_did(
    sink: RecordingSink, service: MemoryService
) -> None:
    service.append("user", "chat", [{"role": "assistant", "content": "", "tool_calls": [CALL]}], ALICE)
    service.append("user", "chat", [{"role": "user", "content": "still there?"}], ALICE)
    late = {"role": "tool", "tool_call_id": "c1", "content": "late"}
    service.append("user", "chat", [late, {**late, "content": "again"}], ALICE)
    assert sink.count("appends") == 3
    assert sink.count("messages_appended") == 2
    assert sink.count("heals") == 1
    assert sink.count("placeholder_replacements") == 1
    assert sink.count("deduplicated_messages") == 1
    lengths = [value for name, value, _ in sink.observed if name == "buffer_messages"]
    assert lengths == [1, 3, 3]


def test_mem_14_an_append_of_nothing_is_a_read_and_is_not_counted(
    sink: RecordingSink, service: MemoryService
) -> None:
    service.append("user", "chat", [{"role": "user", "content": ""}], ALICE)
    assert sink.count("appends") == 0


def test_mem_6_mem_13_refusals_are_counted_by_rule_and_code(
    sink: RecordingSink, service: MemoryService
) -> None:
    row = {"role": "user", "content": "x"}
    service.append("user", "chat", [row], ExecutionContext(user_id="None"))
    service.append("session", "chat", [row], ExecutionContext(user_id="alice"))
    service.read("user", "k", None)
    assert sink.count("refusals", rule="MEM-6", code="placeholder_user_id") == 1
    assert sink.count("refusals", rule="MEM-13", code="no_session_id") == 1
    assert sink.count("refusals", rule="MEM-6", code="no_context") == 1
    assert sink.count("appends") == 0


def test_mem_12_a_lock_wait_past_the_bound_is_counted_as_a_timeout(
    sink: RecordingSink, tmp_path: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        with held_by_another_thread(store, Address("user", "alice", "chat")):
            MemoryService(store, lock_timeout=0.05).append_raw(
                "user", "alice", "chat", [{"role": "user", "content": "x"}]
            )
    finally:
        store.close()
    assert sink.count("lock_timeouts", backend="process") == 1
    waits = [value for name, value, labels in sink.observed if name == "lock_wait_seconds"]
    assert len(waits) == 2 and max(waits) >= 0.05  # the holder's and the one that timed out


def test_a_turn_without_a_runner_is_counted_completed(
    sink: RecordingSink, tmp_path: Path
) -> None:
    store = open_store("memory://")
    memory = MemoryService(store)
    sessions = SessionService(store, memory, None)
    owner = Principal("alice", frozenset({"sessions:create"}), "t1")
    session = sessions.create(owner, name="s")
    sessions.send_turn(owner, session.id, "hello")
    assert sink.count("turns", status="completed", reason="recorded") == 1


def test_with_no_sink_installed_the_seam_does_nothing(service: MemoryService) -> None:
    assert metrics.installed() is None
    result = service.append("user", "chat", [{"role": "user", "content": "x"}], ALICE)
    assert result.appended == 1


def test_tracing_is_off_by_default_and_a_span_is_then_nothing() -> None:
    with metrics.span("flowmem.append", scope="user") as current:
        assert current is None


class _Answers:
    """A model that answers every turn with one line."""

    def complete(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        """Answer with a fixed text."""
        from flowmem.runtime.models import ModelReply

        return ModelReply("noted")


def test_traces_an_append_and_a_turn_when_enabled_and_counts_the_turn(
    sink: RecordingSink,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from flowmem.runtime.agent import Agent
    from flowmem.runtime.runner import AgentRunner
    from tests.runtime.helpers import new_session

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics.enable_tracing(provider.get_tracer("flowmem"))
    try:
        store = open_store("memory://")
        memory = MemoryService(store)
        memory.append("user", "chat", [{"role": "user", "content": "x"}], ALICE)
        runner = AgentRunner(store, memory, [Agent("helper", _Answers(), "")])
        result = runner.start_turn(new_session(store), "hello", wait=True)
    finally:
        metrics.enable_tracing(None)
    assert result["status"] == "completed"
    spans = exporter.get_finished_spans()
    appends = [s for s in spans if s.name == "flowmem.append"]
    (turn,) = [s for s in spans if s.name == "flowmem.turn"]
    assert dict(appends[0].attributes or {}) == {"scope": "user", "key": "chat"}
    assert turn.attributes is not None and turn.attributes["turn_id"] == result["turn_id"]
    inside = [s for s in appends if s.parent is not None and s.parent.span_id == turn.context.span_id]
    assert inside, "the turn's appends are spans inside the turn's"
    assert sink.count("turns", status="completed", reason="answered") == 1
