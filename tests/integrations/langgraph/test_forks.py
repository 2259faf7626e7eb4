"""A checkpoint's write never waits for a task's pending writes being stored; a refusal still does (decision 0160).

LangGraph stores a step's pending writes and its next checkpoint from two background
threads at once. Both checked the refused runs under one lock per thread stripe,
and the pending writes held it while they were stored, so the checkpoint waited for
their commit: two commits (two fsyncs) one after the other on every step. Writes now
hold the stripe together (``Turns.writing``); a refusal (``ThreadForkedError``:
record it, delete the run's pending writes) holds it alone, after every write that
holds it, so no write of a refused run lands after its refusal.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from flowmem.errors import ThreadForkedError
from flowmem.integrations.langgraph.forks import RefusedCheckpoints, Turns
from flowmem.integrations.langgraph.saver import FlowmemSaver
from flowmem.store.checkpoints import PendingWrites

WAIT = 5.0
"""How long a test waits for a call that should not be held."""
HELD = 0.3
"""How long a test gives a call that must stay held to (wrongly) get through."""


def _config(thread: str, checkpoint: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint is not None:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}


def test_a_checkpoint_is_stored_while_a_tasks_pending_writes_of_its_thread_are_being_stored(
    saver: FlowmemSaver,
) -> None:
    first = saver.put(_config("t"), empty_checkpoint(), {"source": "input", "step": -1}, {})
    parent = first["configurable"]["checkpoint_id"]
    storing, release = threading.Event(), threading.Event()
    put_writes = saver.tables.put_writes

    def slow_put_writes(pending: PendingWrites) -> None:
        storing.set()
        release.wait(30)
        put_writes(pending)

    saver.tables.put_writes = slow_put_writes  # type: ignore[method-assign]
    task = threading.Thread(target=saver.put_writes, args=(_config("t", parent), [("x", 1)], "task-1"))
    task.start()
    try:
        assert storing.wait(WAIT)
        stored = threading.Event()

        def put() -> None:
            saver.put(_config("t", parent), empty_checkpoint(), {"source": "loop", "step": 0}, {})
            stored.set()

        threading.Thread(target=put).start()
        assert stored.wait(WAIT), "the checkpoint waited for the pending writes being stored"
    finally:
        release.set()
        task.join(30)
    found = saver.get_tuple(_config("t", parent))
    assert found is not None and found.pending_writes == [("task-1", "x", 1)]


def test_a_refusal_waits_for_the_writes_that_hold_its_stripe_and_later_writes_wait_for_it() -> None:
    turns = Turns()
    order: list[str] = []
    in_write, end_write = threading.Event(), threading.Event()

    def write(name: str, hold: threading.Event | None = None) -> None:
        with turns.writing():
            order.append(f"{name} in")
            if hold is not None:
                in_write.set()
                hold.wait(30)
            order.append(f"{name} out")

    def refuse() -> None:
        with turns.refusing():
            order.append("refusal")

    first = threading.Thread(target=write, args=("w1", end_write))
    first.start()
    assert in_write.wait(WAIT)
    beside = threading.Thread(target=write, args=("w2",))
    beside.start()
    beside.join(WAIT)  # a write beside a write: not held
    refusal = threading.Thread(target=refuse)
    refusal.start()
    refusal.join(HELD)
    assert refusal.is_alive()  # held by w1
    later = threading.Thread(target=write, args=("w3",))
    later.start()
    later.join(HELD)
    assert later.is_alive()  # after the refusal that waits
    end_write.set()
    for thread in (first, refusal, later):
        thread.join(WAIT)
    assert order == ["w1 in", "w2 in", "w2 out", "w1 out", "refusal", "w3 in", "w3 out"]


def test_a_write_of_a_refused_run_is_refused_after_its_refusal() -> None:
    refused = RefusedCheckpoints()
    with refused.writing("t"):
        refused.check("t", "", "c1", "run-1")  # nothing refused yet
    with refused.refusing("t"):
        refused.add("t", "", "c1", "run-1")
    with refused.writing("t"), pytest.raises(ThreadForkedError):
        refused.check("t", "", "c2", "run-1")  # the run's other checkpoints too
    with refused.writing("t"):
        refused.check("t", "", "c2", "run-2")
