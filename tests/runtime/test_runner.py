"""What ``AgentRunner`` keeps of finished turns: bounded by a count and an age, measured.

The memory test measures the Python heap with ``tracemalloc`` (SQLite's own page
cache is not Python memory, so the store does not count): over 1,000 background
turns with 20 KB replies, the runner's heap must stop growing once its table of
finished turns is full.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from flowmem.core import Message
from flowmem.errors import ConfigurationError, NotFoundError
from flowmem.runtime.agent import Agent, MemorySpec
from flowmem.runtime.models import ModelReply
from flowmem.runtime.runner import DEFAULT_KEEP_RESULTS, AgentRunner
from flowmem.runtime.serving import runner_from_env
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, Store, open_store
from tests.runtime.helpers import new_session

REPLY_BYTES = 20_000


class BigReplies:
    """A model whose every reply is a new ``REPLY_BYTES`` string (no two share memory)."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """Answer with a fresh large text."""
        self.calls += 1
        return ModelReply(f"{self.calls:08d}" + "x" * REPLY_BYTES)


def runner_on(store: Store, **options: Any) -> AgentRunner:
    """A runner with one agent on ``BigReplies`` whose window keeps the buffer small."""
    agent = Agent("helper", BigReplies(), "", memory=MemorySpec(max_messages=2), max_steps=1)
    return AgentRunner(store, MemoryService(store), [agent], **options)


def run_turns(runner: AgentRunner, store: Store, count: int) -> None:
    """Run ``count`` background turns one after another; nobody asks for their results."""
    session = new_session(store)
    for index in range(count):
        started = runner.start_turn(session, f"turn {index}", wait=False)
        with runner._lock:
            turn = runner._turns.get(started["turn_id"])
        if turn is not None:
            assert turn.done.wait(20)


def test_runner_memory_stays_bounded_over_500_turns(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'turns.db'}?synchronous=OFF")
    runner = runner_on(store)  # the defaults: at most DEFAULT_KEEP_RESULTS (100) kept
    try:
        run_turns(runner, store, 100)  # warm up: statement caches, the finished-turn table
        gc.collect()
        tracemalloc.start()
        try:
            # 150 traced turns: every result the runner keeps now was allocated under tracing
            run_turns(runner, store, 150)
            gc.collect()
            after_250 = tracemalloc.get_traced_memory()[0]
            run_turns(runner, store, 250)
            gc.collect()
            after_500 = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        # unbounded, 250 more turns would hold 250 x 20 KB = 5 MB more
        assert after_500 - after_250 < 1_000_000, (after_250, after_500)
        assert len(runner._turns) <= DEFAULT_KEEP_RESULTS >= len(runner._finished)
    finally:
        runner.close()
        store.close()


def test_a_finished_turn_is_askable_until_its_age_runs_out() -> None:
    store = MemoryStore()
    runner = runner_on(store, keep_results_for=0.2)
    session = new_session(store)
    started = runner.start_turn(session, "hi", wait=False)
    finished = runner.wait(started["turn_id"], 20)
    assert finished["status"] == "completed"
    assert runner.turn(started["turn_id"]) == finished  # asking again still works
    time.sleep(0.3)
    with pytest.raises(NotFoundError):
        runner.turn(started["turn_id"])
    assert runner._turns == {} and not runner._finished


def test_only_the_newest_finished_turns_are_kept() -> None:
    store = MemoryStore()
    runner = runner_on(store, keep_results=2)
    session = new_session(store)
    ids = []
    for index in range(4):
        started = runner.start_turn(session, f"turn {index}", wait=False)
        runner.wait(started["turn_id"], 20)
        ids.append(started["turn_id"])
    with pytest.raises(NotFoundError):
        runner.turn(ids[0])
    with pytest.raises(NotFoundError):
        runner.turn(ids[1])
    assert runner.turn(ids[3])["status"] == "completed"
    assert set(runner._turns) == set(ids[2:])


def test_a_turn_run_with_wait_hands_its_result_over_and_keeps_nothing() -> None:
    store = MemoryStore()
    runner = runner_on(store)
    result = runner.start_turn(new_session(store), "hi", wait=True)
    assert result["status"] == "completed" and len(result["reply"]) > REPLY_BYTES
    assert runner._turns == {} and not runner._finished
    with pytest.raises(NotFoundError):
        runner.turn(result["turn_id"])


def test_the_servers_runner_keeps_no_results_since_no_route_can_ask_for_them() -> None:
    store = MemoryStore()
    runner = runner_from_env(store, MemoryService(store), {"FLOWMEM_MODEL": "m"})
    assert runner is not None and runner.keep_results == 0


@pytest.mark.parametrize(
    "options", [{"keep_results": -1}, {"keep_results": True}, {"keep_results_for": -1.0}]
)
def test_result_retention_settings_are_checked(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        runner_on(MemoryStore(), **options)
